//! Admission: how a cold add gets its slot against `max_size` — evicting the least recently
//! used victims, or waiting in line for capacity (SPEC 2.14: arrival order, the first in line
//! designating its victim) — and the cold path that loads into that slot.

use super::plans::{self, Admitting, EvictionPlan, Round, Stack, Standing};
use super::queue::PinnedBelow;
use super::{CapacityPolicy, FixedSizeCache, Settle, Settling};
use std::time::Duration;

use crate::deadline::Deadline;
use crate::error::ManagerError;
use crate::held::Held;
use crate::id::ModelId;
use crate::manager::{Added, Designation, LifecycleGuard, Manager};
use crate::mutants::Mutant;
use crate::runtime::{Arc, Runtime, Signal};
use crate::telemetry;

/// A slot counted against `max_size` while a cold load runs; released unless committed.
pub(super) struct CapacityClaim<'a, M: Manager> {
    cache: &'a FixedSizeCache<M>,
    committed: bool,
}

impl<M: Manager> CapacityClaim<'_, M> {
    /// The load succeeded: the id takes its slot in the queue (its size is recorded apart, as
    /// asking it runs user code).
    pub(super) fn commit(mut self, id: &ModelId) {
        self.committed = true;
        self.cache.book.with(|b| {
            b.loading -= 1;
            b.push(id);
        });
    }
}

impl<M: Manager> Drop for CapacityClaim<'_, M> {
    /// A slot given back (the load failed or panicked) may be the one an add waits for: it is
    /// told now, not when this add's lifecycle lock is released (its caller may hold it on).
    fn drop(&mut self) {
        if !self.committed {
            self.cache.book.with(|b| b.loading -= 1);
            self.cache.inner.changes().bump_at(Mutant::LOST_WAKEUP_CAPACITY_CLAIM_DROPPED);
        }
    }
}

/// An add's place among the adds waiting for capacity: it leaves the line when dropped (served,
/// refused, out of time, or unwinding), and wakes the next add (only that one) if it was first.
struct Waiting<'a, M: Manager> {
    cache: &'a FixedSizeCache<M>,
    ticket: u64,
}

impl<M: Manager> Drop for Waiting<'_, M> {
    fn drop(&mut self) {
        let rt = self.cache.inner.runtime();
        let next = self.cache.book.with(|b| b.waiters.leave_observed(self.ticket, rt));
        if let Some(next) = next {
            next.bump_at(Mutant::LOST_WAKEUP_CAPACITY_WAITER_LEFT);
        }
    }
}

// ---- Admission ----------------------------------------------------------------------------------

