//! The sequential specification of a manager stack (`FixedSizeCache` of capacity
//! [`MAX_SIZE`] over a `Traced` layer over the base), for the linearizability check of generated
//! programs.
//!
//! Neither a cold add nor a remove is one atomic step in the real stack, so the history holds
//! finer events:
//! - every unload (of a remove, or of an add's eviction) is its own event ([`Op::Unload`]),
//!   recorded from inside the scripted unload, with the call it ran for;
//! - each add is split into [`Op::AddRoom`] (admitted: its slot claimed against the capacity,
//!   or found registered) and [`Op::AddLoad`] (its load ended), both with the add's interval and
//!   result, the second only after the first. Registered models plus claimed slots never exceed
//!   the capacity.
//! - each `set_max_size` is split the same way into [`Op::ResizeSet`] (the new limit holds for
//!   every later admission) and [`Op::ResizeDone`] (its result: `Ok` once registered models plus
//!   claimed slots fit the limit, `OverLimit` only while they do not). Its evictions are unload
//!   events run for it.
//!
//! Everything goes by resolved id (an index into `RESOLVED`, the alias included): which model
//! an add loads does not matter to the specification. Loads and unloads of one resolved id are
//! serialised by its lifecycle lock, so their scripts go by resolved id too (the alias's loads
//! and unloads succeed).
//!
//! A `Load` error without a load of its own is allowed where an add of the same model under
//! the same resolved id that failed overlapped: it waited for that load and shares
//! its failure (SPEC 1.9).
//!
//! Results that only contention explains (`LockTimeout`, `Busy`, `CapacityExhausted` with room,
//! `Removing`) are allowed only where a call that could cause them overlapped. When deadlines
//! fire at any point ([`Stack::any_time`]) two more are explained: a wait for room that timed out
//! while a remove that unloaded had not returned yet (it keeps its slot until then), and a drain
//! that timed out on the lease of an overlapping `infer`.

use super::linearizability::{Call, Spec, overlapping, overlapping_at};
use super::program::{Faults, MAX_SIZE, RESOLVED};
use resident_sim::world::manager::Step;

/// A call or event of the history.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Op {
    /// `add_model(IDS[c], alias)` registering `RESOLVED[r]`, or (`built`) `register` of a
    /// model of `IDS[c]` built outside the stack, as recorded (split by [`split_calls`] before
    /// checking).
    Add {
        /// Index into `RESOLVED`: the id the model is registered under.
        r: usize,
        /// Index into `IDS`: the model it loads.
        c: usize,
        /// A register: no load (it cannot fail), and `AlreadyRegistered` where an add is warm.
        built: bool,
    },
    /// The add at index `add` of the history is admitted (or finds `RESOLVED[r]` registered).
    AddRoom {
        /// Index into `RESOLVED`.
        r: usize,
        /// Index into `IDS`.
        c: usize,
        /// This event's own index.
        add: usize,
        /// A register.
        built: bool,
    },
    /// The add whose room event is at index `add` ends its load (or its warm check).
    AddLoad {
        /// Index into `RESOLVED`.
        r: usize,
        /// Index into `IDS`.
        c: usize,
        /// The index of the add's [`Op::AddRoom`].
        add: usize,
        /// A register.
        built: bool,
    },
    /// `remove(RESOLVED[i])`.
    Remove(usize),
    /// `evict_locked` of `RESOLVED[i]` under its lock: unloaded if nothing protects it (no pin,
    /// no live lease), else kept.
    Evict(usize),
    /// An unload of the model registered under `RESOLVED[v]`, run for the call at index `by` (a
    /// remove, or an add's eviction).
    Unload {
        /// Index into `RESOLVED`.
        v: usize,
        /// The history index of the call it ran for.
        by: usize,
    },
    /// The lock of `RESOLVED[i]` kept after a step under it (`ThreadOp::Locked`): changes
    /// nothing, but may explain another call's wait for that lock timing out.
    Hold(usize),
    /// `lease(RESOLVED[i])` (acquired).
    Lease(usize),
    /// A lease of `RESOLVED[i]` dropped.
    EndLease(usize),
    /// `pin(RESOLVED[i])`.
    Pin(usize),
    /// `unpin(RESOLVED[i])`.
    Unpin(usize),
    /// `infer(RESOLVED[i], f)`: a lease taken and dropped within the call (a drain that times
    /// out while it overlaps may be explained by it).
    Infer(usize),
    /// `replace(IDS[i], None, …)`: takes effect when it switches the registry to the new
    /// version (or adds it, if none was registered); the old version's unload is an event of its
    /// own, after that. Like an add it needs room — for both versions — and may evict.
    Replace(usize),
    /// `replace_in_place(IDS[i], None, …)`: its unload of the old version is an event of its
    /// own, which leaves the id swapping (unregistered, its slot still counted, its leases
    /// waiting); it takes effect when the new version is registered or failed to load. Nothing
    /// registered: it adds, like a replace.
    Swap(usize),
    /// `shutdown(…)`: takes effect when it refuses from then on; its unloads are events of
    /// their own ([`Op::Unload`]), and the runner checks its report.
    Shutdown,
    /// `set_max_size(n, …)` of the outermost cache, as recorded (split by [`split_calls`]).
    Resize(usize),
    /// `clear(…)`, as recorded (split by [`split_calls`]): it locks every id in turn, and its
    /// unloads are events of their own ([`Op::Unload`]).
    Clear,
    /// The clear at index `start` of the history takes its list: the ids registered now.
    ClearStart {
        /// This event's own index.
        start: usize,
    },
    /// The clear whose list event is at index `start` returns: every listed id is gone, or
    /// reported (its result's mask), or registered again by an overlapping call.
    ClearDone {
        /// The index of the clear's [`Op::ClearStart`].
        start: usize,
    },
    /// The resize at index `set` of the history sets the limit to `n`.
    ResizeSet {
        /// The new `max_size`.
        n: usize,
        /// This event's own index.
        set: usize,
    },
    /// The resize whose limit event is at index `set` returns.
    ResizeDone {
        /// The new `max_size`.
        n: usize,
        /// The index of the resize's [`Op::ResizeSet`].
        set: usize,
    },
    /// The registered ids once every thread has finished.
    Final,
    /// The ids `is_pinned` reports once every thread has finished.
    FinalPins,
}

