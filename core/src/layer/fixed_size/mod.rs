//! [`FixedSizeCache`]: an LRU decorator that keeps at most `max_size` models (registered plus
//! loading) in the manager it wraps, and optionally at most `max_bytes`.
//!
//! # Guarantees
//! - After every completed add or remove, success or failure, the queue holds exactly the
//!   registered ids, each once (I4). Ids are queued only after their load succeeded and dropped
//!   only after their removal succeeded, so a failure leaves the queue exactly as it was (I5),
//!   and a failed eviction keeps the failed victim and every skipped pin in place, while
//!   completed evictions stay done (I6, I10).
//! - The warm/cold decision and every queue update of an add happen under the resolved id's
//!   lifecycle lock, reached through the inner stack (I7, I9, I13).
//! - Eviction takes least-recently-used ids that are neither pinned nor in use, only as many as
//!   needed; capacity counts cold loads in flight, so `max_size` holds under simultaneous cold
//!   loads of different ids.
//! - Eviction is atomic with respect to pins and leases: it holds the victim's lifecycle lock
//!   from its last pin check to the unload (and `pin` takes that lock), and the base closes the
//!   victim without waiting, only if no lease is live (SPEC 2.10).
//! - No starvation under overload (SPEC 2.14). Adds that wait for capacity stand in line and
//!   are served in arrival order: while one waits, a later add does not take the room that
//!   appears. The first in line designates the least recently used victim that only leases
//!   keep ([`Manager::designate`]): its last lease closes it for eviction in the same step as
//!   its count reaches zero, so a stream of overlapping leases cannot take it back between the
//!   lease's end and the waiter's next plan (the race that starved waiters until their
//!   deadline). Leases that started before that close finish normally and nothing waits for
//!   them; one that starts after it waits for the eviction's outcome, as after any eviction's
//!   close (SPEC 2.10). The designation is given up (the victim reopens) when the waiter is
//!   served otherwise, runs out of time, finds the victim pinned or locked, or finds it
//!   evictable already while it still needs another. Only the first in line waits for the
//!   stack to change; the adds behind it wait for the line to move (the first leaving it wakes
//!   the next), so a lease's end wakes one waiter, not all of them.
//! - A layer learns of removals below it: after every inner call that can evict (a cold add
//!   through an inner cache), queued ids that are no longer registered are dropped, so I4 holds
//!   at every depth of nesting (SPEC 2.11).
//! - User code (the loader, `unload`, `size_bytes`, a model's `Drop`) may panic anywhere: while
//!   the id's lifecycle lock is held, a settle guard brings its queue entry in line with the
//!   registry on every exit, so a model is either registered and queued, or neither (2.13).
//!
//! # Lock order (I12)
//! `lifecycle lock (the id being added)` → `bookkeeping monitor` → `base monitors`. A thread
//! holding a lifecycle lock takes a victim's lifecycle lock only with `try_lock` (a busy victim
//! is skipped), and the bookkeeping monitor is never held while waiting for any lifecycle lock,
//! loading or unloading.

mod config;
mod queue;

use std::collections::BTreeSet;
use std::fmt;

pub use config::{CapacityPolicy, FixedSizeConfig};

use queue::{Bookkeeping, PinnedBelow};

use crate::deadline::{CallOptions, Deadline};
use crate::error::{InvalidConfig, ManagerError, RegisterError};
use crate::id::ModelId;
use crate::manager::{Added, Designation, Lease, LifecycleGuard, Model, Replaced};
use crate::manager::{Eviction, Manager, RemovalReport, clear_each, resolve};
use crate::mutants::Mutant;
use crate::runtime::{Monitor, Runtime, Signal};
use crate::telemetry;

type Book<M> = <<M as Manager>::Runtime as Runtime>::Monitor<Bookkeeping>;

/// An LRU cache over any [`Manager`]: evicts least-recently-used models to stay within
/// `max_size` models (and `max_bytes`, if set).
///
/// ```
/// use resident::{BoxError, FixedSizeCache, FixedSizeConfig, Loader, Manager, Model, ModelId, ModelManager};
/// # struct M; impl Model for M { fn size_bytes(&self) -> u64 { 1 } }
/// # struct L; impl Loader for L { type Model = M; fn load(&self, _: &ModelId) -> Result<M, BoxError> { Ok(M) } }
/// let cache = FixedSizeCache::new(ModelManager::new(L), FixedSizeConfig::new(2))?;
/// cache.add_model("a", None)?;
/// cache.add_model("b", None)?;
/// cache.lease("a")?;             // a is now the most recently used
/// cache.add_model("c", None)?;   // evicts b
/// assert_eq!(cache.queue(), ["a", "c"].map(|s| ModelId::new(s).unwrap()));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct FixedSizeCache<M: Manager> {
    inner: M,
    config: FixedSizeConfig,
    book: Book<M>,
    /// Bumped when the first add in line leaves it: the adds behind it wait on this, not on
    /// the stack's change signal, since only the first in line can use a change of the stack
    /// (every lease's end would otherwise wake them all, to wait again).
    line: Signal<M::Runtime>,
}

enum EvictionPlan {
    Admit,
    Evict(Vec<ModelId>),
    Full { registered: usize, loading: usize },
}

/// A slot counted against `max_size` while a cold load runs; released unless committed.
struct CapacityClaim<'a, M: Manager> {
    cache: &'a FixedSizeCache<M>,
    committed: bool,
}

impl<M: Manager> CapacityClaim<'_, M> {
    /// The load succeeded: the id takes its slot in the queue (its size is recorded apart, as
    /// asking it runs user code).
    fn commit(mut self, id: &ModelId) {
        self.committed = true;
        self.cache.book.with(|b| {
            b.loading -= 1;
            b.push(id);
        });
    }
}