impl<M: Manager> FixedSizeCache<M> {
    /// Counts a cold load of `id` against the capacity, evicting what it must; waits (bounded
    /// by the capacity wait and the call's `call` deadline) when nothing is evictable. With
    /// `beside`, `id` is registered and stays while its new version loads (a replace): it
    /// counts too.
    pub(super) fn admit(
        &self,
        id: &ModelId,
        call: Deadline,
        beside: bool,
    ) -> Result<CapacityClaim<'_, M>, ManagerError> {
        let rt = self.inner.runtime();
        let wait = call.bound(rt, self.config.capacity_wait(), Mutant::DEADLINE_SKIPS_CAPACITY);
        // A wait too long to represent as a deadline is unbounded (as for every timeout).
        let deadline = rt.now().checked_add(wait);
        if self.mutant(Mutant::APPEND_BEFORE_EVICT) {
            self.book.with(|b| b.push(id));
        }
        let changes = self.inner.changes();
        let refuse_after_shutdown = !self.mutant(Mutant::ADD_AFTER_SHUTDOWN);
        let a = self.admitting(id, beside);
        let mut attempt = Attempt::new(self, a, wait, deadline);
        // Before the first look: the end of a lease is announced only while watched.
        let watch_late = self.mutant(Mutant::WATCH_AFTER_PLAN);
        let mut watch = (!watch_late).then(|| changes.watch());
        loop {
            // Read before planning: any change after this read ends the wait below at once.
            let (epoch, line_epoch) = (changes.epoch(), attempt.a.wake.epoch());
            // A shut-down stack refuses the add before it evicts anything (the shutdown's
            // start wakes this wait).
            if refuse_after_shutdown && self.inner.is_shut_down() {
                return Err(telemetry::refused(ManagerError::ShutDown { id: id.clone() }));
            }
            let round = attempt.plan();
            let behind = match attempt.act(round)? {
                Next::Admitted(claim) => return Ok(claim),
                Next::Replan => continue,
                Next::Wait { behind } => behind,
            };
            // Nothing to evict right now (all in use, pinned or busy): wait for the stack to
            // change since the plan (a lease ending, a lock released, a pin lifted), at most
            // until the deadline. Victims that a layer below pins stay out of the plans until
            // this layer's book changes or a pin is lifted or an id removed below (no loop).
            if watch_late {
                watch.get_or_insert_with(|| changes.watch());
            }
            let left = deadline.map(|d| d.saturating_sub(rt.now()));
            // Behind another add: only its leaving the line can let this one go (a shutdown or
            // a raised limit reaches the first, whose leaving wakes the next, and so on).
            if behind {
                let _ = attempt.a.wake.wait_past(line_epoch, left);
            } else {
                let _ = changes.wait_past(epoch, left);
            }
        }
    }

    /// What an add of `id` brings to every round of its admission: the policy's line, and the
    /// plan's mutant flags.
    fn admitting<'i>(&self, id: &'i ModelId, beside: bool) -> Admitting<'i, super::Wake<M>> {
        let (evict_leased, count_inflight) =
            (self.mutant(Mutant::EVICT_LEASED), !self.mutant(Mutant::CAPACITY_IGNORES_INFLIGHT));
        // Adds that wait for capacity are served in arrival order (SPEC 2.14).
        let in_line = self.config.policy() != CapacityPolicy::Overflow;
        let barge = self.mutant(Mutant::CAPACITY_WAITERS_BARGE);
        // An add that overflows anyway evicts what it can first: it overflows by as few as it
        // must (and only once nothing is evictable, SPEC 2.7). An add that waits evicts only
        // what admits it (historical bug: `partial-eviction-claims`).
        let overflows_all = self.mutant(Mutant::OVERFLOW_EVICTS_NOTHING);
        let partial = (!in_line && !overflows_all) || self.mutant(Mutant::PARTIAL_EVICTION_CLAIMS);
        let starve_lowered = self.mutant(Mutant::LOWERED_LIMIT_STARVES_ADDS);
        let wake = Arc::new(Signal::new(self.inner.runtime()));
        Admitting { id, beside, count_inflight, evict_leased, in_line, barge, partial, starve_lowered, wake }
    }

    /// The refusal of an add that found no room within `wait`.
    fn exhausted(
        &self,
        id: &ModelId,
        registered: usize,
        loading: usize,
        wait: std::time::Duration,
    ) -> ManagerError {
        telemetry::refused(ManagerError::CapacityExhausted {
            id: id.clone(),
            registered,
            loading,
            max_size: self.max_size(),
            waited: wait,
        })
    }

    /// The `Overflow` policy's way out of a full cache: the add loads anyway, in the slot it
    /// holds or in one counted now.
    fn overflow<'a>(
        &'a self,
        id: &ModelId,
        registered: usize,
        loading: usize,
        claimed: Option<CapacityClaim<'a, M>>,
    ) -> CapacityClaim<'a, M> {
        let max = self.max_size();
        tracing::warn!(%id, registered, loading, max, "cache full, nothing evictable: overflowing");
        if let Some(claimed) = claimed {
            return claimed;
        }
        self.book.with(|b| b.loading += 1);
        CapacityClaim { cache: self, committed: false }
    }

    /// The cold path of an add (or a register) under `guard`, whose id is not registered:
    /// admission (evicting or waiting for room), then `register` (the inner call that loads or
    /// registers), then the queue. With `canonical` (a load), callers of a failed load of it
    /// that they waited for get its error before any room is made.
    pub(super) fn add_cold(
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
            return self.size_before_queue(id, admission, settle, register);
        }
        self.registering(id, register, || {
            admission.commit(id);
            let bytes = self.size_of(id);
            self.book.with(|b| b.set_size(id, bytes));
            // Registered: the lock keeps it so from the inner call's return.
            settle.registered(true);
            self.enforce_bytes(id);
        })
    }

    /// Runs `call`, an inner call that registers `id` under its lock (an add, a replace), then
    /// `registered`: this layer's bookkeeping of the model it registered. A panic of the call
    /// after the registration (a report of the load: user code) leaves the model registered,
    /// and the lock keeps it so: `registered` runs all the same, then the panic goes on.
    pub(super) fn registering<T>(
        &self,
        id: &ModelId,
        call: impl FnOnce() -> Result<T, ManagerError>,
        registered: impl FnOnce(),
    ) -> Result<T, ManagerError> {
        let done = match <M::Runtime as Runtime>::catch_unwind(call) {
            Ok(done) => Ok(done?),
            Err(payload) if self.inner.contains(id.as_str()) && !self.mutant(Mutant::PANIC_SKIPS_SIZE) => {
                Err(payload)
            }
            Err(payload) => <M::Runtime as Runtime>::resume_caught(payload),
        };
        // Held across the sizing and the byte bound (user code): a replace's detached old
        // version may carry its unload's error.
        let done = Held::<_, M::Runtime>::new(done, !self.mutant(Mutant::USER_ERROR_DROPPED_IN_UNWIND));
        registered();
        Ok(done.into_inner().unwrap_or_else(|payload| <M::Runtime as Runtime>::resume_caught(payload)))
    }
}

