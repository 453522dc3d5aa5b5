//! Model slots and leases: how inference keeps a model in use, and how `remove` waits for it.
//!
//! A lease is taken without any lifecycle lock or monitor. Each registered model has a slot
//! whose use state (`leases`, `closing`, designations) is one atomic word
//! ([`use_word`](super::use_word)): a lease and a close are each one compare-exchange on it, so
//! they never both win. `remove` closes the slot before it waits for the
//! leases to drain, and a closed slot refuses new leases, so no lease can ever observe a model
//! that is being or has been unloaded. An eviction closes without waiting: only a slot with no
//! live lease closes. A lease that loses the race to that close waits (bounded) for the
//! eviction's outcome: if the unload succeeds the model is gone (`NotFound`); if it fails the
//! model stays, and so does the lease — an eviction never refuses a lease on a model it keeps.
//! A replace switches the registry to the new version first and then retires the old slot: a
//! lease that looked the old one up and finds it retired looks the id up again, so it gets the
//! new version, never `NotFound`. An in-place replace closes the slot as swapping: a lease that
//! finds it so looks the id up again, and waits there for the swap to settle (`swap`).
//!
//! # Designated victims (SPEC 2.14)
//! A cold add that waits for capacity while every victim is in use must not lose each lease's
//! end to a lease that starts before it runs again (a stream of leases starves it). So it
//! *designates* its victim ([`Designation`]): the victim's last lease closes the slot for
//! eviction in the same step as its count reaches zero, and a lease that starts after that close
//! waits for the eviction's outcome exactly as it would after an eviction's own close (`NotFound`
//! if the model goes, the lease if it stays). Leases that started before the close finish
//! normally, and nothing waits for them: what changes is only *when* the close happens. If the
//! waiter lets go of the designation before it evicts (served otherwise, out of time, the
//! victim pinned), a closed slot reopens and the leases waiting on it go ahead.

use std::fmt;
use std::ops::Deref;
use std::time::Duration;

use super::use_word::{Closing, UseCell, UseState};
use crate::error::ManagerError;
use crate::id::ModelId;
use crate::mutants::Mutant;
use crate::runtime::{Arc, Runtime, Signal, SlotStep, StdRuntime, TimedOut};
use crate::telemetry;

/// The key a slot's steps are observed under: its use cell's address, unique among live
/// slots.
fn key<T>(state: &Arc<T>) -> usize {
    Arc::as_ptr(state).addr()
}

/// How a lease's wait for an eviction's outcome ended.
struct EvictionWait {
    /// Whether the lease was taken (`Ok(false)`: the id's registry entry moved on).
    taken: Result<Result<bool, ManagerError>, TimedOut>,
    /// When the wait started, on the runtime's clock.
    started: Duration,
    /// Its bound.
    timeout: Duration,
}

// ---- The slot -----------------------------------------------------------------------------------

/// A registered model and its use state.
pub(crate) struct ModelSlot<M, R: Runtime> {
    pub(crate) id: ModelId,
    /// Taken only by the slot's `Drop`.
    model: Option<M>,
    state: Arc<UseCell<R>>,
    /// The stack's change signal: the end of the last lease may make room for a waiting add.
    changes: Arc<Signal<R>>,
}