/// A result, reduced to what the specification decides.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Ret {
    /// `Added::Loaded`.
    Loaded,
    /// `Added::Warm`.
    Warm,
    /// `AlreadyRegistered`: a register found the id registered.
    AlreadyRegistered,
    /// `Ok(())` (remove, lease, pin, unpin, end of a lease, an unload).
    Done,
    /// `NotFound` (or, for an eviction, `Eviction::NotRegistered`).
    NotFound,
    /// `Eviction::Pinned` or `Eviction::InUse`: an eviction skipped its model.
    Kept,
    /// A `Load` error.
    LoadFailed,
    /// A `Load` error whose source is the expiry of a bounded wait inside the load (the
    /// caller's own, [`Step::Expire`]): never shared with other callers (SPEC 1.9).
    Expired,
    /// An `Unload` error of `RESOLVED[i]` (a removal's own, or an eviction victim's), or a
    /// failed unload event.
    UnloadFailed(usize),
    /// `Busy`: live leases outlasted the drain.
    Busy,
    /// `Removing`: a lease of a model being removed.
    Removing,
    /// `LockTimeout`.
    LockTimeout,
    /// `CapacityExhausted`.
    CapacityExhausted,
    /// `ShutDown`: refused by a shut-down stack.
    ShutDown,
    /// `OverLimit`: a lowered `max_size` not reached in time.
    OverLimit,
    /// `NoSlotBeside`: a replace refused at once, with no slot for the new version beside the
    /// old one once every other pinned model is counted.
    NoSlotBeside,
    /// The registered ids (a bit mask over `RESOLVED`), for [`Op::Final`].
    Registered(u8),
    /// The pinned ids (a bit mask over `RESOLVED`), for [`Op::FinalPins`].
    Pinned(u8),
    /// Anything else (never allowed).
    Unexpected(String),
}

/// The specification's state.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default)]
pub struct State {
    /// Over `RESOLVED`.
    registered: u8,
    pinned: u8,
    leases: [u8; 4],
    /// Leases on old versions a replace switched out (they protect nothing registered).
    retired: [u8; 4],
    /// Ids an in-place replace unloaded whose new version is not settled yet (over `RESOLVED`).
    swapping: u8,
    loads: [u8; 4],
    unloads: [u8; 4],
    /// Adds (by their room event's index) admitted or ended early.
    roomed: u128,
    /// Adds holding a claimed slot (admitted, load not ended).
    claims: u128,
    /// Calls whose own unload succeeded, and whose own unload failed.
    unloaded_by: u128,
    failed_by: u128,
    /// Calls that unloaded the model they loaded and a shutdown refused (once each).
    refused_by: u128,
    /// A shutdown took effect.
    shut_down: bool,
    /// The outermost cache's `max_size` last set (0: as built).
    max_size: u8,
    /// The ids registered when the (one) clear of the program took its list.
    clear_list: u8,
}

impl State {
    fn has(mask: u8, i: usize) -> bool {
        mask & (1 << i) != 0
    }

    /// Registered models, swapping ids (the cache keeps their slot) and claimed slots.
    fn occupied(&self) -> usize {
        ((self.registered | self.swapping).count_ones() + self.claims.count_ones()) as usize
    }
}

/// An unload event: its index in the history, the id it unloads (over `RESOLVED`) and the index
/// of the call it ran for.
type Unloading = (usize, usize, usize);

fn bit(at: usize) -> u128 {
    1u128 << at
}

/// Splits every [`Op::Add`] of `history` into its room and load events, and every
/// [`Op::Resize`] into its limit and return events (same interval, same result), and points
/// every [`Op::Unload`] at the new index of the call it ran for.
pub fn split_calls(history: &[Call<Op, Ret>]) -> Vec<Call<Op, Ret>> {
    let mut index = Vec::with_capacity(history.len());
    let mut next = 0;
    for call in history {
        index.push(next);
        next += if matches!(call.op, Op::Add { .. } | Op::Resize(_) | Op::Clear) { 2 } else { 1 };
    }
    let mut split = Vec::with_capacity(next);
    for call in history {
        match call.op {
            Op::Add { r, c, built } => {
                let add = split.len();
                split.push(Call { op: Op::AddRoom { r, c, add, built }, ..call.clone() });
                split.push(Call { op: Op::AddLoad { r, c, add, built }, ..call.clone() });
            }
            Op::Resize(n) => {
                let set = split.len();
                split.push(Call { op: Op::ResizeSet { n, set }, ..call.clone() });
                split.push(Call { op: Op::ResizeDone { n, set }, ..call.clone() });
            }
            Op::Clear => {
                let start = split.len();
                split.push(Call { op: Op::ClearStart { start }, ..call.clone() });
                split.push(Call { op: Op::ClearDone { start }, ..call.clone() });
            }
            Op::Unload { v, by } => split.push(Call { op: Op::Unload { v, by: index[by] }, ..call.clone() }),
            _ => split.push(call.clone()),
        }
    }
    split
}