/// An add's place among the adds waiting for capacity: it leaves the line when dropped (served,
/// refused, out of time, or unwinding), and wakes the next add if it was first.
struct Waiting<'a, M: Manager> {
    cache: &'a FixedSizeCache<M>,
    ticket: u64,
}

impl<M: Manager> Drop for Waiting<'_, M> {
    fn drop(&mut self) {
        if self.cache.book.with(|b| b.leave_line(self.ticket)) {
            self.cache.line.bump_at(Mutant::LOST_WAKEUP_CAPACITY_WAITER_LEFT);
        }
    }
}

/// Which way a [`Settle`] guard brings an id's queue entry in line with the registry.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Settling {
    /// After a cold add: a registered id is queued, an unregistered one is not (an entry a
    /// reconcile left to this lock's holder included), and ids a layer below evicted meanwhile
    /// leave the queue.
    Add,
    /// After a removal: an unregistered id is not queued.
    Remove,
}

/// Held with an id's lifecycle lock (so its registration is stable) across inner calls that
/// run user code: on every exit, a panic included, it settles the id's queue entry from the
/// registry and wakes the adds waiting for room.
struct Settle<'a, M: Manager> {
    cache: &'a FixedSizeCache<M>,
    id: &'a ModelId,
    way: Settling,
}

impl<M: Manager> Drop for Settle<'_, M> {
    fn drop(&mut self) {
        let registered = self.cache.inner.contains(self.id.as_str());
        let keeps_stale =
            self.way == Settling::Add && self.cache.mutant(Mutant::FAILED_ADD_KEEPS_STALE_ENTRY);
        self.cache.book.with(|b| match self.way {
            Settling::Add if registered && !b.queue.contains(self.id) => b.push(self.id),
            Settling::Add | Settling::Remove if !registered && !keeps_stale => b.forget(self.id),
            Settling::Add | Settling::Remove => {}
        });
        if self.way == Settling::Add {
            self.cache.reconcile_below(self.id);
        }
    }
}

impl<M: Manager> Drop for CapacityClaim<'_, M> {
    fn drop(&mut self) {
        if !self.committed {
            self.cache.book.with(|b| b.loading -= 1);
        }
    }
}

impl<M: Manager> FixedSizeCache<M> {
    /// Wraps `inner`; models it already holds are queued in id order.
    pub fn new(inner: M, config: FixedSizeConfig) -> Result<Self, InvalidConfig> {
        config.validate()?;
        let mut book = Bookkeeping { max_size: config.max_size(), ..Bookkeeping::default() };
        for id in inner.ids() {
            let bytes = inner.lease(id.as_str()).map(|l| l.size_bytes()).unwrap_or(0);
            book.push(&id);
            book.set_size(&id, bytes);
        }
        let book = inner.runtime().monitor(book);
        let line = Signal::new(inner.runtime());
        Ok(Self { inner, config, book, line })
    }

    /// The wrapped manager.
    pub fn get_ref(&self) -> &M {
        &self.inner
    }

    /// Unwraps the manager.
    pub fn into_inner(self) -> M {
        self.inner
    }

    /// The capacity configuration.
    pub fn config(&self) -> &FixedSizeConfig {
        &self.config
    }

    /// The capacity now: [`FixedSizeConfig::max_size`] until [`FixedSizeCache::set_max_size`]
    /// changes it.
    pub fn max_size(&self) -> usize {
        self.book.with(|b| b.max_size)
    }

