//! Model slots and leases: how inference keeps a model in use, and how `remove` waits for it.
//!
//! A lease is taken without any lifecycle lock. Each registered model has a slot with a small
//! use-state monitor (`leases`, `closing`). `remove` closes the slot before it waits for the
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

use crate::error::ManagerError;
use crate::id::ModelId;
use crate::mutants::Mutant;
use crate::runtime::{Arc, Monitor, Runtime, Signal, SlotStep, StdRuntime};
use crate::telemetry;

struct UseState {
    leases: usize,
    closing: Option<Closing>,
    /// Live [`Designation`]s of the slot: its last lease closes it for their eviction.
    designated: usize,
}

/// The key a slot's steps are observed under: its use state's address, unique among live
/// slots.
fn key<T>(state: &Arc<T>) -> usize {
    Arc::as_ptr(state).addr()
}

/// Why a slot refuses new leases.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Closing {
    /// `remove` drains the live leases: new ones get `Removing`.
    Draining,
    /// An eviction closed an idle slot and is unloading: new leases wait for its outcome.
    Evicting,
    /// A waiter for capacity designated the slot and its last lease ended: closed for that
    /// eviction, new leases wait for its outcome as for `Evicting` (the slot reopens if the
    /// designation goes first).
    Designated,
    /// The eviction unloaded the model: new leases find it gone (`NotFound`).
    Evicted,
    /// A replace switched the registry to a new version: new leases look the id up again.
    Replaced,
    /// An in-place replace drains the slot to unload it: new leases look the id up again, and
    /// wait there for the swap to settle.
    Swapping,
}

// ---- The slot -----------------------------------------------------------------------------------

/// A registered model and its use state.
pub(crate) struct ModelSlot<M, R: Runtime> {
    pub(crate) id: ModelId,
    pub(crate) model: M,
    state: Arc<R::Monitor<UseState>>,
    /// The stack's change signal: the end of the last lease may make room for a waiting add.
    changes: Arc<Signal<R>>,
}

