//! Model slots and leases: how inference keeps a model in use, and how `remove` waits for it.
//!
//! A lease is taken without any lifecycle lock. Each registered model has a slot with a small
//! use-state monitor (`leases`, `closing`). `remove` closes the slot before it waits for the
//! leases to drain, and a closed slot refuses new leases, so no lease can ever observe a model
//! that is being or has been unloaded. An eviction closes without waiting: only a slot with no
//! live lease closes, and a lease that loses the race to that close finds the model gone
//! (`NotFound`), never `Removing`.

use std::fmt;
use std::ops::Deref;
use std::time::Duration;

use crate::error::ManagerError;
use crate::id::ModelId;
use crate::mutants::Mutant;
use crate::runtime::{Arc, Monitor, Runtime, Signal, StdRuntime};

struct UseState {
    leases: usize,
    closing: Option<Closing>,
}

/// Why a slot refuses new leases.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Closing {
    /// `remove` drains the live leases: new ones get `Removing`.
    Draining,
    /// An eviction closed an idle slot: new leases find the model gone (`NotFound`).
    Evicting,
}

/// A registered model and its use state.
pub(crate) struct Slot<M, R: Runtime> {
    pub(crate) id: ModelId,
    pub(crate) model: M,
    state: R::Monitor<UseState>,
    /// The stack's change signal: the end of the last lease may make room for a waiting add.
    changes: Arc<Signal<R>>,
}

impl<M: Send + Sync + 'static, R: Runtime> Slot<M, R> {
    pub(crate) fn new(id: ModelId, model: M, changes: &Arc<Signal<R>>) -> Self {
        let state = changes.runtime().monitor(UseState { leases: 0, closing: None });
        Self { id, model, state, changes: Arc::clone(changes) }
    }

    pub(crate) fn lease(self: &Arc<Self>) -> Result<Lease<M, R>, ManagerError> {
        self.state.with(|s| {
            match s.closing {
                Some(Closing::Draining) => return Err(ManagerError::Removing { id: self.id.clone() }),
                Some(Closing::Evicting) => return Err(ManagerError::NotFound { id: self.id.clone() }),
                None => {}
            }
            s.leases += 1;
            Ok(())
        })?;
        Ok(Lease { slot: Arc::clone(self) })
    }

    /// Live leases right now (a hint).
    pub(crate) fn leases(&self) -> usize {
        self.state.with(|s| s.leases)
    }

    /// Refuses new leases and waits for the live ones to end. On timeout the slot is open again
    /// and the error says how many leases were still alive.
    pub(crate) fn close(&self, timeout: Duration) -> Result<Closed<'_, M, R>, ManagerError> {
        self.state.with(|s| s.closing = Some(Closing::Draining));
        let closed = Closed { slot: self, committed: false };
        match self.state.wait_until(Some(timeout), |s| (s.leases == 0).then_some(())) {
            Ok(()) => Ok(closed),
            Err(_) => Err(ManagerError::Busy { id: self.id.clone(), leases: self.leases(), waited: timeout }),
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

    fn reopen(&self) {
        self.state.with(|s| s.closing = None);
    }
}

/// A closed slot; reopens on drop unless [`Closed::commit`] made the closure final.
pub(crate) struct Closed<'a, M: Send + Sync + 'static, R: Runtime> {
    slot: &'a Slot<M, R>,
    committed: bool,
}

impl<M: Send + Sync + 'static, R: Runtime> Closed<'_, M, R> {
    /// The model was unloaded: the slot stays closed for good.
    pub(crate) fn commit(mut self) {
        self.committed = true;
    }
}

impl<M: Send + Sync + 'static, R: Runtime> Drop for Closed<'_, M, R> {
    fn drop(&mut self) {
        if !self.committed {
            self.slot.reopen();
        }
    }
}

/// A handle to a registered model for inference.
///
/// While any lease lives the model is *in use*: `remove` waits (bounded) for it to end before
/// unloading, and eviction skips the model. Dereferences to the model.
pub struct Lease<M: Send + Sync + 'static, R: Runtime = StdRuntime> {
    slot: Arc<Slot<M, R>>,
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