/// The specification, with the program's faults.
#[derive(Debug, Clone)]
pub struct Stack {
    /// What loads and unloads do, call by call.
    pub faults: Faults,
    /// How many models the stack holds ([`MAX_SIZE`], but for a narrow
    /// nested stack).
    pub capacity: usize,
    /// Deadlines fire at any scheduling point (not only while every thread is blocked).
    pub any_time: bool,
    /// Every cache runs the `Overflow` policy: a cold add (or a replace) that finds no idle
    /// victim loads past the capacity at once, never refused `CapacityExhausted` (SPEC 2.7).
    pub overflow: bool,
}

fn script(steps: &[Step], call: u8) -> Step {
    steps.get(usize::from(call)).copied().unwrap_or(Step::Ok)
}

/// The script of `RESOLVED[r]` among `scripts` (one per model id; the alias's is empty).
fn of(scripts: &[Vec<Step>], r: usize) -> &[Step] {
    scripts.get(r).map_or(&[], Vec::as_slice)
}

/// Whether some other call for which `relevant` holds overlapped call `at`.
fn overlapped(history: &[Call<Op, Ret>], at: usize, relevant: impl Fn(&Op) -> bool) -> bool {
    overlapping(history, at, |call| relevant(&call.op))
}

/// A call that succeeded, or panicked (and may have).
fn may_have_succeeded(call: &Call<Op, Ret>) -> bool {
    matches!(call.ret, None | Some(Ret::Done))
}

/// Whether something that holds the lifecycle lock of `RESOLVED[i]` overlapped call `at`: another
/// add (its own id's lock, or the lock of a victim it evicts), a remove, pin or unpin of
/// `RESOLVED[i]`, a shutdown (it locks every id in turn), a resize (it locks its victims).
fn lock_contended(history: &[Call<Op, Ret>], at: usize, i: usize) -> bool {
    overlapped(history, at, |op| match *op {
        Op::AddRoom { add, .. } => add != at,
        Op::ResizeSet { set, .. } => set != at,
        Op::Replace(_) | Op::Swap(_) | Op::Shutdown | Op::ClearStart { .. } => true,
        Op::Remove(j) | Op::Evict(j) | Op::Hold(j) | Op::Pin(j) | Op::Unpin(j) => j == i,
        _ => false,
    })
}

/// Whether an overlapping call may have held the lifecycle lock of `RESOLVED[j]`, or a lease of
/// it, while call `at` evicted: an eviction skips such a victim. Any other call that evicts may
/// hold a victim's lock for a moment and let it go unevicted (it planned again, or found it in
/// use), so every one of them counts, as for [`lock_contended`].
fn locked_beside(history: &[Call<Op, Ret>], at: usize, j: usize) -> bool {
    lock_contended(history, at, j) || overlapped(history, at, |op| *op == Op::Infer(j))
}

/// Whether `op` may change what a replace's check for a slot beside its old version reads: the
/// pins, the limit, or the queue (a pinned model a removal unloaded stays queued until the
/// removal returns).
fn moves_the_slot_beside(op: &Op) -> bool {
    matches!(
        op,
        Op::Pin(_)
            | Op::Unpin(_)
            | Op::Resize(_)
            | Op::ResizeSet { .. }
            | Op::Remove(_)
            | Op::ClearStart { .. }
    )
}

impl Stack {
    /// The capacity the stack behaves as in state `s`: the outermost cache's `max_size`, within
    /// the inner one's.
    fn cap(&self, s: &State) -> usize {
        match s.max_size {
            0 => self.capacity,
            n => usize::from(n).min(self.capacity),
        }
    }

    /// The outermost cache's `max_size` in state `s`.
    fn limit(s: &State) -> usize {
        if s.max_size == 0 { MAX_SIZE } else { usize::from(s.max_size) }
    }

    /// Whether the add or replace of `RESOLVED[i]` (call `at`) may claim a slot in state `s`: one
    /// is free; or, under the `Overflow` policy, none of the models it could evict is idle (each
    /// is pinned, leased, or was locked by an overlapping call, which the eviction skips), so it
    /// loads past the capacity once it evicted every idle one.
    fn room(&self, s: &State, history: &[Call<Op, Ret>], at: usize, i: usize) -> bool {
        let idle = |j: usize| {
            j != i
                && State::has(s.registered & !s.swapping & !s.pinned, j)
                && s.leases[j] == 0
                && !locked_beside(history, at, j)
        };
        s.occupied() < self.cap(s) || (self.overflow && !(0..RESOLVED.len()).any(idle))
    }