    /// Changes the capacity while serving (SPEC 1.12). Raising it wakes the adds waiting for
    /// room. Lowering it takes effect for every admission at once, then evicts down to it:
    /// idle least-recently-used models first (never a pinned one, nor one in use or being
    /// changed), waiting for leases to end and locks to be released at most the capacity wait
    /// (and `options`); what is still over then is [`ManagerError::OverLimit`], naming the
    /// models that held it (the new capacity stays, and later adds respect it). `Ok` means the
    /// stack fit the new capacity at some point of the call: one that does not lower it but
    /// finds the stack over it (another call's lowering still at work) evicts and waits too.
    /// Zero is [`ManagerError::InvalidConfig`], and nothing changes.
    ///
    /// ```
    /// use resident::{BoxError, CallOptions, FixedSizeCache, FixedSizeConfig, Loader, Manager, Model, ModelId, ModelManager};
    /// # struct M; impl Model for M { fn size_bytes(&self) -> u64 { 1 } }
    /// # struct L; impl Loader for L { type Model = M; fn load(&self, _: &ModelId) -> Result<M, BoxError> { Ok(M) } }
    /// let cache = FixedSizeCache::new(ModelManager::new(L), FixedSizeConfig::new(3))?;
    /// for id in ["a", "b", "c"] {
    ///     cache.add_model(id, None)?;
    /// }
    /// cache.set_max_size(1, CallOptions::new())?; // evicts a and b
    /// assert_eq!(cache.queue(), [ModelId::new("c")?]);
    /// assert!(cache.set_max_size(0, CallOptions::new()).is_err());
    /// assert_eq!(cache.max_size(), 1);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn set_max_size(&self, max_size: usize, options: CallOptions) -> Result<(), ManagerError> {
        if max_size == 0 {
            return Err(InvalidConfig { field: "max_size", reason: "must be greater than zero" }.into());
        }
        let lowered = self.book.with(|b| {
            let lowered = max_size < b.max_size;
            b.max_size = max_size;
            b.version += 1;
            lowered
        });
        if !lowered {
            // Room for the adds waiting for it (before the report: a subscriber is user code).
            self.inner.changes().bump_at(Mutant::LOST_WAKEUP_MAX_SIZE);
        }
        tracing::info!(max_size, lowered, "max_size changed");
        if self.mutant(Mutant::RESIZE_DOES_NOT_EVICT) {
            return Ok(());
        }
        // Even when not lowered: a concurrent lowering may still be evicting, and `Ok` means
        // the stack fit the limit at some point of this call.
        self.evict_down(options)
    }

    /// After a lowered capacity: evicts idle LRU models until the registered ones and the loads
    /// in flight fit, waiting (bounded) for the others to become idle.
    fn evict_down(&self, options: CallOptions) -> Result<(), ManagerError> {
        let rt = self.inner.runtime();
        let changes = self.inner.changes();
        let wait =
            options.deadline(rt).bound(rt, self.config.capacity_wait(), Mutant::DEADLINE_SKIPS_CAPACITY);
        let deadline = rt.now().checked_add(wait);
        let mut pinned_below = PinnedBelow::default();
        let over_limit = || {
            let (max_size, held, loading) =
                self.book.with(|b| (b.max_size, b.queue.iter().cloned().collect(), b.loading));
            telemetry::refused(ManagerError::OverLimit { max_size, held, loading, waited: wait })
        };
        loop {
            let epoch = changes.epoch();
            let (over, victims, seen) = self.book.with(|b| {
                pinned_below.refresh(b.version);
                let over = (b.queue.len() + b.loading).saturating_sub(b.max_size);
                let victims = b.victims(over, None, |v| {
                    !pinned_below.contains(v) && !self.inner.in_use(v) && !self.inner.is_locked(v)
                });
                (over, victims, b.version)
            });
            tracing::debug!(over, ?victims, "lowering max_size: plan");
            if over == 0 {
                return Ok(());
            }
            if !victims.is_empty() {
                match self.evict_all(&victims)? {
                    None => continue,
                    // Left out of the next plan (which may find other victims) until the queue
                    // or the pins change: evicting them again would find them pinned again.
                    Some(pinned) if !pinned.is_empty() => {
                        let spin = self.mutant(Mutant::RESIZE_RETRIES_PINNED_BELOW);
                        pinned_below.remember(seen, pinned.into_iter().filter(|_| !spin));
                        // Bounded here too: a queue that keeps changing forgets the pins found
                        // below, and every round could find them again.
                        if !spin && deadline.is_some_and(|d| rt.now() >= d) {
                            return Err(over_limit());
                        }
                        continue;
                    }
                    Some(_) => {}
                }
            }
            if deadline.is_some_and(|d| rt.now() >= d) {
                return Err(over_limit());
            }
            let left = deadline.map(|d| d.saturating_sub(rt.now()));
            let _ = changes.wait_past(epoch, left);
        }
    }

    /// A replace loads the new version beside the old one: refused at once when `max_size` can
    /// never hold both, with the old version's slot taken and every other slot pinned (in this
    /// layer or below). Loads in flight and models in use only make it wait: they end.
    fn check_slot_beside(&self, id: &ModelId) -> Result<(), ManagerError> {
        // A shut-down stack refuses with `ShutDown` first (the admission says so); under the
        // overflow policy the admission overflows instead of waiting.
        let overflows = self.config.policy() == CapacityPolicy::Overflow;
        if self.mutant(Mutant::REPLACE_WAITS_FOR_NO_SLOT) || overflows || self.inner.is_shut_down() {
            return Ok(());
        }
        let (max_size, others) = self.book.with(|b| {
            let others: Vec<ModelId> = b.queue.iter().filter(|q| *q != id).cloned().collect();
            (b.max_size, others)
        });
        // Asked outside the book's monitor: a layer below answers from its own.
        let pinned: Vec<ModelId> = others.into_iter().filter(|q| self.is_pinned(q.as_str())).collect();
        if max_size > pinned.len() + 1 {
            return Ok(());
        }
        Err(ManagerError::NoSlotBeside { id: id.clone(), max_size, pinned })
    }

    /// A replace through this layer, beside the old version or in its place. Nothing
    /// registered: an add. The id keeps its place in the queue and its pin; its size is read
    /// again after, and a version that grew may take the layer past `max_bytes`, as a cold add
    /// may (M-B1).
    fn replace_through(
        &self,
        guard: &LifecycleGuard<M::Model, M::Runtime>,
        canonical: &ModelId,
        in_place: bool,
    ) -> Result<Replaced, ManagerError> {
        let id = guard.id();
        if !self.inner.contains(id.as_str()) {
            return self.add_locked(guard, canonical).map(|_| Replaced::Added);
        }
        let settle = Settle { cache: self, id, way: Settling::Add };
        let replaced = if in_place {
            // Its queue entry holds its slot in the count while the new version loads.
            self.inner.replace_in_place_locked(guard, canonical)?
        } else {
            self.check_slot_beside(id)?;
            let admission = self.admit(id, guard.deadline(), true)?;
            let replaced = self.inner.replace_locked(guard, canonical)?;
            // The new version takes the old one's place: its slot in the count is not needed.
            drop(admission);
            replaced
        };
        let bytes = self.size_of(id);
        self.book.with(|b| b.set_size(id, bytes));
        drop(settle);
        if !self.mutant(Mutant::REPLACE_SKIPS_MAX_BYTES) {
            self.enforce_bytes(id);
        }
        Ok(replaced)
    }

    /// The LRU queue, least recently used first.
    pub fn queue(&self) -> Vec<ModelId> {
        self.book.with(|b| b.queue.iter().cloned().collect())
    }

    /// The pinned ids, in order.
    pub fn pinned(&self) -> Vec<ModelId> {
        self.book.with(|b| b.pinned.iter().cloned().collect())
    }

    /// Adds waiting for capacity right now, in line (a hint: SPEC 2.14 serves them in arrival
    /// order).
    pub fn waiting(&self) -> usize {
        self.book.with(|b| b.waiters.len())
    }

    /// Cold loads in flight.
    pub fn loading(&self) -> usize {
        self.book.with(|b| b.loading)
    }

    /// Whether the historical bug `mutant` is on (never, on the production runtime).
    fn mutant(&self, mutant: Mutant) -> bool {
        self.inner.runtime().mutant(mutant)
    }

    fn touch(&self, id: &ModelId) {
        if self.mutant(Mutant::NO_QUEUE_DEDUP) {
            self.book.with(|b| b.queue.push_back(id.clone()));
        } else {
            self.book.with(|b| b.touch(id));
        }
    }

    /// Counts a cold load of `id` against the capacity, evicting what it must; waits (bounded
    /// by the capacity wait and the call's `call` deadline) when nothing is evictable. With
    /// `beside`, `id` is registered and stays while its new version loads (a replace): it
    /// counts too.
    fn admit(
        &self,
        id: &ModelId,
        call: Deadline,
        beside: bool,
    ) -> Result<CapacityClaim<'_, M>, ManagerError> {
        let rt = self.inner.runtime();
        let wait = call.bound(rt, self.config.capacity_wait(), Mutant::DEADLINE_SKIPS_CAPACITY);
        // A wait too long to represent as a deadline is unbounded (as for every timeout).
        let deadline = rt.now().checked_add(wait);
        let expired = || deadline.is_some_and(|d| rt.now() >= d);
        let exhausted = |registered, loading| {
            telemetry::refused(ManagerError::CapacityExhausted {
                id: id.clone(),
                registered,
                loading,
                max_size: self.max_size(),
                waited: wait,
            })
        };
        let evict_leased = self.mutant(Mutant::EVICT_LEASED);
        let count_inflight = !self.mutant(Mutant::CAPACITY_IGNORES_INFLIGHT);
        if self.mutant(Mutant::APPEND_BEFORE_EVICT) {
            self.book.with(|b| b.push(id));
        }
        let mut pinned_below = PinnedBelow::default();
        // When full, ids a layer below removed are dropped from the queue once before evicting.
        let mut reconciled = false;
        let changes = self.inner.changes();
        // The slot this add counts against `max_size`. It is claimed as soon as the add decides
        // to evict (in the same critical section), so the room its evictions make stays its
        // own: a racing add cannot take it and force a second eviction for this one.
        let mut claimed: Option<CapacityClaim<'_, M>> = None;
        let refuse_after_shutdown = !self.mutant(Mutant::ADD_AFTER_SHUTDOWN);
        // Adds that wait for capacity are served in arrival order (SPEC 2.14): this add's place
        // in line while it has none, and the victim it designated as the first in line.
        let in_line = self.config.policy() != CapacityPolicy::Overflow;
        let barge = self.mutant(Mutant::CAPACITY_WAITERS_BARGE);
        let mut waiting: Option<Waiting<'_, M>> = None;
        let mut designated: Option<(ModelId, Designation<M::Runtime>)> = None;
        loop {
            // Read before planning: any change after this read ends the wait below at once.
            let (epoch, line_epoch) = (changes.epoch(), self.line.epoch());
            // A shut-down stack refuses the add before it evicts anything (the shutdown's
            // start wakes this wait).
            if refuse_after_shutdown && self.inner.is_shut_down() {
                return Err(telemetry::refused(ManagerError::ShutDown { id: id.clone() }));
            }
            let mine = claimed.is_some();
            let ticket = waiting.as_ref().map(|w| w.ticket);
            let held = designated.as_ref().map(|(victim, _)| victim);
            let (plan, seen, claim, joined, redesignated, behind) = self.book.with(|b| {
                let (seen, max) = (b.version, b.max_size);
                pinned_below.refresh(seen);
                let queued = b.queue.iter().filter(|q| *q != id).count() + usize::from(beside);
                let others = b.loading - usize::from(mine);
                let occupied = queued + if count_inflight { others } else { 0 };
                let full = EvictionPlan::Full { registered: queued, loading: b.loading };
                // Behind the adds that came earlier and still wait (an add that holds its slot
                // was served already).
                if in_line && !barge && !mine && b.waiters_ahead(ticket) {
                    let joined = ticket.is_none().then(|| b.wait_in_line());
                    return (full, seen, false, joined, None, true);
                }
                if occupied < max {
                    b.loading += usize::from(!mine);
                    return (EvictionPlan::Admit, seen, !mine, None, None, false);
                }
                let needed = occupied + 1 - max;
                let victims = b.victims(needed, Some(id), |v| {
                    !pinned_below.contains(v)
                        && (evict_leased || !self.inner.in_use(v))
                        && !self.inner.is_locked(v)
                });
                // Too few to admit it: evicting them would only take room that another add
                // needs (two adds each evicting a share of what both need, then waiting for
                // each other's slot until their deadlines).
                if victims.is_empty()
                    || (victims.len() < needed && !self.mutant(Mutant::PARTIAL_EVICTION_CLAIMS))
                {
                    let joined = (in_line && !mine && ticket.is_none()).then(|| b.wait_in_line());
                    // First in line: designate the least recently used victim that only
                    // leases keep, so that its last lease hands it over (in this monitor, so
                    // that no lease can end unseen between the plan and the designation).
                    let short = needed - victims.len();
                    let redesignated = in_line
                        .then(|| self.designation_for(b, id, held, short, &victims, &pinned_below))
                        .flatten();
                    return (full, seen, false, joined, redesignated, false);
                }
                b.loading += usize::from(!mine);
                (EvictionPlan::Evict(victims), seen, !mine, None, None, false)
            });
            if let Some(ticket) = joined {
                waiting = Some(Waiting { cache: self, ticket });
            }
            // A designation replaced or given up is dropped here, outside the monitor.
            if let Some(redesignated) = redesignated {
                designated = redesignated;
            }
            if claim {
                claimed = Some(CapacityClaim { cache: self, committed: false });
                // Served: out of the line, which wakes the next in it.
                waiting = None;
            }
            if matches!(plan, EvictionPlan::Admit) {
                designated = None;
            }
            if !reconciled && !matches!(plan, EvictionPlan::Admit) {
                reconciled = true;
                self.reconcile_below(id);
                continue;
            }
            match plan {
                EvictionPlan::Admit => return Ok(claimed.expect("an admitted add holds its slot")),
                EvictionPlan::Evict(victims) => {
                    // The designated victim may be among them: its designation keeps it closed
                    // through the round (a busy lock skips it, and it stays closed for the next).
                    let Some(pinned) = self.evict_all(&victims)? else { continue };
                    let spin = self.mutant(Mutant::DEADLINE_ONLY_WHEN_FULL);
                    pinned_below.remember(seen, pinned.into_iter().filter(|_| !spin));
                    // Every victim was skipped: the deadline bounds this path too (SPEC 2.12).
                    if !self.mutant(Mutant::DEADLINE_ONLY_WHEN_FULL) && expired() {
                        let (registered, loading) =
                            self.book.with(|b| (b.queue.iter().filter(|q| *q != id).count(), b.loading));
                        return Err(exhausted(registered, loading));
                    }
                    // Victims pinned only below are left out of the next plan: re-plan at once.
                    if !pinned_below.is_empty() {
                        continue;
                    }
                }
                EvictionPlan::Full { registered, loading } => {
                    if self.config.policy() == CapacityPolicy::Overflow {
                        let max = self.max_size();
                        tracing::warn!(%id, registered, loading, max, "cache full, nothing evictable: overflowing");
                        if let Some(claimed) = claimed {
                            return Ok(claimed);
                        }
                        self.book.with(|b| b.loading += 1);
                        return Ok(CapacityClaim { cache: self, committed: false });
                    }
                    if expired() {
                        return Err(exhausted(registered, loading));
                    }
                }
            }
            // Nothing to evict right now (all in use, pinned or busy): wait for the stack to
            // change since the plan (a lease ending, a lock released, a pin lifted), at most
            // until the deadline. Victims that a layer below pins stay out of the plans until
            // this layer's queue or pins change, so a wake-up never re-tries them in a loop.
            let left = deadline.map(|d| d.saturating_sub(rt.now()));
            // Behind another add: only its leaving the line can let this one go (a shutdown or
            // a raised limit reaches the first, whose leaving wakes the next, and so on).
            if behind {
                let _ = self.line.wait_past(line_epoch, left);
            } else {
                let _ = changes.wait_past(epoch, left);
            }
        }
    }

    /// For the first add in line, planned under the book's monitor while it is `short` of
    /// victims beyond `victims` (the evictable ones): `None` keeps no designation (it held
    /// none), `Some` replaces the one it `held` (with `None`, gives it up). Only one victim
    /// short is a designation worth its close (a victim closed while the add still waits for
    /// others would keep its leases waiting for nothing). It keeps its victim while that is
    /// queued, not pinned here nor found pinned below, not evictable already and its lifecycle
    /// lock free; a new one is the least recently used such model.
    fn designation_for(
        &self,
        b: &Bookkeeping,
        id: &ModelId,
        held: Option<&ModelId>,
        short: usize,
        victims: &[ModelId],
        pinned_below: &PinnedBelow,
    ) -> Option<Option<(ModelId, Designation<M::Runtime>)>> {
        if short != 1 {
            return held.map(|_| None);
        }
        // Not evictable already (closed for nothing while the add still waits for another),
        // and its lifecycle lock free (a holder, such as a replace waiting behind this add, may
        // need its leases meanwhile).
        let open =
            |v: &ModelId| !victims.contains(v) && !pinned_below.contains(v) && !self.inner.is_locked(v);
        let keeps = |v: &ModelId| b.queue.contains(v) && !b.pinned.contains(v) && v != id && open(v);
        let victim = match held.filter(|v| keeps(v)) {
            Some(held) => Some(held.clone()),
            None => b.victims(1, Some(id), open).pop(),
        };
        // A kept victim is designated again: if it was replaced, or removed and added again,
        // since, the slot now registered is the one designated (the old designation goes after).
        Some(victim.and_then(|victim| self.inner.designate(victim.as_str()).map(|d| (victim, d))))
    }

    /// Evicts `victims` in order: `None` if at least one went, else the skipped victims that
    /// some layer pins. A busy, pinned or in-use victim is skipped; a failed unload ends the
    /// round with its error (completed evictions stay done; the failed victim keeps its place).
    fn evict_all(&self, victims: &[ModelId]) -> Result<Option<Vec<ModelId>>, ManagerError> {
        if self.mutant(Mutant::QUEUE_LOCK_DURING_EVICTION) {
            return self.evict_holding_the_queue(victims).map(|evicted| (!evicted).then(Vec::new));
        }
        let popped_pins = self.pop_for_eviction(victims);
        let (mut evicted, mut pinned) = (false, Vec::new());
        for victim in victims {
            match self.evict(victim, "max_size")? {
                Some(Eviction::Evicted | Eviction::NotRegistered) => evicted = true,
                Some(Eviction::Pinned) => pinned.push(victim.clone()),
                Some(Eviction::InUse) | None => {}
            }
        }
        if let Some(pins) = popped_pins {
            self.book.with(|b| pins.into_iter().rev().for_each(|p| b.queue.push_front(p)));
        }
        Ok((!evicted).then_some(pinned))
    }

    /// Mutant S5: pop skipped pins and the victims off the queue before evicting (upstream).
    fn pop_for_eviction(&self, victims: &[ModelId]) -> Option<Vec<ModelId>> {
        if !self.mutant(Mutant::NO_EVICTION_RESTORE) {
            return None;
        }
        Some(self.book.with(|b| {
            let (mut pins, mut kept, mut left) = (Vec::new(), Vec::new(), victims.to_vec());
            while let Some(front) = b.queue.pop_front().filter(|_| !left.is_empty()) {
                if b.pinned.contains(&front) {
                    pins.push(front);
                } else if let Some(at) = left.iter().position(|v| *v == front) {
                    left.remove(at);
                } else {
                    kept.push(front);
                }
            }
            kept.into_iter().rev().for_each(|k| b.queue.push_front(k));
            pins
        }))
    }

    /// Mutant S13: hold the queue lock while waiting for each victim's lifecycle lock.
    fn evict_holding_the_queue(&self, victims: &[ModelId]) -> Result<bool, ManagerError> {
        self.book.with(|b| {
            for victim in victims {
                let guard = self.inner.lock(victim)?;
                self.inner.remove_locked(&guard)?;
                b.forget(victim);
            }
            Ok(!victims.is_empty())
        })
    }

    /// Evicts one victim; `None` if its lifecycle lock is busy (skipped).
    fn evict(&self, victim: &ModelId, by: &'static str) -> Result<Option<Eviction>, ManagerError> {
        let Some(guard) = self.inner.try_lock(victim) else {
            tracing::debug!(%victim, "evict: busy, skipped");
            return Ok(None);
        };
        if !self.inner.contains(victim.as_str()) {
            self.book.with(|b| b.forget(victim));
            return Ok(Some(Eviction::NotRegistered));
        }
        if self.mutant(Mutant::EVICT_LEASED) {
            return self.evict_in_use(&guard).map(Some);
        }
        let evicted = self.evict_sized(&guard);
        match &evicted {
            Ok((outcome, bytes)) => {
                tracing::debug!(%victim, ?outcome, "evict");
                if *outcome == Eviction::Evicted {
                    telemetry::evicted(by, *bytes);
                }
            }
            Err(error) => tracing::debug!(%victim, %error, "eviction failed"),
        }
        evicted.map(|(outcome, _)| Some(outcome))
    }

    /// Mutant L2: removes the victim whatever its leases (remove's drain, then `Busy`).
    fn evict_in_use(&self, guard: &LifecycleGuard<M::Model, M::Runtime>) -> Result<Eviction, ManagerError> {
        if self.book.with(|b| b.pinned.contains(guard.id())) {
            return Ok(Eviction::Pinned);
        }
        self.inner.remove_locked(guard)?;
        self.book.with(|b| b.forget(guard.id()));
        Ok(Eviction::Evicted)
    }

    /// Drops queued ids (other than `except`) that a layer below removed — an inner cache's
    /// evictions — so that this layer's queue equals the registry again (I4 at every depth). An
    /// id whose lifecycle lock is busy is left to its holder, who settles it.
    fn reconcile_below(&self, except: &ModelId) {
        if self.mutant(Mutant::NESTED_QUEUE_STALE) {
            return;
        }
        let registered: BTreeSet<ModelId> = self.inner.ids().into_iter().collect();
        let gone: Vec<ModelId> = self
            .book
            .with(|b| b.queue.iter().filter(|q| *q != except && !registered.contains(*q)).cloned().collect());
        for id in &gone {
            let Some(guard) = self.inner.try_lock(id) else { continue };
            if !self.inner.contains(id.as_str()) {
                self.book.with(|b| b.forget(id));
            }
            drop(guard);
        }
    }

    /// The registered model's size (user code: called with no monitor held).
    fn size_of(&self, id: &ModelId) -> u64 {
        self.inner.lease(id.as_str()).map(|l| l.size_bytes()).unwrap_or(0)
    }

    /// After a load: evict LRU models until the byte budget holds again. Failures only warn:
    /// the load itself succeeded.
    fn enforce_bytes(&self, keep: &ModelId) {
        let Some(max_bytes) = self.config.max_bytes() else { return };
        loop {
            let (bytes, victim) = self.book.with(|b| {
                let bytes = b.bytes();
                let victim = (bytes > max_bytes)
                    .then(|| b.victims(1, Some(keep), |v| !self.inner.in_use(v)).pop())
                    .flatten();
                (bytes, victim)
            });
            let Some(victim) = victim else {
                if bytes > max_bytes {
                    tracing::warn!(bytes, max_bytes, "over the byte budget, nothing evictable");
                }
                return;
            };
            match self.evict(&victim, "max_bytes") {
                Ok(Some(Eviction::Evicted | Eviction::NotRegistered)) => {}
                Ok(Some(Eviction::Pinned | Eviction::InUse) | None) => return,
                Err(error) => {
                    tracing::warn!(%victim, %error, "byte-budget eviction failed");
                    return;
                }
            }
        }
    }
}