impl<M: Send + Sync + 'static, R: Runtime> ModelSlot<M, R> {
    pub(crate) fn new(id: ModelId, model: M, changes: &Arc<Signal<R>>) -> Self {
        let rt = changes.runtime();
        let state = Arc::new(rt.monitor(UseState { leases: 0, closing: None, designated: 0 }));
        // Not shared yet: no monitor needed to be in order.
        rt.observe(key(&state), SlotStep::Created);
        Self { id, model, state, changes: Arc::clone(changes) }
    }

    /// Tells the runtime of `step` (under the use-state monitor, see [`Runtime::observe`]).
    fn observe(&self, step: SlotStep) {
        self.changes.runtime().observe(key(&self.state), step);
    }

    /// A lease; while an eviction is unloading the model, waits at most `timeout()` (asked
    /// only then: the uncontended path reads no clock) for its outcome (`LockTimeout` if it
    /// does not come). `Ok(None)`: a replace switched the registry away from this version
    /// after the caller looked it up; the registry holds the new one.
    pub(crate) fn lease(
        self: &Arc<Self>,
        timeout: impl FnOnce() -> Duration,
    ) -> Result<Option<Lease<M, R>>, ManagerError> {
        let refuse = self.changes.runtime().mutant(Mutant::EVICTION_REFUSES_LEASE);
        let replaced_gone = self.changes.runtime().mutant(Mutant::REPLACED_LEASE_NOT_FOUND);
        let take = |s: &mut UseState| match s.closing {
            None => {
                s.leases += 1;
                self.observe(SlotStep::Leased);
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
        let taken = match self.state.with(take) {
            Some(taken) => taken,
            None => {
                let timeout = timeout();
                let rt = self.changes.runtime();
                let started = rt.now();
                let taken = self.state.wait_until(Some(timeout), take);
                // The lease exists before the wait is reported: a panicking recorder (user
                // code) drops it, which releases the count it took.
                let report_first = rt.mutant(Mutant::REPORT_BEFORE_HANDLE);
                if report_first {
                    telemetry::lease_waited(rt.now().saturating_sub(started));
                }
                let leased = match taken {
                    Ok(taken) => taken.map(|leased| leased.then(|| Lease { slot: Arc::clone(self) })),
                    Err(_) => Err(ManagerError::LockTimeout { id: self.id.clone(), waited: timeout }),
                };
                if !report_first {
                    telemetry::lease_waited(rt.now().saturating_sub(started));
                }
                return leased.map_err(|error| match error {
                    ManagerError::LockTimeout { .. } => telemetry::lease_refused(error),
                    error => error,
                });
            }
        };
        taken.map(|leased| leased.then(|| Lease { slot: Arc::clone(self) }))
    }

    /// Switched out by a replace: refuses new leases (they look the id up again) and waits at
    /// most `timeout` for the live ones to end; `Err` with how many are left if they do not.
    pub(crate) fn retire(&self, timeout: Duration) -> Result<(), usize> {
        self.close_with(Closing::Replaced);
        if self.changes.runtime().mutant(Mutant::REPLACE_SKIPS_DRAIN) {
            return Ok(());
        }
        self.state.wait_until(Some(timeout), |s| (s.leases == 0).then_some(())).map_err(|_| self.leases())
    }

    /// Live leases right now (a hint).
    pub(crate) fn leases(&self) -> usize {
        self.state.with(|s| s.leases)
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
        match self.state.wait_until(Some(timeout), |s| (s.leases == 0).then_some(())) {
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
        let was_designated = self.state.with(|s| {
            self.observe(SlotStep::Closed);
            s.closing.replace(closing) == Some(Closing::Designated)
        });
        if was_designated && !self.changes.runtime().mutant(Mutant::LOST_WAKEUP_DESIGNATED_RECLOSED) {
            self.state.notify_all();
        }
    }

    /// Closes the slot only if no lease is live right now (never waits): the point of no return
    /// of an eviction. `None` if the model is in use.
    pub(crate) fn try_close(&self) -> Option<Closed<'_, M, R>> {
        let closed = self.state.with(|s| {
            // A slot its designation closed is idle and waits for exactly this eviction.
            let idle = s.leases == 0 && matches!(s.closing, None | Some(Closing::Designated));
            if idle {
                s.closing = Some(Closing::Evicting);
                self.observe(SlotStep::Closed);
            }
            idle
        });
        closed.then_some(Closed { slot: self, committed: false })
    }

    /// Designates the slot as a waiting add's victim: closed for its eviction at once if idle,
    /// else by its last lease's release (see the module docs). Takes only the slot's leaf
    /// monitor and keeps no reference to the model.
    pub(crate) fn designate(&self) -> Designation<R> {
        let rt = self.changes.runtime();
        let close_now = !rt.mutant(Mutant::CAPACITY_WAITER_LOSES_RACE);
        self.state.with(|s| {
            s.designated += 1;
            let idle = s.leases == 0 && s.closing.is_none();
            self.observe(SlotStep::Designated { idle });
            if close_now && idle {
                s.closing = Some(Closing::Designated);
            }
        });
        Designation { state: Arc::clone(&self.state), runtime: rt.clone() }
    }

    /// Ends a close: reopened (`None`), or for good (`Some`); wakes the leases waiting for an
    /// eviction's outcome.
    fn settle(&self, closing: Option<Closing>) {
        let waited = self.state.with(|s| {
            let evicting = matches!(s.closing, Some(Closing::Evicting | Closing::Designated));
            s.closing = closing;
            evicting
        });
        if waited && !self.changes.runtime().mutant(Mutant::LOST_WAKEUP_EVICTION_SETTLED) {
            self.state.notify_all();
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
        let evicting = self.slot.state.with(|s| s.closing == Some(Closing::Evicting));
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
        &self.slot.model
    }
}

impl<M: Send + Sync + 'static, R: Runtime> Drop for Lease<M, R> {
    fn drop(&mut self) {
        let slot = &self.slot;
        // The last lease of a designated victim closes it for the waiting add in this step: a
        // lease that starts after it cannot take the victim back before the add runs.
        let hand_over = !slot.changes.runtime().mutant(Mutant::CAPACITY_WAITER_LOSES_RACE);
        let (idle, draining) = slot.state.with(|s| {
            s.leases -= 1;
            let idle = s.leases == 0;
            let draining = idle && s.closing.is_some();
            if idle && s.designated > 0 && s.closing.is_none() {
                slot.observe(SlotStep::IdleWhileDesignated);
                if hand_over {
                    s.closing = Some(Closing::Designated);
                }
            }
            (idle, draining)
        });
        if draining && !slot.changes.runtime().mutant(Mutant::LOST_WAKEUP_LEASE_DRAIN) {
            slot.state.notify_all();
        }
        if idle {
            slot.changes.bump_at(Mutant::LOST_WAKEUP_LEASE_END);
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
    state: Arc<R::Monitor<UseState>>,
    runtime: R,
}

impl<R: Runtime> Drop for Designation<R> {
    fn drop(&mut self) {
        let reopened = self.state.with(|s| {
            s.designated -= 1;
            self.runtime.observe(key(&self.state), SlotStep::Undesignated);
            let reopen = s.designated == 0 && s.closing == Some(Closing::Designated);
            if reopen {
                s.closing = None;
            }
            reopen
        });
        if reopened && !self.runtime.mutant(Mutant::LOST_WAKEUP_DESIGNATION_DROPPED) {
            self.state.notify_all();
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