    /// The result of the resize whose limit event is `set` (call `at`): `Ok` once the stack fits
    /// its limit; `OverLimit` only while it does not, or while a slot the cache counts is held
    /// by an overlapping call: a call that unloaded (until it settles the queue), a cold add's
    /// claim (made before its evictions, kept while it waits for room), a replace's claim for
    /// its new version.
    fn resized(&self, s: &State, history: &[Call<Op, Ret>], at: usize, set: usize) -> bool {
        match history[at].ret.as_ref() {
            None => true,
            // The outermost cache's own count: under the `Overflow` policy a narrower cache
            // below may hold more than its limit while the outermost fits its own.
            Some(Ret::Done) if self.overflow => s.occupied() <= Self::limit(s),
            Some(Ret::Done) => s.occupied() <= self.cap(s),
            Some(Ret::OverLimit) => {
                // A cold add claims its slot before it evicts for it, and keeps it while it waits
                // for room (until it fails, if it does): the cache may count it beside the
                // victims the specification still holds registered. A warm add claims none.
                let claiming = |c: &Call<Op, Ret>| {
                    matches!(c.op, Op::AddRoom { .. })
                        && !matches!(c.ret, Some(Ret::Warm | Ret::AlreadyRegistered))
                };
                s.occupied() > self.cap(s)
                    || self.removal_holds_room(history, at)
                    || overlapped(history, at, |op| matches!(op, Op::Replace(_) | Op::Swap(_)))
                    || overlapping(history, at, claiming)
            }
            // An eviction's unload failed (a busy victim is skipped: never `LockTimeout`).
            Some(Ret::UnloadFailed(_)) => s.failed_by & bit(set) != 0,
            Some(_) => false,
        }
    }

    /// Whether the result of the clear whose list event is `start` (call `at`) is explained:
    /// `Done` only if none of its unloads failed; every listed id it does not report (in its
    /// `Registered` mask) is gone, or registered again by an overlapping add, register or
    /// replace.
    fn cleared(&self, s: &State, history: &[Call<Op, Ret>], at: usize, start: usize) -> bool {
        let reported = match history[at].ret.as_ref() {
            None => return true,
            Some(Ret::Done) if s.failed_by & bit(start) == 0 => 0,
            // A reported id may be one the specification already unregistered: a remove's
            // unload event comes before the registry forgets the id, which the clear may list.
            Some(Ret::Registered(mask)) if *mask != 0 => *mask,
            Some(_) => return false,
        };
        let unreported = s.clear_list & !reported;
        (0..4).filter(|&i| State::has(unreported, i) && State::has(s.registered, i)).all(|i| {
            overlapped(
                history,
                at,
                |op| matches!(op, Op::AddRoom { r: j, .. } | Op::Replace(j) | Op::Swap(j) if *j == i),
            )
        })
    }

    /// A remove keeps its model's slot from its unload to its return, and so does every other
    /// call that unloads (a shutdown, an add's, a replace's or a resize's eviction) until it
    /// settles that model's queue entry; so when deadlines fire at any point an overlapping one
    /// that unloaded also explains a wait for room that timed out.
    fn removal_holds_room(&self, history: &[Call<Op, Ret>], at: usize) -> bool {
        let end = history[at].response;
        // The call at `by` began an unload before call `at` returned.
        let unloading = |by: usize| {
            history.iter().any(|u| {
                matches!(u.op, Op::Unload { by: b, .. } if b == by) && end.is_none_or(|end| u.invoke < end)
            })
        };
        self.any_time
            && overlapping_at(history, at, |j, c| {
                (matches!(c.op, Op::Remove(_)) && may_have_succeeded(c)) || unloading(j)
            })
    }

    /// The states an in-place replace of `RESOLVED[i]` (call `at`) can lead to from `s`: once
    /// its own unload event succeeded, its new version's load decides (registered, or the id
    /// gone); before that, only a refusal that changes nothing. Nothing registered: it adds,
    /// like a replace.
    fn swap(&self, s: &State, history: &[Call<Op, Ret>], at: usize, i: usize) -> Vec<State> {
        let ret = history[at].ret.as_ref();
        let is = |expected: Ret| ret.is_none_or(|r| *r == expected);
        let own = bit(at);
        let mut next = s.clone();
        next.roomed |= own;
        if State::has(s.swapping, i) {
            if s.unloaded_by & own == 0 {
                // Another call's swap: this one waited for the lock and comes after it.
                return Vec::new();
            }
            next.swapping &= !(1 << i);
            let mut out = Vec::new();
            // A panic of the old version's `Drop` ends the call before the load.
            if ret.is_none() {
                out.push(next.clone());
            }
            next.loads[i] += 1;
            match script(of(&self.faults.loads, i), s.loads[i]) {
                // Loaded after a shutdown began: refused at its registration, the id left
                // unregistered (its old version is gone already).
                Step::Ok if s.shut_down && ret == Some(&Ret::ShutDown) => out.push(next),
                Step::Ok if is(Ret::Done) => {
                    next.registered |= 1 << i;
                    out.push(next);
                }
                Step::Fail if is(Ret::LoadFailed) => out.push(next),
                Step::Expire if is(Ret::Expired) => out.push(next),
                Step::Panic if ret.is_none() => out.push(next),
                _ => {}
            }
            return out;
        }
        // A refusal of a registered id changes nothing, also one that got past the shutdown
        // check just before a shutdown.
        if !State::has(s.registered, i) {
            return self
                .replace(s, history, at, i)
                .into_iter()
                .map(|mut n| {
                    n.roomed |= own;
                    n
                })
                .collect();
        }
        let failed = s.failed_by & own != 0;
        let inferring =
            || self.any_time && overlapping(history, at, |c| c.op == Op::Infer(i) && may_have_succeeded(c));
        let refused = match ret {
            None => true,
            Some(Ret::ShutDown) => s.shut_down,
            Some(Ret::Busy) => !failed && (s.leases[i] > 0 || inferring()),
            Some(Ret::UnloadFailed(v)) => *v == i && failed,
            Some(Ret::LockTimeout) => lock_contended(history, at, i),
            Some(_) => false,
        };
        if refused { vec![next] } else { Vec::new() }
    }