impl<M: Send + Sync + 'static, R: Runtime> ModelSlot<M, R> {
    pub(crate) fn new(id: ModelId, model: M, changes: &Arc<Signal<R>>) -> Self {
        let rt = changes.runtime();
        let state = Arc::new(UseCell::new(rt));
        // Not shared yet: nothing to order it with.
        rt.observe(key(&state), SlotStep::Created);
        Self { id, model: Some(model), state, changes: Arc::clone(changes) }
    }

    /// The model.
    pub(crate) fn model(&self) -> &M {
        self.model.as_ref().expect("a slot holds its model until dropped")
    }

    /// Tells the runtime of `step`, right after the change of the word it observes (no
    /// scheduling point between them: the checkers see both as one step, see
    /// [`Runtime::observe`]).
    fn observe(&self, step: SlotStep) {
        self.changes.runtime().observe(key(&self.state), step);
    }

    /// A lease; while an eviction is unloading the model, waits at most `timeout()` (asked
    /// only then: the uncontended path reads no clock) for its outcome (`LockTimeout` if it
    /// does not come). `Ok(None)`: a replace switched the registry away from this version
    /// after the caller looked it up; the registry holds the new one. It takes the reference
    /// the lookup cloned, which the lease keeps: no second clone, and no drop of the first.
    pub(crate) fn lease(
        self: Arc<Self>,
        timeout: impl FnOnce() -> Duration,
    ) -> Result<Option<Lease<M, R>>, ManagerError> {
        let rt = self.changes.runtime();
        let refuse = rt.mutant(Mutant::EVICTION_REFUSES_LEASE);
        let replaced_gone = rt.mutant(Mutant::REPLACED_LEASE_NOT_FOUND);
        let take = |s: &mut UseState| match s.closing {
            None => {
                s.leases += 1;
                Some(Ok(true))
            }
            Some(Closing::Draining) => Some(Err(ManagerError::Removing { id: self.id.clone() })),
            Some(Closing::Evicted) => Some(Err(ManagerError::NotFound { id: self.id.clone() })),
            Some(Closing::Evicting | Closing::Designated) if refuse => {
                Some(Err(ManagerError::NotFound { id: self.id.clone() }))
            }
            Some(Closing::Evicting | Closing::Designated) => None,
            Some(Closing::Replaced) if replaced_gone => {
                Some(Err(ManagerError::NotFound { id: self.id.clone() }))
            }
            Some(Closing::Replaced | Closing::Swapping) => Some(Ok(false)),
        };
        // Observed in the step that counted the lease.
        let observe = |taken: &Result<bool, ManagerError>| {
            if matches!(taken, Ok(true)) {
                self.observe(SlotStep::Leased);
            }
        };
        if rt.mutant(Mutant::LEASE_COUNTS_BEFORE_CHECK) && self.state.count_blindly().closing.is_none() {
            return Ok(Some(Lease { slot: self }));
        }
        let counted = self.state.count_if_open();
        let taken = match counted {
            Ok(()) => Some(Ok(true)),
            Err(word) => self.state.update_from(word, take).0,
        };
        match taken {
            Some(taken) => {
                observe(&taken);
                taken.map(|leased| leased.then(|| Lease { slot: self }))
            }
            None => {
                let waited = self.wait_for_eviction(timeout(), take, observe);
                self.lease_after_eviction(waited)
            }
        }
    }

    /// A lease that found the slot closed by an eviction: waits at most `timeout` for its
    /// outcome, deciding as `take` says; what [`ModelSlot::lease_after_eviction`] takes.
    fn wait_for_eviction(
        &self,
        timeout: Duration,
        take: impl FnMut(&mut UseState) -> Option<Result<bool, ManagerError>>,
        observe: impl FnMut(&Result<bool, ManagerError>),
    ) -> EvictionWait {
        let started = self.changes.runtime().now();
        let taken = self.state.wait_until(Some(timeout), take, observe);
        EvictionWait { taken, started, timeout }
    }

    /// The lease a wait for an eviction's outcome ended in, the wait reported. A slot not
    /// leased is dropped before the reports: the eviction may have taken the model out, and
    /// this reference be its last (its `Drop` is user code, and must not run in the unwind of a
    /// panicking recorder).
    fn lease_after_eviction(
        self: Arc<Self>,
        waited: EvictionWait,
    ) -> Result<Option<Lease<M, R>>, ManagerError> {
        let EvictionWait { taken, started, timeout } = waited;
        let rt = self.changes.runtime();
        let elapsed = rt.now().saturating_sub(started);
        // The lease exists before the wait is reported: a panicking recorder (user code)
        // drops it, which releases the count it took.
        let report_first = rt.mutant(Mutant::REPORT_BEFORE_HANDLE);
        if report_first {
            telemetry::lease_waited(elapsed);
        }
        let holding = rt.mutant(Mutant::LEASE_WAIT_REPORTED_HOLDING);
        let (leased, unleased) = match taken {
            Ok(Ok(true)) => (Ok(Some(Lease { slot: self })), None),
            Ok(taken) => (taken.map(|_| None), Some(self)),
            Err(_) => (Err(ManagerError::LockTimeout { id: self.id.clone(), waited: timeout }), Some(self)),
        };
        if holding {
            telemetry::lease_waited(elapsed);
        }
        telemetry::after_dropping::<R, _>(unleased, || {
            if !report_first && !holding {
                telemetry::lease_waited(elapsed);
            }
        });
        leased.map_err(|error| match error {
            ManagerError::LockTimeout { .. } => telemetry::lease_refused(error),
            error => error,
        })
    }

    /// Switched out by a replace: refuses new leases (they look the id up again) and waits at
    /// most `timeout` for the live ones to end; `Err` with how many are left if they do not.
    pub(crate) fn retire(&self, timeout: Duration) -> Result<(), usize> {
        self.close_with(Closing::Replaced);
        if self.changes.runtime().mutant(Mutant::REPLACE_SKIPS_DRAIN) {
            return Ok(());
        }
        let drained = |s: &mut UseState| (s.leases == 0).then_some(());
        self.state.wait_until(Some(timeout), drained, |_| ()).map_err(|_| self.leases())
    }

    /// Live leases right now (a hint).
    pub(crate) fn leases(&self) -> usize {
        usize::try_from(self.state.get().leases).unwrap_or(usize::MAX)
    }

    /// Refuses new leases and waits for the live ones to end. On timeout the slot is open again
    /// and the error says how many leases were still alive.
    pub(crate) fn close(&self, timeout: Duration) -> Result<Closed<'_, M, R>, ManagerError> {
        self.close_as(Closing::Draining, timeout)
    }

    /// [`ModelSlot::close`] for an in-place replace: new leases look the id up again (where
    /// the table's swap makes them wait) instead of being refused.
    pub(crate) fn close_for_swap(&self, timeout: Duration) -> Result<Closed<'_, M, R>, ManagerError> {
        if self.changes.runtime().mutant(Mutant::SWAP_SKIPS_DRAIN) {
            self.close_with(Closing::Swapping);
            return Ok(Closed { slot: self, committed: false });
        }
        self.close_as(Closing::Swapping, timeout)
    }

    fn close_as(&self, closing: Closing, timeout: Duration) -> Result<Closed<'_, M, R>, ManagerError> {
        self.close_with(closing);
        let closed = Closed { slot: self, committed: false };
        match self.state.wait_until(Some(timeout), |s| (s.leases == 0).then_some(()), |_| ()) {
            Ok(()) => Ok(closed),
            Err(_) => Err(telemetry::refused(ManagerError::Busy {
                id: self.id.clone(),
                leases: self.leases(),
                waited: timeout,
            })),
        }
    }

    /// Closes the slot as `closing` (under the caller's lifecycle lock). A slot its designation
    /// had closed has leases waiting for that eviction's outcome, which will not come now: they
    /// are woken to find the new reason (`Removing`, or the id looked up again).
    fn close_with(&self, closing: Closing) {
        let ((), before) = self.state.update(|s| s.closing = Some(closing));
        self.observe(SlotStep::Closed);
        let was_designated = before.closing == Some(Closing::Designated);
        if was_designated && !self.changes.runtime().mutant(Mutant::LOST_WAKEUP_DESIGNATED_RECLOSED) {
            self.state.notify_all(self.changes.runtime());
        }
    }

    /// Closes the slot only if no lease is live right now (never waits): the point of no return
    /// of an eviction. `None` if the model is in use.
    pub(crate) fn try_close(&self) -> Option<Closed<'_, M, R>> {
        // A slot its designation closed is idle and waits for exactly this eviction.
        let idle = |s: &UseState| s.leases == 0 && matches!(s.closing, None | Some(Closing::Designated));
        if self.changes.runtime().mutant(Mutant::EVICTION_CLOSE_NOT_ATOMIC) {
            return self.close_by_overwrite(idle);
        }
        let (closed, _) = self.state.update(|s| {
            let closed = idle(s);
            if closed {
                s.closing = Some(Closing::Evicting);
            }
            closed
        });
        if closed {
            self.observe(SlotStep::Closed);
        }
        closed.then_some(Closed { slot: self, committed: false })
    }

    /// Designates the slot as a waiting add's victim: closed for its eviction at once if idle,
    /// else by its last lease's release (see the module docs). Takes only the slot's leaf
    /// monitor and keeps no reference to the model.
    pub(crate) fn designate(&self) -> Designation<R> {
        let rt = self.changes.runtime();
        let close_now = !rt.mutant(Mutant::CAPACITY_WAITER_LOSES_RACE);
        let ((), before) = self.state.update(|s| {
            let idle = s.leases == 0 && s.closing.is_none();
            s.designated += 1;
            if close_now && idle {
                s.closing = Some(Closing::Designated);
            }
        });
        self.observe(SlotStep::Designated { idle: before.leases == 0 && before.closing.is_none() });
        Designation { state: Arc::clone(&self.state), runtime: rt.clone() }
    }

    /// Ends a close: reopened (`None`), or for good (`Some`); wakes the leases waiting for an
    /// eviction's outcome.
    fn settle(&self, closing: Option<Closing>) {
        let ((), before) = self.state.update(|s| s.closing = closing);
        let waited = matches!(before.closing, Some(Closing::Evicting | Closing::Designated));
        if waited && !self.changes.runtime().mutant(Mutant::LOST_WAKEUP_EVICTION_SETTLED) {
            self.state.notify_all(self.changes.runtime());
        }
    }
}