impl<M: Manager> FixedSizeCache<M> {
    /// [`Manager::evict_locked`], with the bytes this layer had recorded for the evicted model
    /// (0 if it was not evicted).
    fn evict_sized(
        &self,
        guard: &LifecycleGuard<M::Model, M::Runtime>,
    ) -> Result<(Eviction, u64), ManagerError> {
        let id = guard.id();
        if self.book.with(|b| b.pinned.contains(id)) {
            return Ok((Eviction::Pinned, 0));
        }
        let settle = (!self.mutant(Mutant::QUEUE_SKIPPED_ON_PANIC)).then_some(Settle {
            cache: self,
            id,
            way: Settling::Remove,
        });
        let evicted = self.inner.evict_locked(guard)?;
        let mut bytes = 0;
        if evicted == Eviction::Evicted {
            bytes = self.book.with(|b| {
                let bytes = b.sizes.get(id).copied().unwrap_or(0);
                b.forget(id);
                bytes
            });
        }
        drop(settle);
        Ok((evicted, bytes))
    }

    /// The cold path of an add (or a register) under `guard`, whose id is not registered:
    /// admission (evicting or waiting for room), then `register` (the inner call that loads or
    /// registers), then the queue. With `canonical` (a load), callers of a failed load of it
    /// that they waited for get its error before any room is made.
    fn add_cold(
        &self,
        guard: &LifecycleGuard<M::Model, M::Runtime>,
        canonical: Option<&ModelId>,
        register: impl FnOnce() -> Result<Added, ManagerError>,
    ) -> Result<Added, ManagerError> {
        let id = guard.id();
        // Settles the id's entry on every exit, a failed or panicking admission included: an
        // entry of this id that a layer below evicted is this lock holder's to drop. (Mutant
        // S11 queues the id inside `admit` and must not be rolled back: it settles only after.)
        let early = !self.mutant(Mutant::APPEND_BEFORE_EVICT);
        let settle = early.then(|| Settle { cache: self, id, way: Settling::Add });
        // A shut-down stack refuses before anything else.
        if self.inner.is_shut_down() && !self.mutant(Mutant::ADD_AFTER_SHUTDOWN) {
            return Err(telemetry::refused(ManagerError::ShutDown { id: id.clone() }));
        }
        // Callers of a load that failed while they waited get its error before making room.
        if let Some(error) = canonical.and_then(|canonical| guard.shared_failure(canonical)) {
            return Err(error);
        }
        let admission = self.admit(id, guard.deadline(), false)?;
        let settle = settle.unwrap_or_else(|| Settle { cache: self, id, way: Settling::Add });
        if self.mutant(Mutant::SIZE_BEFORE_QUEUE) {
            // The historical bug queues by hand, after asking the size.
            drop(settle);
            let added = register()?;
            let bytes = self.size_of(id);
            admission.commit(id);
            self.book.with(|b| b.set_size(id, bytes));
            return Ok(added);
        }
        let added = register()?;
        admission.commit(id);
        let bytes = self.size_of(id);
        self.book.with(|b| b.set_size(id, bytes));
        drop(settle);
        self.enforce_bytes(id);
        Ok(added)
    }
}