    /// The states a replace of `RESOLVED[i]` (call `at`) can lead to from `s`.
    fn replace(&self, s: &State, history: &[Call<Op, Ret>], at: usize, i: usize) -> Vec<State> {
        let ret = history[at].ret.as_ref();
        let registered = State::has(s.registered, i);
        let mut out = Vec::new();
        let timed_out = ret == Some(&Ret::LockTimeout) && lock_contended(history, at, i);
        let others = || {
            overlapped(
                history,
                at,
                |op| matches!(op, Op::AddRoom { r: j, .. } | Op::Replace(j) | Op::Swap(j) if *j != i),
            )
        };
        // No slot beside the old version can ever come (the outermost layer's limit, every other
        // slot pinned), and nothing overlapping changed that: refused at once, never a wait
        // for capacity (S-R2).
        let limit = Self::limit(s);
        let no_slot_due = registered
            && limit <= (s.registered & s.pinned & !(1 << i)).count_ones() as usize + 1
            && !overlapped(history, at, |op| {
                moves_the_slot_beside(op) || matches!(op, Op::AddRoom { .. } | Op::Replace(_) | Op::Swap(_))
            });
        let full = ret == Some(&Ret::CapacityExhausted)
            && !self.overflow
            && !no_slot_due
            && (s.occupied() >= self.cap(s) || others() || self.removal_holds_room(history, at));
        // One of the victims it evicted to make room failed to unload.
        let failed_eviction =
            matches!(ret, Some(Ret::UnloadFailed(v)) if *v != i) && s.failed_by & bit(at) != 0;
        if s.shut_down {
            // Refused; or it got past the check before the shutdown and then ran out of room.
            if ret.is_none() || ret == Some(&Ret::ShutDown) || timed_out || full || failed_eviction {
                out.push(s.clone());
            }
            return out;
        }
        // Nothing registered: it adds, and shares the failure of a load it waited for.
        let shared = ret == Some(&Ret::LoadFailed)
            && !registered
            && overlapping(history, at, |other| {
                let same = matches!(other.op, Op::AddRoom { r, c, .. } if r == i && c == i)
                    || matches!(other.op, Op::Replace(j) | Op::Swap(j) if j == i);
                same && other.ret == Some(Ret::LoadFailed)
            });
        // No slot beside the old version: every slot but its own pinned by other models (the
        // check reads pins, the limit and the queue as they are, so a pin, unpin or resize
        // overlapping it may have been seen on either side, and a pinned model a removal
        // unloaded is queued until that removal returns).
        // Never under the `Overflow` policy: the replace overflows instead.
        let no_slot = ret == Some(&Ret::NoSlotBeside)
            && !self.overflow
            && registered
            && (self.cap(s) <= (s.registered & s.pinned & !(1 << i)).count_ones() as usize + 1
                || overlapped(history, at, moves_the_slot_beside));
        if full || timed_out || failed_eviction || shared || no_slot || ret.is_none() {
            out.push(s.clone());
        }
        if self.room(s, history, at, i) {
            let mut loaded = s.clone();
            loaded.loads[i] += 1;
            match script(of(&self.faults.loads, i), s.loads[i]) {
                Step::Ok => {
                    // Switched (the old version then unloaded, or detached: its leases outlived
                    // the drain, or its unload failed), or added.
                    let switched = matches!(ret, None | Some(Ret::Done | Ret::Busy))
                        || ret == Some(&Ret::UnloadFailed(i));
                    if (registered && switched) || (!registered && ret.is_none_or(|r| *r == Ret::Loaded)) {
                        loaded.registered |= 1 << i;
                        loaded.retired[i] += loaded.leases[i];
                        loaded.leases[i] = 0;
                        out.push(loaded);
                    }
                }
                Step::Fail if ret.is_none_or(|r| *r == Ret::LoadFailed) => out.push(loaded),
                Step::Expire if ret.is_none_or(|r| *r == Ret::Expired) => out.push(loaded),
                Step::Panic if ret.is_none() => out.push(loaded),
                _ => {}
            }
        }
        out
    }
}

/// The steps of the calls with more than a line of rules.
impl Stack {
    /// An add's room event: admitted (a slot claimed), warm, or ended on the way (refused after a
    /// shutdown, out of room, out of time for the lock, sharing a failed load, an eviction's
    /// failure).
    fn add_room(
        &self,
        s: &State,
        history: &[Call<Op, Ret>],
        at: usize,
        (i, c, add, built): (usize, usize, usize, bool),
    ) -> Vec<State> {
        let call = &history[at];
        let ret = call.ret.as_ref();
        let is = |expected: Ret| ret.is_none_or(|r| *r == expected);
        let mut next = s.clone();
        let mut out = Vec::new();
        let warm = if built { Ret::AlreadyRegistered } else { Ret::Warm };
        // A register's own result once admitted: it registers, never fails to load.
        let cold = |r: &Ret| {
            if built { *r == Ret::Done } else { matches!(r, Ret::Loaded | Ret::LoadFailed | Ret::Expired) }
        };
        next.roomed |= bit(add);
        // The id's lock is the swap's until it settles: the add comes after it.
        if State::has(s.swapping, i) {
            return out;
        }
        let registered = State::has(s.registered, i);
        // After a shutdown every add is refused, but one that got past the cache's check
        // before it may still end in an eviction's failure or run out of room.
        let open = !s.shut_down;
        if s.shut_down && ret == Some(&Ret::ShutDown) {
            out.push(next.clone());
        }
        if open && registered && is(warm) {
            out.push(next.clone());
        }
        let claimable = open && !registered && self.room(s, history, at, i);
        if claimable && ret.is_none_or(cold) {
            let mut claimed = next.clone();
            claimed.claims |= bit(add);
            out.push(claimed);
        }
        let failed_eviction = matches!(ret, Some(Ret::UnloadFailed(_))) && s.failed_by & bit(add) != 0;
        // Another add's claim, or a replace's (room for its new version beside the old).
        let other_adds = || {
            overlapped(
                history,
                at,
                |op| matches!(op, Op::AddRoom { r: j, .. } | Op::Replace(j) | Op::Swap(j) if *j != i),
            )
        };
        let full = matches!(ret, Some(Ret::CapacityExhausted))
            && !self.overflow
            && (s.occupied() >= self.cap(s) || other_adds() || self.removal_holds_room(history, at));
        let timed_out = matches!(ret, Some(Ret::LockTimeout)) && lock_contended(history, at, i);
        // A caller that waited for another add's failing load of the same model gets its
        // error without loading (SPEC 1.9).
        let shared = matches!(ret, Some(Ret::LoadFailed))
            && !built
            && open
            && !registered
            && overlapping(history, at, |other| {
                let same = match other.op {
                    Op::AddRoom { r: j, c: d, add: o, .. } => j == i && d == c && o != add,
                    // A replace of an id that is not registered adds it.
                    Op::Replace(j) | Op::Swap(j) => j == i && c == i,
                    _ => false,
                };
                same && other.ret == Some(Ret::LoadFailed)
            });
        // An add that unwound in an eviction's unload, or failed on the way.
        if failed_eviction || full || timed_out || shared || (ret.is_none() && !registered) {
            out.push(next);
        }
        out
    }

