//! Graceful shutdown of a manager stack (SPEC 1.13): what [`Manager::shutdown`] does, and the
//! [`ShutdownReport`] it returns.

use super::contract::Manager;
use crate::deadline::CallOptions;
use crate::error::ManagerError;
use crate::id::ModelId;

/// What a [`Manager::shutdown`] did, id by id.
#[derive(Debug, Clone, Default)]
#[non_exhaustive]
pub struct ShutdownReport {
    /// Unloaded and unregistered, in id order.
    pub unloaded: Vec<ModelId>,
    /// Still registered, with why: an unload that failed (`Unload`), leases that outlived the
    /// deadline (`Busy`), a lifecycle lock not had in time (`LockTimeout`). They refuse new
    /// leases; a later shutdown tries them again.
    pub failed: Vec<(ModelId, ManagerError)>,
}

impl ShutdownReport {
    /// Whether every model was unloaded.
    pub fn is_complete(&self) -> bool {
        self.failed.is_empty()
    }
}

/// Shuts `manager` down: refuse from now on, then settle every id that was registered or had
/// a caller in its lifecycle, each under its lifecycle lock, through every layer.
pub(super) fn shut_down<M: Manager + ?Sized>(manager: &M, options: CallOptions) -> ShutdownReport {
    let deadline = options.deadline(manager.runtime());
    let mut report = ShutdownReport::default();
    for id in manager.begin_shutdown() {
        // An id that is not registered goes through the removal too: a layer's stale entry of
        // it (one a reconcile left to this lock's holder) is settled there.
        let settled =
            manager.lock_until(&id, deadline).and_then(|guard| match manager.remove_locked(&guard) {
                Ok(()) => Ok(true),
                Err(ManagerError::NotFound { .. }) => Ok(false),
                Err(error) => Err(error),
            });
        match settled {
            Ok(true) => report.unloaded.push(id),
            Ok(false) => {}
            Err(error) => {
                tracing::warn!(%id, %error, "shutdown: still registered");
                report.failed.push((id, error));
            }
        }
    }
    tracing::info!(unloaded = report.unloaded.len(), failed = report.failed.len(), "shut down");
    report
}
