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

use std::fmt;
use std::ops::Deref;
use std::time::Duration;

use crate::error::ManagerError;
use crate::id::ModelId;
use crate::mutants::Mutant;
use crate::runtime::{Arc, Monitor, Runtime, Signal, StdRuntime};
use crate::telemetry;

struct UseState {
    leases: usize,
    closing: Option<Closing>,
}

/// Why a slot refuses new leases.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Closing {
    /// `remove` drains the live leases: new ones get `Removing`.
    Draining,
    /// An eviction closed an idle slot and is unloading: new leases wait for its outcome.
    Evicting,
    /// The eviction unloaded the model: new leases find it gone (`NotFound`).
    Evicted,
    /// A replace switched the registry to a new version: new leases look the id up again.
    Replaced,
    /// An in-place replace drains the slot to unload it: new leases look the id up again, and
    /// wait there for the swap to settle.
    Swapping,
}

/// A registered model and its use state.
pub(crate) struct ModelSlot<M, R: Runtime> {
    pub(crate) id: ModelId,
    pub(crate) model: M,
    state: R::Monitor<UseState>,
    /// The stack's change signal: the end of the last lease may make room for a waiting add.
    changes: Arc<Signal<R>>,
}

impl<M: Send + Sync + 'static, R: Runtime> ModelSlot<M, R> {
    pub(crate) fn new(id: ModelId, model: M, changes: &Arc<Signal<R>>) -> Self {
        let state = changes.runtime().monitor(UseState { leases: 0, closing: None });
        Self { id, model, state, changes: Arc::clone(changes) }
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
                Some(Ok(true))
            }
            Some(Closing::Draining) => Some(Err(ManagerError::Removing { id: self.id.clone() })),
            Some(Closing::Evicted) => Some(Err(ManagerError::NotFound { id: self.id.clone() })),
            Some(Closing::Evicting) if refuse => Some(Err(ManagerError::NotFound { id: self.id.clone() })),
            Some(Closing::Evicting) => None,
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
        self.state.with(|s| s.closing = Some(Closing::Replaced));
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
            self.state.with(|s| s.closing = Some(Closing::Swapping));
            return Ok(Closed { slot: self, committed: false });
        }
        self.close_as(Closing::Swapping, timeout)
    }

    fn close_as(&self, closing: Closing, timeout: Duration) -> Result<Closed<'_, M, R>, ManagerError> {
        self.state.with(|s| s.closing = Some(closing));
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

    /// Closes the slot only if no lease is live right now (never waits): the point of no return
    /// of an eviction. `None` if the model is in use.
    pub(crate) fn try_close(&self) -> Option<Closed<'_, M, R>> {
        let closed = self.state.with(|s| {
            let idle = s.leases == 0 && s.closing.is_none();
            if idle {
                s.closing = Some(Closing::Evicting);
            }
            idle
        });
        closed.then_some(Closed { slot: self, committed: false })
    }

    /// Ends a close: reopened (`None`), or for good (`Some`); wakes the leases waiting for an
    /// eviction's outcome.
    fn settle(&self, closing: Option<Closing>) {
        let waited = self.state.with(|s| {
            let evicting = s.closing == Some(Closing::Evicting);
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
        let (idle, draining) = self.slot.state.with(|s| {
            s.leases -= 1;
            (s.leases == 0, s.leases == 0 && s.closing.is_some())
        });
        let slot = &self.slot;
        if draining && !slot.changes.runtime().mutant(Mutant::LOST_WAKEUP_LEASE_DRAIN) {
            slot.state.notify_all();
        }
        if idle {
            slot.changes.bump_at(Mutant::LOST_WAKEUP_LEASE_END);
        }
    }
}

impl<M: Send + Sync + 'static, R: Runtime> fmt::Debug for Lease<M, R> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Lease").field("id", &self.slot.id).finish_non_exhaustive()
    }
}