    /// An add's load (or registration) in the slot its room event claimed, as its model's
    /// scripted loads say.
    fn add_load(
        &self,
        s: &State,
        history: &[Call<Op, Ret>],
        at: usize,
        (i, add, built): (usize, usize, bool),
    ) -> Vec<State> {
        let call = &history[at];
        let ret = call.ret.as_ref();
        let is = |expected: Ret| ret.is_none_or(|r| *r == expected);
        let mut next = s.clone();
        let mut out = Vec::new();
        if s.roomed & bit(add) == 0 {
            return out;
        }
        let warm = if built { Ret::AlreadyRegistered } else { Ret::Warm };
        if s.claims & bit(add) == 0 {
            // Warm, or a room event that ended the add: the result was its to decide.
            if ret != Some(&warm) || State::has(s.registered, i) {
                out.push(next);
            }
            return out;
        }
        next.claims &= !bit(add);
        if built {
            // Registered (a panic of its `size_bytes` comes after that).
            if is(Ret::Done) {
                next.registered |= 1 << i;
                out.push(next);
            }
            return out;
        }
        next.loads[i] += 1;
        match script(of(&self.faults.loads, i), s.loads[i]) {
            Step::Ok if is(Ret::Loaded) => {
                next.registered |= 1 << i;
                out.push(next);
            }
            Step::Fail if is(Ret::LoadFailed) => out.push(next),
            Step::Expire if is(Ret::Expired) => out.push(next),
            Step::Panic if ret.is_none() => out.push(next),
            _ => {}
        }
        out
    }

    /// An unload of `RESOLVED[v]` for the call at `by` (a remove, an eviction, a replace's old
    /// version, an in-place replace, or a model a shutdown refused), as its model's scripted
    /// unloads say.
    fn unload(&self, s: &State, history: &[Call<Op, Ret>], at: usize, v: usize, by: usize) -> Vec<State> {
        let mut out = self.refused_unload(s, history, (at, v, by));
        out.extend(self.registered_unload(s, history, (at, v, by)));
        out
    }

    /// An unload of the model the call at `by` loaded for `RESOLVED[v]` (an add's, a replace's
    /// or an in-place replace's new version) and a shutdown refused at its registration, once
    /// per call: never registered, so only its scripted step counts, and the call ends
    /// `ShutDown` (or in the unload's panic) whatever the unload did.
    fn refused_unload(&self, s: &State, history: &[Call<Op, Ret>], (at, v, by): Unloading) -> Vec<State> {
        let caller = &history[by];
        let own = match caller.op {
            // An add or an in-place replace loads only while nothing is registered under its id
            // (and holds the id's lock from then on); a register's model goes back to its
            // caller, never unloaded.
            Op::AddRoom { r, built: false, .. } => r == v && !State::has(s.registered, v),
            Op::Swap(j) => j == v && !State::has(s.registered, v),
            Op::Replace(j) => j == v,
            _ => false,
        };
        let refused = s.shut_down && matches!(caller.ret, None | Some(Ret::ShutDown));
        if !own || !refused || s.refused_by & bit(by) != 0 {
            return Vec::new();
        }
        let ret = history[at].ret.as_ref();
        let mut next = s.clone();
        next.unloads[v] += 1;
        next.refused_by |= bit(by);
        let fits = match script(of(&self.faults.unloads, v), s.unloads[v]) {
            Step::Ok => ret.is_none_or(|r| *r == Ret::Done),
            Step::Fail | Step::Expire => ret.is_none_or(|r| *r == Ret::UnloadFailed(v)),
            Step::Panic => ret.is_none(),
        };
        if fits { vec![next] } else { Vec::new() }
    }