/// A closed slot; reopens on drop unless [`Closed::commit`] made the closure final.
pub(crate) struct Closed<'a, M: Send + Sync + 'static, R: Runtime> {
    slot: &'a ModelSlot<M, R>,
    committed: bool,
}

impl<M: Send + Sync + 'static, R: Runtime> Closed<'_, M, R> {
    /// The model was unloaded: the slot stays closed for good.
    pub(crate) fn commit(mut self) {
        self.committed = true;
        let evicting = self.slot.state.get().closing == Some(Closing::Evicting);
        if evicting {
            self.slot.settle(Some(Closing::Evicted));
        }
    }
}

impl<M: Send + Sync + 'static, R: Runtime> Drop for Closed<'_, M, R> {
    fn drop(&mut self) {
        if !self.committed {
            self.slot.settle(None);
        }
    }
}

impl<M, R: Runtime> ModelSlot<M, R> {
    /// Whether a mutant drops the model plainly in an unwind. The historical bugs that drop a
    /// model there did so in a stack without the slot's guard: each switches it off too, so
    /// that its scenario still fails with it.
    fn unguarded(&self) -> bool {
        let rt = self.changes.runtime();
        [
            Mutant::SLOT_DROPPED_IN_UNWIND,
            Mutant::UNLOADED_REPORTED_FIRST,
            Mutant::REPLACED_REPORTED_FIRST,
            Mutant::LEASE_WAIT_REPORTED_HOLDING,
        ]
        .into_iter()
        .any(|m| rt.mutant(m))
    }
}