impl<M: Manager> Manager for FixedSizeCache<M> {
    type Model = M::Model;
    type Runtime = M::Runtime;

    forward_reads!();

    fn lock_until(
        &self,
        id: &str,
        deadline: Deadline,
    ) -> Result<LifecycleGuard<M::Model, M::Runtime>, ManagerError> {
        self.inner.lock_until(id, deadline)
    }

    fn try_lock(&self, id: &str) -> Option<LifecycleGuard<M::Model, M::Runtime>> {
        self.inner.try_lock(id)
    }

    fn add_model_with(
        &self,
        id: &str,
        alias: Option<&str>,
        options: CallOptions,
    ) -> Result<Added, ManagerError> {
        let (canonical, resolved) = resolve(id, alias)?;
        if self.mutant(Mutant::UNLOCKED_WARM_PATH) && self.inner.contains(resolved.as_str()) {
            self.book.with(|b| b.touch(&resolved));
            return Ok(Added::Warm);
        }
        let queued_early = self.mutant(Mutant::ROLLBACK_REMOVES_ALL);
        if queued_early {
            self.book.with(|b| b.queue.push_back(resolved.clone()));
        }
        let deadline = options.deadline(self.inner.runtime());
        let result = self.lock_until(&resolved, deadline).and_then(|guard| {
            let result = self.add_locked(&guard, &canonical);
            drop(guard);
            if self.mutant(Mutant::WARM_TOUCH_OUTSIDE_LOCK) && matches!(result, Ok(Added::Warm)) {
                self.book.with(|b| b.touch_appending(&resolved));
            }
            result
        });
        if queued_early && result.is_err() {
            self.book.with(|b| b.queue.retain(|q| *q != resolved));
        }
        result
    }