    /// An unload of the model registered under `RESOLVED[v]` for the call at `by` (a remove, an
    /// eviction, a replace's old version, an in-place replace's old version).
    fn registered_unload(&self, s: &State, history: &[Call<Op, Ret>], (at, v, by): Unloading) -> Vec<State> {
        let call = &history[at];
        let ret = call.ret.as_ref();
        let is = |expected: Ret| ret.is_none_or(|r| *r == expected);
        let mut next = s.clone();
        let mut out = Vec::new();
        // A replace's unload of its own id's old version: the new one is registered
        // and serves; only the old version's leases (drained) matter.
        let old_version = matches!(history[by].op, Op::Replace(j) if j == v);
        // An in-place replace's own unload: after its drain, before the call settles.
        let swap = matches!(history[by].op, Op::Swap(j) if j == v);
        let eviction = matches!(
            history[by].op,
            Op::AddRoom { .. } | Op::Replace(_) | Op::Swap(_) | Op::ResizeSet { .. } | Op::Evict(_)
        ) && !old_version
            && !swap;
        // Only these calls unload: a lease, a pin, an `infer` or the end of a lease never does
        // (the last lease of a designated victim closes it; the add waiting for it unloads).
        let removal = matches!(history[by].op, Op::Remove(_) | Op::Shutdown | Op::ClearStart { .. });
        if !eviction && !removal && !old_version && !swap {
            return out;
        }
        let unloadable = State::has(s.registered, v)
            && (old_version || (s.leases[v] == 0 && !(eviction && State::has(s.pinned, v))))
            && !(swap && s.roomed & bit(by) != 0);
        if !unloadable {
            return out;
        }
        next.unloads[v] += 1;
        match script(of(&self.faults.unloads, v), s.unloads[v]) {
            Step::Ok if is(Ret::Done) => {
                if !old_version {
                    next.registered &= !(1 << v);
                }
                if swap {
                    next.swapping |= 1 << v;
                }
                next.unloaded_by |= bit(by);
                out.push(next);
            }
            Step::Fail if is(Ret::UnloadFailed(v)) => {
                next.failed_by |= bit(by);
                out.push(next);
            }
            Step::Panic if ret.is_none() => out.push(next),
            _ => {}
        }
        out
    }

    /// A remove's result, from what its unload did (or why it did not run).
    fn remove(&self, s: &State, history: &[Call<Op, Ret>], at: usize, i: usize) -> Vec<State> {
        let call = &history[at];
        let ret = call.ret.as_ref();
        let next = s.clone();
        let mut out = Vec::new();
        let own = bit(at);
        let unloaded = s.unloaded_by & own != 0;
        let failed = s.failed_by & own != 0;
        let ok = match ret {
            Some(Ret::Done) => unloaded,
            Some(Ret::UnloadFailed(v)) => *v == i && failed,
            // An `infer`'s lease lives within its call: a drain may time out on it when
            // deadlines fire at any point.
            Some(Ret::Busy) => {
                let inferring = || {
                    self.any_time
                        && overlapping(history, at, |c| c.op == Op::Infer(i) && may_have_succeeded(c))
                };
                !unloaded && !failed && (s.leases[i] > 0 || inferring())
            }
            Some(Ret::NotFound) => !unloaded && !failed && !State::has(s.registered | s.swapping, i),
            Some(Ret::LockTimeout) => lock_contended(history, at, i),
            Some(_) => false,
            None => true,
        };
        if ok {
            out.push(next);
        }
        out
    }

    /// An eviction's result under the lock of `RESOLVED[i]`, from what its unload did (or why it
    /// did not run): it never waits for a lease, so it keeps a model with a live one (an
    /// overlapping `infer`'s too) or a pin.
    fn evict(&self, s: &State, history: &[Call<Op, Ret>], at: usize, i: usize) -> Vec<State> {
        let ret = history[at].ret.as_ref();
        let own = bit(at);
        let (unloaded, failed) = (s.unloaded_by & own != 0, s.failed_by & own != 0);
        let settled = !unloaded && !failed && !State::has(s.swapping, i);
        let inferring = || overlapping(history, at, |c| c.op == Op::Infer(i) && may_have_succeeded(c));
        let ok = match ret {
            Some(Ret::Done) => unloaded,
            Some(Ret::UnloadFailed(v)) => *v == i && failed,
            // A pin is checked first: an id pinned before its model is registered is kept too.
            Some(Ret::Kept) => {
                settled
                    && (State::has(s.pinned, i)
                        || State::has(s.registered, i) && (s.leases[i] > 0 || inferring()))
            }
            Some(Ret::NotFound) => settled && !State::has(s.registered | s.pinned, i),
            Some(Ret::LockTimeout) => lock_contended(history, at, i),
            Some(_) => false,
            None => true,
        };
        if ok { vec![s.clone()] } else { Vec::new() }
    }

    /// A lease's (or an `infer`'s) result on a stack that is not shut down.
    fn lease(&self, s: &State, history: &[Call<Op, Ret>], at: usize, i: usize) -> Vec<State> {
        let call = &history[at];
        let ret = call.ret.as_ref();
        let mut next = s.clone();
        let mut out = Vec::new();
        match ret {
            Some(Ret::Done) if State::has(s.registered, i) => {
                if matches!(call.op, Op::Lease(_)) {
                    next.leases[i] += 1;
                }
                out.push(next);
            }
            // Never while an in-place replace swaps it: the lease waits for the new version.
            Some(Ret::NotFound) if !State::has(s.registered | s.swapping, i) => out.push(next),
            Some(Ret::Removing)
                if overlapped(history, at, |op| {
                    matches!(op, Op::Remove(j) if *j == i)
                        || matches!(op, Op::Shutdown | Op::ClearStart { .. })
                }) =>
            {
                out.push(next);
            }
            // It waited for an eviction's outcome (an add's, a replace's, a resize's or one of its
            // own id under a held lock), or for an in-place replace.
            Some(Ret::LockTimeout)
                if overlapped(history, at, |op| {
                    matches!(op, Op::AddRoom { .. } | Op::Replace(_) | Op::Swap(_) | Op::ResizeSet { .. })
                        || *op == Op::Evict(i)
                }) =>
            {
                out.push(next);
            }
            None => out.push(next),
            _ => {}
        }
        out
    }