impl<M, R: Runtime> Drop for ModelSlot<M, R> {
    /// The last reference to a slot may go in an unwind: a lease let go by a panic (one that
    /// outlived its replace's drain, or ended as a removal unloaded the model), a replace whose
    /// old version's `unload` panicked. The model's `Drop` (user code) then runs under a catch,
    /// where a second panic would abort the process; it is discarded there, as the first
    /// panic goes on.
    fn drop(&mut self) {
        if R::panicking() && !self.unguarded() {
            let model = self.model.take();
            let _ = R::catch_unwind(move || drop(model));
        }
    }
}

// ---- The lease ---------------------------------------------------------------------------------

/// A handle to a registered model for inference.
///
/// While any lease lives the model is *in use*: `remove` waits (bounded) for it to end before
/// unloading, and eviction skips the model. Dereferences to the model.
pub struct Lease<M: Send + Sync + 'static, R: Runtime = StdRuntime> {
    slot: Arc<ModelSlot<M, R>>,
}

impl<M: Send + Sync + 'static, R: Runtime> Lease<M, R> {
    /// The resolved id the model is registered under.
    pub fn id(&self) -> &ModelId {
        &self.slot.id
    }
}

impl<M: Send + Sync + 'static, R: Runtime> Deref for Lease<M, R> {
    type Target = M;

    fn deref(&self) -> &M {
        self.slot.model()
    }
}