/// What an add's admission does next, after a round.
enum Next<'a, M: Manager> {
    /// It holds its slot: done.
    Admitted(CapacityClaim<'a, M>),
    /// Plan again at once.
    Replan,
    /// Wait for the stack to change (`behind`: for the line to move).
    Wait { behind: bool },
}

// ---- One attempt --------------------------------------------------------------------------------

/// A cold add's admission under way: what it holds between rounds. Its fields drop in this
/// order when the add gives up (its designation, then its place in line, then its slot).
struct Attempt<'a, 'i, M: Manager> {
    /// The victim it designated as the first in line.
    designated: Option<(ModelId, Designation<M::Runtime>)>,
    /// Its place in line while it waits for capacity.
    waiting: Option<Waiting<'a, M>>,
    /// The slot it counts against `max_size`, claimed as soon as it decides to evict (in the
    /// same critical section), so the room its evictions make stays its own: a racing add
    /// cannot take it and force a second eviction for this one.
    claimed: Option<CapacityClaim<'a, M>>,
    cache: &'a FixedSizeCache<M>,
    a: Admitting<'i, super::Wake<M>>,
    /// Victims found pinned below, left out of the plans until the book or the stack changes.
    pinned_below: PinnedBelow,
    /// Whether it looked for ids a layer below removed yet (it looks on every round that
    /// evicts or waits; the first look also replans if the book moved since the plan).
    reconciled: bool,
    /// How long the add may wait, and until when.
    wait: Duration,
    deadline: Option<Duration>,
}

impl<'a, 'i, M: Manager> Attempt<'a, 'i, M> {
    fn new(
        cache: &'a FixedSizeCache<M>,
        a: Admitting<'i, super::Wake<M>>,
        wait: Duration,
        deadline: Option<Duration>,
    ) -> Self {
        let (designated, waiting, claimed) = (None, None, None);
        let (pinned_below, reconciled) = (PinnedBelow::default(), false);
        Self { designated, waiting, claimed, cache, a, pinned_below, reconciled, wait, deadline }
    }

    /// Plans a round under the book's monitor and takes what it decided there: a place in
    /// line, a designation (one replaced or given up is dropped here, outside the monitor),
    /// the slot.
    fn plan(&mut self) -> Round<Designation<M::Runtime>> {
        let cache = self.cache;
        let held = self.designated.as_ref().map(|(victim, _)| victim);
        let ticket = self.waiting.as_ref().map(|w| w.ticket);
        let s = Standing { mine: self.claimed.is_some(), ticket, held };
        let (a, pinned_below) = (&self.a, &mut self.pinned_below);
        let mut round = cache
            .book
            .planned(|b, order| plans::admission(b, a, &s, pinned_below, &Stack(&cache.inner), order));
        if let Some(ticket) = round.joined {
            self.waiting = Some(Waiting { cache, ticket });
        }
        if let Some(redesignated) = round.redesignated.take() {
            self.designated = redesignated;
        }
        if round.claim {
            self.claimed = Some(CapacityClaim { cache, committed: false });
            // Served: out of the line, which wakes the next in it.
            self.waiting = None;
        }
        // A served add needs no victim beyond this round's: a designation on another is given
        // up now (which reopens it), not after the round's unloads (SPEC 2.14).
        let needed = match &round.plan {
            EvictionPlan::Evict(victims) if self.claimed.is_some() => {
                self.cache.mutant(Mutant::SERVED_KEEPS_DESIGNATION)
                    || self.designated.as_ref().is_some_and(|(held, _)| victims.contains(held))
            }
            EvictionPlan::Admit => false,
            _ => true,
        };
        if !needed {
            self.designated = None;
        }
        round
    }