    /// A lease's end: of the registered version, or of an old one a replace switched out.
    fn end_lease(&self, s: &State, i: usize) -> Vec<State> {
        let mut next = s.clone();
        let mut out = Vec::new();
        // Of the registered version, or of an old one a replace switched out.
        if s.leases[i] > 0 {
            let mut ended = next.clone();
            ended.leases[i] -= 1;
            out.push(ended);
        }
        if s.retired[i] > 0 {
            next.retired[i] -= 1;
            out.push(next);
        }
        out
    }

    /// A pin's or an unpin's result.
    fn pin(&self, s: &State, history: &[Call<Op, Ret>], at: usize, i: usize) -> Vec<State> {
        let call = &history[at];
        let ret = call.ret.as_ref();
        let is = |expected: Ret| ret.is_none_or(|r| *r == expected);
        let mut next = s.clone();
        let mut out = Vec::new();
        if is(Ret::Done) {
            if matches!(call.op, Op::Pin(_)) {
                next.pinned |= 1 << i;
            } else {
                next.pinned &= !(1 << i);
            }
            out.push(next);
        } else if ret == Some(&Ret::LockTimeout) && lock_contended(history, at, i) {
            out.push(next);
        }
        out
    }
}

impl Spec for Stack {
    type State = State;
    type Op = Op;
    type Ret = Ret;

    fn step(&self, s: &State, history: &[Call<Op, Ret>], at: usize) -> Vec<State> {
        let call = &history[at];
        let ret = call.ret.as_ref();
        let is = |expected: Ret| ret.is_none_or(|r| *r == expected);
        let mut next = s.clone();
        let mut out = Vec::new();
        match call.op {
            Op::Add { .. } => {}
            Op::AddRoom { r: i, c, add, built } => out = self.add_room(s, history, at, (i, c, add, built)),
            Op::AddLoad { r: i, add, built, .. } => out = self.add_load(s, history, at, (i, add, built)),
            Op::Unload { v, by } => out = self.unload(s, history, at, v, by),
            Op::Remove(i) => out = self.remove(s, history, at, i),
            Op::Evict(i) => out = self.evict(s, history, at, i),
            Op::Hold(_) => out.push(next),
            Op::Lease(_) | Op::Infer(_) if s.shut_down => {
                if ret.is_none() || ret == Some(&Ret::ShutDown) {
                    out.push(next);
                }
            }
            Op::Lease(i) | Op::Infer(i) => out = self.lease(s, history, at, i),
            Op::EndLease(i) => out = self.end_lease(s, i),
            Op::Pin(i) | Op::Unpin(i) => out = self.pin(s, history, at, i),
            Op::Replace(i) => out = self.replace(s, history, at, i),
            Op::Swap(i) => out = self.swap(s, history, at, i),
            Op::Shutdown => {
                next.shut_down = true;
                out.push(next);
            }
            Op::Clear => {}
            Op::ClearStart { start } => {
                next.clear_list = s.registered;
                next.roomed |= bit(start);
                out.push(next);
            }
            Op::ClearDone { start } => {
                if s.roomed & bit(start) != 0 && self.cleared(s, history, at, start) {
                    out.push(next);
                }
            }
            Op::Resize(_) => {}
            Op::ResizeSet { n, set } => {
                next.max_size = u8::try_from(n).unwrap_or(u8::MAX);
                next.roomed |= bit(set);
                out.push(next);
            }
            Op::ResizeDone { set, .. } => {
                if s.roomed & bit(set) != 0 && self.resized(s, history, at, set) {
                    out.push(next);
                }
            }
            Op::Final => {
                if s.claims == 0 && is(Ret::Registered(s.registered)) {
                    out.push(next);
                }
            }
            Op::FinalPins => {
                if is(Ret::Pinned(s.pinned)) {
                    out.push(next);
                }
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::super::linearizability::check;
    use super::*;

    fn call(thread: usize, op: Op, ret: Ret, invoke: u64, response: u64) -> Call<Op, Ret> {
        Call { thread, op, ret: Some(ret), invoke, response: Some(response), decided: None }
    }

    /// `A` registered; T1's add of `B` (its load fails) overlaps T2's add of `C`, which gives up
    /// on its wait for capacity. Explained while T1 holds its claim, unless T2 decided after
    /// T1 returned: a slot was free then.
    #[test]
    fn a_refusal_for_capacity_is_explained_by_what_held_the_slots_when_it_gave_up() {
        let spec = Stack {
            faults: Faults { loads: [Vec::new(), vec![Step::Fail], Vec::new()], ..Faults::default() },
            capacity: 2,
            any_time: false,
            overflow: false,
        };
        let add = |r: usize| Op::Add { r, c: r, built: false };
        let history = [
            call(0, add(0), Ret::Loaded, 0, 1),
            call(1, add(1), Ret::LoadFailed, 2, 4),
            call(2, add(2), Ret::CapacityExhausted, 3, 6),
        ];
        // Two slots: `A`'s, and the one `B`'s claim holds while it loads.
        assert!(check(&spec, State::default(), &split_calls(&history)).is_ok());
        let mut decided = history.clone();
        decided[2].decided = Some(5);
        assert!(check(&spec, State::default(), &split_calls(&decided)).is_err());
    }
}