    fn add_locked(
        &self,
        guard: &LifecycleGuard<M::Model, M::Runtime>,
        canonical: &ModelId,
    ) -> Result<Added, ManagerError> {
        let id = guard.id();
        if self.mutant(Mutant::CANONICAL_WARM_CHECK) && self.inner.contains(canonical.as_str()) {
            self.touch(id);
            return Ok(Added::Warm);
        }
        if self.inner.contains(id.as_str()) {
            let added = self.inner.add_locked(guard, canonical)?;
            if !self.mutant(Mutant::WARM_TOUCH_OUTSIDE_LOCK) {
                self.touch(id);
            }
            return Ok(added);
        }
        self.add_cold(guard, Some(canonical), || self.inner.add_locked(guard, canonical))
    }

    /// Makes room for the new version beside the old one first (the id itself is never a
    /// victim); the id keeps its place in the queue and its pin.
    fn replace_locked(
        &self,
        guard: &LifecycleGuard<M::Model, M::Runtime>,
        canonical: &ModelId,
    ) -> Result<Replaced, ManagerError> {
        self.replace_through(guard, canonical, false)
    }

    /// Needs no slot beside the old version: the id keeps its place in the queue (and in the
    /// count) while its new version loads into the slot the old one left, and its pin. If the
    /// new version fails to load, the id leaves the queue.
    fn replace_in_place_locked(
        &self,
        guard: &LifecycleGuard<M::Model, M::Runtime>,
        canonical: &ModelId,
    ) -> Result<Replaced, ManagerError> {
        self.replace_through(guard, canonical, true)
    }