    /// Acts on `round` outside the monitor: reconciles with the layers below, evicts the
    /// planned victims, or says to wait; refuses once the deadline has passed.
    fn act(&mut self, round: Round<Designation<M::Runtime>>) -> Result<Next<'a, M>, ManagerError> {
        let (cache, id) = (self.cache, self.a.id);
        // Before every eviction or wait: ids a layer below removed (one may go while this add
        // waits) free their slots. Plan again if some went, or, the first time, if the book
        // moved since the plan (another add's reconcile may have dropped them meanwhile): the
        // plan must not evict a live model for room that is free already. The look costs one
        // read while the stack counted no removal since the last.
        if !matches!(round.plan, EvictionPlan::Admit) {
            let first = !self.reconciled;
            self.reconciled = true;
            // `pinned-below-stays-out` was a bug of a stack that looked once, too (M-PN2r).
            let once = [Mutant::ADMISSION_RECONCILES_ONCE, Mutant::PINNED_BELOW_STAYS_OUT]
                .into_iter()
                .any(|m| cache.mutant(m));
            let dropped = (first || !once) && cache.reconcile_below(Some(id));
            if dropped || (first && cache.book.with(|b| b.version) != round.seen) {
                return Ok(Next::Replan);
            }
        }
        match round.plan {
            EvictionPlan::Admit => {
                Ok(Next::Admitted(self.claimed.take().expect("an admitted add holds its slot")))
            }
            // Owed to a lowered capacity or not, the victims go the same way.
            EvictionPlan::Evict(victims) | EvictionPlan::Owed(victims) => {
                self.evict(&victims, round.seen, round.behind)
            }
            EvictionPlan::Full { registered, loading } => {
                if cache.config.policy() == CapacityPolicy::Overflow {
                    return Ok(Next::Admitted(cache.overflow(id, registered, loading, self.claimed.take())));
                }
                if self.expired() {
                    return Err(cache.exhausted(id, registered, loading, self.wait));
                }
                Ok(Next::Wait { behind: round.behind })
            }
        }
    }

    /// Evicts a round's `victims` (planned at version `seen`); then plans again (at once if
    /// one went or some were found pinned below: the wait that follows ends at once after a
    /// change), or refuses once the deadline has passed.
    fn evict(&mut self, victims: &[ModelId], seen: u64, behind: bool) -> Result<Next<'a, M>, ManagerError> {
        let (cache, id) = (self.cache, self.a.id);
        // The designated victim may be among them: its designation keeps it closed through the
        // round (a busy lock skips it, and it stays closed for the next).
        let Some((pinned, counts)) = cache.evict_all(victims)? else { return Ok(Next::Replan) };
        let spin = cache.mutant(Mutant::DEADLINE_ONLY_WHEN_FULL);
        self.pinned_below.remember(seen, counts, pinned.into_iter().filter(|_| !spin));
        let others = || cache.book.with(|b| (b.queue.iter().filter(|q| *q != id).count(), b.loading));
        // Every victim was skipped: each was locked, leased or pinned since the plan, which may
        // wake nobody (a lock held on, a lease's start) while a model the plan did not name is
        // idle. Plan again at once: the new plan leaves out what is locked or in use now (a
        // release asked for by a failed `try_lock` wakes the wait) and names another victim,
        // or none; only then does the add wait, or overflow. Each such round needs another call
        // to have taken a victim since the plan, and a strict add keeps to its deadline.
        let replan = !cache.mutant(Mutant::SKIPPED_ROUND_WAITS);
        let overflows = cache.config.policy() == CapacityPolicy::Overflow;
        if replan && (overflows || !self.expired()) {
            return Ok(Next::Replan);
        }
        // An add that overflows anyway never waits for them: it overflows once nothing else
        // is evictable (SPEC 2.7).
        if overflows {
            let (registered, loading) = others();
            return Ok(Next::Admitted(cache.overflow(id, registered, loading, self.claimed.take())));
        }
        // The deadline bounds this path too (SPEC 2.12).
        if !cache.mutant(Mutant::DEADLINE_ONLY_WHEN_FULL) && self.expired() {
            let (registered, loading) = others();
            return Err(cache.exhausted(id, registered, loading, self.wait));
        }
        // Victims pinned only below are left out of the next plan: re-plan at once.
        Ok(if self.pinned_below.is_empty() { Next::Wait { behind } } else { Next::Replan })
    }

    fn expired(&self) -> bool {
        self.deadline.is_some_and(|d| self.cache.inner.runtime().now() >= d)
    }
}

// Historical bugs: the bodies of the switches above (see `crate::mutants`).
impl<M: Manager> FixedSizeCache<M> {
    /// M-P1 (`size-before-queue`): the cache asks the new model its size (user code, which may
    /// panic) before queueing it, by hand, with no settle guard left to queue it on the way out.
    fn size_before_queue<'a>(
        &'a self,
        id: &'a ModelId,
        admission: CapacityClaim<'a, M>,
        settle: Settle<'a, M>,
        register: impl FnOnce() -> Result<Added, ManagerError>,
    ) -> Result<Added, ManagerError> {
        drop(settle);
        let added = register()?;
        let bytes = self.size_of(id);
        admission.commit(id);
        self.book.with(|b| b.set_size(id, bytes));
        Ok(added)
    }
}
