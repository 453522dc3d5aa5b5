//! The sequential specification of a manager stack (`FixedSizeCache` of capacity
//! [`MAX_SIZE`] over the base), for the linearizability check of generated programs.
//!
//! A cold add is not one atomic step in the real stack: it makes room (evicting, and claiming
//! its slot against the capacity) while it plans, and registers its model when its load ends,
//! possibly much later. So the history gives each add two calls with the add's interval and
//! result, [`Op::AddRoom`] then [`Op::AddLoad`] (the second may only follow the first), and the
//! state counts the slots claimed by adds between the two: registered models plus claimed
//! slots never exceed the capacity.
//!
//! It is nondeterministic where the real stack may choose: which victims a full cache evicts
//! (any models neither pinned nor leased), and how many (one more per other add in flight, whose
//! claim may have been released meanwhile). Results that only contention explains
//! (`LockTimeout`, `CapacityExhausted` with room, `Removing`) are allowed only where a call that
//! could cause them overlapped.

use super::linearizability::{Call, Spec};
use super::program::{Faults, IDS, MAX_SIZE};
use resident_sim::world::Step;

/// Splits every [`Op::Add`] of `history` into its room and load calls (same interval, same
/// result); every other call is kept as it is.
pub fn split_adds(history: &[Call<Op, Ret>]) -> Vec<Call<Op, Ret>> {
    let mut adds = 0;
    let mut split = Vec::with_capacity(history.len());
    for call in history {
        let Op::Add(i) = call.op else {
            split.push(call.clone());
            continue;
        };
        let n = adds;
        adds += 1;
        split.push(Call { op: Op::AddRoom { i, n }, ..call.clone() });
        split.push(Call { op: Op::AddLoad { i, n }, ..call.clone() });
    }
    split
}

/// A call as the history records it: the program's operation with its id resolved.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Op {
    /// `add_model(IDS[i])`, as recorded (split into the two calls below before checking).
    Add(usize),
    /// Add number `n` of `IDS[i]` makes room and claims its slot (or finds it registered).
    AddRoom {
        /// Index into [`IDS`].
        i: usize,
        /// The add's number in the history.
        n: usize,
    },
    /// Add number `n` of `IDS[i]` ends its load (or its warm check).
    AddLoad {
        /// Index into [`IDS`].
        i: usize,
        /// The add's number in the history.
        n: usize,
    },
    /// `remove(IDS[i])`.
    Remove(usize),
    /// `lease(IDS[i])` (acquired).
    Lease(usize),
    /// A lease of `IDS[i]` dropped.
    EndLease(usize),
    /// `pin(IDS[i])`.
    Pin(usize),
    /// `unpin(IDS[i])`.
    Unpin(usize),
    /// The registered ids once every thread has finished.
    Final,
}

/// A result, reduced to what the specification decides.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Ret {
    /// `Added::Loaded`.
    Loaded,
    /// `Added::Warm`.
    Warm,
    /// `Ok(())` (remove, lease, pin, unpin, end of a lease).
    Done,
    /// `NotFound`.
    NotFound,
    /// A `Load` error.
    LoadFailed,
    /// An `Unload` error of `IDS[i]` (a removal's own, or an eviction victim's).
    UnloadFailed(usize),
    /// `Busy`: live leases outlasted the drain.
    Busy,
    /// `Removing`: a lease of a model being removed.
    Removing,
    /// `LockTimeout`.
    LockTimeout,
    /// `CapacityExhausted`.
    CapacityExhausted,
    /// The registered ids (a bit mask over [`IDS`]), for [`Op::Final`].
    Registered(u8),
    /// Anything else (never allowed).
    Unexpected(String),
}

/// The specification's state.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default)]
pub struct State {
    registered: u8,
    pinned: u8,
    leases: [u8; 3],
    loads: [u8; 3],
    unloads: [u8; 3],
    /// Adds whose [`Op::AddRoom`] took effect.
    roomed: u64,
    /// Adds holding a claimed slot (room made, load not ended).
    claims: u64,
}

impl State {
    fn has(mask: u8, i: usize) -> bool {
        mask & (1 << i) != 0
    }

    fn occupied(&self) -> usize {
        (self.registered.count_ones() + self.claims.count_ones()) as usize
    }