    fn remove_locked(&self, guard: &LifecycleGuard<M::Model, M::Runtime>) -> Result<(), ManagerError> {
        let id = guard.id();
        if self.mutant(Mutant::QUEUE_REMOVAL_FIRST) {
            self.book.with(|b| b.forget(id));
            return self.inner.remove_locked(guard);
        }
        let settle = (!self.mutant(Mutant::QUEUE_SKIPPED_ON_PANIC)).then_some(Settle {
            cache: self,
            id,
            way: Settling::Remove,
        });
        self.inner.remove_locked(guard)?;
        self.book.with(|b| b.forget(id));
        drop(settle);
        Ok(())
    }

    /// Skips a victim pinned in this layer; otherwise the layers below decide. The queue entry is
    /// settled from the registry on every exit.
    fn evict_locked(&self, guard: &LifecycleGuard<M::Model, M::Runtime>) -> Result<Eviction, ManagerError> {
        self.evict_sized(guard).map(|(outcome, _)| outcome)
    }

    /// Goes through admission like a cold add: counted against `max_size`, evicting or waiting
    /// for room (bounded by the guard's deadline); queued once registered.
    fn register_locked(
        &self,
        guard: &LifecycleGuard<M::Model, M::Runtime>,
        model: M::Model,
    ) -> Result<(), RegisterError<M::Model>> {
        let id = guard.id();
        if self.mutant(Mutant::REGISTER_UNADMITTED) || self.inner.contains(id.as_str()) {
            // Registered already: the layers below refuse it and hand the model back. (The
            // mutant's fast path registers without admission, and queues what it registered.)
            let registered = self.inner.register_locked(guard, model);
            if registered.is_ok() {
                self.book.with(|b| b.push(id));
            }
            return registered;
        }
        // Here until the inner call takes it, and back here if that refuses it.
        let mut held = Some(model);
        let added = self.add_cold(guard, None, || {
            let model = held.take().expect("the inner call runs once");
            self.inner.register_locked(guard, model).map(|()| Added::Loaded).map_err(|back| {
                held = Some(back.model);
                back.error
            })
        });
        match (added, held) {
            (Ok(_), _) => Ok(()),
            (Err(error), Some(model)) => Err(RegisterError::new(error, model)),
            (Err(error), None) => unreachable!("every refusal hands the model back: {error}"),
        }
    }