impl<M: Send + Sync + 'static, R: Runtime> Drop for Lease<M, R> {
    fn drop(&mut self) {
        let slot = &self.slot;
        // The last lease of a designated victim closes it for the waiting add in this step: a
        // lease that starts after it cannot take the victim back before the add runs.
        let hand_over = !slot.changes.runtime().mutant(Mutant::CAPACITY_WAITER_LOSES_RACE);
        let uncount = |s: &mut UseState| {
            s.leases = s.leases.saturating_sub(1);
            if hand_over && s.leases == 0 && s.designated > 0 && s.closing.is_none() {
                s.closing = Some(Closing::Designated);
            }
        };
        let before = slot
            .state
            .uncount_plainly(hand_over)
            .unwrap_or_else(|word| slot.state.update_from(word, uncount).1);
        if before.leases == 0 {
            slot.changes.runtime().defect("a lease ended on a slot that counted none");
        }
        let idle = before.leases == 1;
        if idle && before.designated > 0 && before.closing.is_none() {
            slot.observe(SlotStep::IdleWhileDesignated);
        }
        let draining = idle && before.closing.is_some();
        if draining && !slot.changes.runtime().mutant(Mutant::LOST_WAKEUP_LEASE_DRAIN) {
            slot.state.notify_all(slot.changes.runtime());
        }
        if idle {
            // Only an add or a resize waiting for room waits for this, and each watches.
            slot.changes.bump_if_watched_at(Mutant::LOST_WAKEUP_LEASE_END);
        }
    }
}

/// A waiting add's claim on its victim (SPEC 2.14): while it lives, the victim's last lease
/// closes it for eviction in the same step as its count reaches zero (or it is closed at once if
/// idle). Dropping it before the eviction reopens a slot it closed, and the leases waiting on
/// that slot go ahead. It holds no reference to the model, so it never keeps one alive.
///
/// Made by [`Manager::designate`](super::Manager::designate); [`FixedSizeCache`] designates the
/// least recently used victim that only leases keep, for the first add waiting for capacity.
///
/// [`FixedSizeCache`]: crate::FixedSizeCache
#[must_use = "a designation lasts only while it lives"]
pub struct Designation<R: Runtime = StdRuntime> {
    state: Arc<UseCell<R>>,
    runtime: R,
}

impl<R: Runtime> Drop for Designation<R> {
    fn drop(&mut self) {
        let (reopened, _) = self.state.update(|s| {
            s.designated = s.designated.saturating_sub(1);
            let reopen = s.designated == 0 && s.closing == Some(Closing::Designated);
            if reopen {
                s.closing = None;
            }
            reopen
        });
        self.runtime.observe(key(&self.state), SlotStep::Undesignated);
        if reopened && !self.runtime.mutant(Mutant::LOST_WAKEUP_DESIGNATION_DROPPED) {
            self.state.notify_all(&self.runtime);
        }
    }
}

impl<R: Runtime> fmt::Debug for Designation<R> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Designation").finish_non_exhaustive()
    }
}

impl<M: Send + Sync + 'static, R: Runtime> fmt::Debug for Lease<M, R> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Lease").field("id", &self.slot.id).finish_non_exhaustive()
    }
}

// Historical bugs: the bodies of the switches above (see `crate::mutants`).
impl<M: Send + Sync + 'static, R: Runtime> ModelSlot<M, R> {
    /// M-L3 (`eviction-close-not-atomic`): the close reads the word, then stores the closed
    /// state it computed over whatever the word holds by then (a lease counted in between is
    /// lost, and the eviction unloads the model under it).
    fn close_by_overwrite(&self, idle: impl Fn(&UseState) -> bool) -> Option<Closed<'_, M, R>> {
        let seen = self.state.get();
        idle(&seen).then(|| {
            self.state.overwrite(UseState { closing: Some(Closing::Evicting), ..seen });
            self.observe(SlotStep::Closed);
            Closed { slot: self, committed: false }
        })
    }
}