    fn evictable(&self) -> Vec<usize> {
        (0..IDS.len())
            .filter(|&v| Self::has(self.registered, v) && !Self::has(self.pinned, v) && self.leases[v] == 0)
            .collect()
    }
}

/// The specification, with the program's faults.
#[derive(Debug, Clone)]
pub struct Stack {
    /// What loads and unloads do, call by call.
    pub faults: Faults,
}

fn script(steps: &[Step], call: u8) -> Step {
    steps.get(usize::from(call)).copied().unwrap_or(Step::Ok)
}

/// Whether some other call for which `relevant` holds overlapped call `at`.
fn overlapped(history: &[Call<Op, Ret>], at: usize, relevant: impl Fn(&Op) -> bool) -> usize {
    let me = &history[at];
    history
        .iter()
        .enumerate()
        .filter(|(j, other)| {
            *j != at
                && relevant(&other.op)
                && other.response.is_none_or(|r| me.invoke < r)
                && me.response.is_none_or(|r| other.invoke < r)
        })
        .count()
}

/// A next state and the result that leads there (`None`: the call unwound).
type Outcome = (State, Option<Ret>);

impl Stack {
    /// Every way add `n` of `IDS[i]` can make room from `s`: warm (nothing to do), or
    /// evictions and then a claimed slot, or a failure on the way. A failed or unwound room
    /// phase marks the add done with no claim; its load phase then changes nothing.
    fn add_room(&self, s: &State, history: &[Call<Op, Ret>], at: usize, i: usize, n: usize) -> Vec<Outcome> {
        let mut roomed = s.clone();
        roomed.roomed |= 1 << n;
        if State::has(s.registered, i) {
            return vec![(roomed, Some(Ret::Warm))];
        }
        let in_flight = overlapped(history, at, |op| matches!(op, Op::AddRoom { i: j, .. } if *j != i));
        let needed = (s.occupied() + 1).saturating_sub(MAX_SIZE);
        let mut outcomes = Vec::new();
        // Evict `needed` to `needed + in_flight` victims, one at a time, then claim the slot.
        let mut frontier = vec![(roomed, 0usize)];
        while let Some((state, evicted)) = frontier.pop() {
            if in_flight > 0 || state.evictable().len() + evicted < needed {
                outcomes.push((state.clone(), Some(Ret::CapacityExhausted)));
            }
            if evicted >= needed && state.occupied() < MAX_SIZE {
                let mut claimed = state.clone();
                claimed.claims |= 1 << n;
                // The load phase decides the result; any of the load's results fits here.
                for ret in [Ret::Loaded, Ret::LoadFailed] {
                    outcomes.push((claimed.clone(), Some(ret)));
                }
                outcomes.push((claimed, None));
            }
            if evicted == needed + in_flight {
                continue;
            }
            for v in state.evictable() {
                let mut next = state.clone();
                next.unloads[v] += 1;
                match script(&self.faults.unloads[v], state.unloads[v]) {
                    Step::Ok => {
                        next.registered &= !(1 << v);
                        frontier.push((next, evicted + 1));
                    }
                    Step::Fail => outcomes.push((next, Some(Ret::UnloadFailed(v)))),
                    Step::Panic => outcomes.push((next, None)),
                }
            }
        }
        outcomes
    }

    /// Add `n` of `IDS[i]` ends: a warm add confirms the registration; a claimed slot turns into
    /// the loaded model or is released; a failed room phase leaves nothing to do.
    fn add_load(&self, s: &State, i: usize, n: usize) -> Vec<Outcome> {
        if s.roomed & (1 << n) == 0 {
            return Vec::new();
        }
        if s.claims & (1 << n) == 0 {
            let warm = State::has(s.registered, i).then(|| (s.clone(), Some(Ret::Warm)));
            // A room phase that failed: its result, whatever it was, stands.
            let failed = [Ret::CapacityExhausted, Ret::LockTimeout]
                .into_iter()
                .chain((0..IDS.len()).map(Ret::UnloadFailed))
                .map(|ret| (s.clone(), Some(ret)))
                .chain([(s.clone(), None)]);
            return warm.into_iter().chain(failed).collect();
        }
        let mut next = s.clone();
        next.claims &= !(1 << n);
        next.loads[i] += 1;
        match script(&self.faults.loads[i], s.loads[i]) {
            Step::Ok => {
                next.registered |= 1 << i;
                vec![(next, Some(Ret::Loaded))]
            }
            Step::Fail => vec![(next, Some(Ret::LoadFailed))],
            Step::Panic => vec![(next, None)],
        }
    }