    /// Removes through this layer (its queue follows), keeping its pins.
    fn clear(&self, options: CallOptions) -> RemovalReport {
        if self.mutant(Mutant::CLEAR_BYPASSES_LAYERS) {
            return self.inner.clear(options);
        }
        let report = clear_each(self, options);
        if self.mutant(Mutant::CLEAR_DROPS_PINS) {
            self.book.with(|b| b.pinned.clear());
        }
        report
    }

    fn lease_until(&self, id: &str, deadline: Deadline) -> Result<Lease<M::Model, M::Runtime>, ManagerError> {
        if self.mutant(Mutant::TOUCH_UNKNOWN) {
            let resolved = ModelId::new(id)?;
            self.book.with(|b| b.touch_appending(&resolved));
            return self.inner.lease_until(id, deadline);
        }
        let lease = self.inner.lease_until(id, deadline)?;
        self.book.with(|b| b.touch(lease.id()));
        Ok(lease)
    }

    fn pin_with(&self, id: &str, options: CallOptions) -> Result<(), ManagerError> {
        let resolved = ModelId::new(id)?;
        if self.mutant(Mutant::PIN_UNORDERED) {
            self.inner.pin_with(id, options)?;
            self.book.with(|b| b.pinned.insert(resolved));
            return Ok(());
        }
        let deadline = options.deadline(self.runtime());
        let deadline = if self.mutant(Mutant::DEADLINE_SKIPS_PIN) { Deadline::NONE } else { deadline };
        let guard = self.lock_until(&resolved, deadline)?;
        self.pin_locked(&guard)
    }

    /// Holding the id's lifecycle lock, it also drops a stale queue entry of it (one that a
    /// reconcile left to this lock's holder).
    fn pin_locked(&self, guard: &LifecycleGuard<M::Model, M::Runtime>) -> Result<(), ManagerError> {
        let _settle = Settle { cache: self, id: guard.id(), way: Settling::Remove };
        if !self.mutant(Mutant::PIN_NOT_FORWARDED) {
            self.inner.pin_locked(guard)?;
        }
        self.book.with(|b| b.pinned.insert(guard.id().clone()));
        Ok(())
    }

    /// Pinned here, or in a layer below.
    fn is_pinned(&self, id: &str) -> bool {
        self.book.with(|b| b.pinned.contains(id)) || self.inner.is_pinned(id)
    }

    fn unpin_with(&self, id: &str, options: CallOptions) -> Result<(), ManagerError> {
        let resolved = ModelId::new(id)?;
        if self.mutant(Mutant::UNPIN_UNORDERED) {
            self.inner.unpin_with(id, options)?;
            self.book.with(|b| b.unpin(&resolved));
            self.inner.changes().bump();
            return Ok(());
        }
        let guard = self.lock_until(&resolved, options.deadline(self.runtime()))?;
        self.unpin_locked(&guard)
    }

    /// Under the id's lifecycle lock, like the pin it undoes: every layer sees the pin and the
    /// unpin of one id in the same order. Like every holder of that lock, it drops a stale queue
    /// entry of the id.
    fn unpin_locked(&self, guard: &LifecycleGuard<M::Model, M::Runtime>) -> Result<(), ManagerError> {
        let _settle = Settle { cache: self, id: guard.id(), way: Settling::Remove };
        self.inner.unpin_locked(guard)?;
        self.book.with(|b| b.unpin(guard.id()));
        // An add waiting for room must re-plan (a victim it skipped is evictable now): the
        // release of `guard` wakes it, the one notify site of an unpin (W-5).
        Ok(())
    }
}

impl<M: Manager> fmt::Debug for FixedSizeCache<M> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("FixedSizeCache")
            .field("config", &self.config)
            .field("queue", &self.queue())
            .field("pinned", &self.pinned())
            .finish_non_exhaustive()
    }
}