    fn remove(&self, s: &State, i: usize) -> Vec<Outcome> {
        if !State::has(s.registered, i) {
            return vec![(s.clone(), Some(Ret::NotFound))];
        }
        if s.leases[i] > 0 {
            return vec![(s.clone(), Some(Ret::Busy))];
        }
        let mut next = s.clone();
        next.unloads[i] += 1;
        match script(&self.faults.unloads[i], s.unloads[i]) {
            Step::Ok => {
                next.registered &= !(1 << i);
                vec![(next, Some(Ret::Done))]
            }
            Step::Fail => vec![(next, Some(Ret::UnloadFailed(i)))],
            Step::Panic => vec![(next, None)],
        }
    }

    fn outcomes(&self, s: &State, history: &[Call<Op, Ret>], at: usize) -> Vec<Outcome> {
        let mut next = s.clone();
        match history[at].op {
            Op::Add(_) => Vec::new(),
            Op::AddRoom { i, n } => self.add_room(s, history, at, i, n),
            Op::AddLoad { i, n } => self.add_load(s, i, n),
            Op::Remove(i) => self.remove(s, i),
            Op::Lease(i) if State::has(s.registered, i) => {
                next.leases[i] += 1;
                vec![(next, Some(Ret::Done))]
            }
            Op::Lease(_) => vec![(next, Some(Ret::NotFound))],
            Op::EndLease(i) if s.leases[i] > 0 => {
                next.leases[i] -= 1;
                vec![(next, Some(Ret::Done))]
            }
            Op::EndLease(_) => Vec::new(),
            Op::Pin(i) => {
                next.pinned |= 1 << i;
                vec![(next, Some(Ret::Done))]
            }
            Op::Unpin(i) => {
                next.pinned &= !(1 << i);
                vec![(next, Some(Ret::Done))]
            }
            Op::Final if s.claims == 0 => vec![(next, Some(Ret::Registered(s.registered)))],
            Op::Final => Vec::new(),
        }
    }
}

impl Spec for Stack {
    type State = State;
    type Op = Op;
    type Ret = Ret;

    fn step(&self, s: &State, history: &[Call<Op, Ret>], at: usize) -> Vec<State> {
        let call = &history[at];
        let Some(ret) = &call.ret else {
            // Unwound: any outcome (a panic of the caller's own user code).
            return self.outcomes(s, history, at).into_iter().map(|(next, _)| next).collect();
        };
        let contended = |relevant: &dyn Fn(&Op) -> bool| overlapped(history, at, relevant) > 0;
        let id = match call.op {
            Op::Add(i) | Op::Remove(i) | Op::Lease(i) | Op::Pin(i) | Op::EndLease(i) | Op::Unpin(i) => {
                Some(i)
            }
            Op::AddRoom { i, .. } | Op::AddLoad { i, .. } => Some(i),
            Op::Final => None,
        };
        match ret {
            // Someone held the id's lifecycle lock throughout: an add, remove or pin of it, or
            // an add that evicts it.
            Ret::LockTimeout => {
                let holder = |op: &Op| {
                    matches!(op, Op::AddRoom { .. })
                        || matches!(op, Op::Remove(j) | Op::Pin(j) if Some(*j) == id)
                };
                if !contended(&holder) {
                    return Vec::new();
                }
                // A timed-out add ends at once: its room phase takes effect, its load does not.
                let mut next = s.clone();
                if let Op::AddRoom { n, .. } = call.op {
                    next.roomed |= 1 << n;
                }
                return vec![next];
            }
            Ret::Removing if matches!(call.op, Op::Lease(_)) => {
                let remover = |op: &Op| matches!(op, Op::Remove(j) if Some(*j) == id);
                return if contended(&remover) { vec![s.clone()] } else { Vec::new() };
            }
            _ => {}
        }
        self.outcomes(s, history, at)
            .into_iter()
            .filter(|(_, expected)| expected.as_ref().is_some_and(|e| e == ret))
            .map(|(next, _)| next)
            .collect()
    }
}
