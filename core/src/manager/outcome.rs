//! What the manager's calls return: how an add or a replace went, and a snapshot of its
//! bookkeeping.

use crate::error::ManagerError;
use crate::id::ModelId;

/// How a successful [`ManagerExt::add_model`](crate::ManagerExt::add_model) went.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Added {
    /// The model was already registered; nothing was loaded.
    Warm,
    /// The loader ran and the model is now registered.
    Loaded,
}

/// How a successful [`ManagerExt::replace`](crate::ManagerExt::replace) went.
#[derive(Debug, Clone)]
pub enum Replaced {
    /// Nothing was registered under the id: the new version was added.
    Added,
    /// The old version was switched out, its leases drained, and it was unloaded.
    Unloaded,
    /// The old version was switched out but not unloaded: its leases outlived the drain
    /// (`Busy`), or its unload failed (`Unload`). The new version serves either way; the old
    /// one is dropped without an unload: when its last lease ends (`Busy`), or at once
    /// (`Unload`: no lease was left).
    Detached(ManagerError),
}

/// One lifecycle entry, as seen by [`Manager::snapshot`](crate::Manager::snapshot).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LifecycleInfo {
    /// The resolved id.
    pub id: ModelId,
    /// The entry's generation number (a new entry for the same id gets a larger one).
    pub generation: u64,
    /// Callers that reserved this generation and have not finished with it.
    pub reservations: usize,
    /// Whether some caller holds the lifecycle lock right now.
    pub locked: bool,
}

/// A consistent view of the manager's bookkeeping, for diagnostics and invariant checks.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Snapshot {
    /// Registered resolved ids, in order.
    pub registered: Vec<ModelId>,
    /// Live lifecycle entries, in id order.
    pub lifecycle: Vec<LifecycleInfo>,
}

/// What [`Manager::evict_locked`](crate::Manager::evict_locked) did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Eviction {
    /// Unloaded and unregistered.
    Evicted,
    /// Skipped: some layer pins the id.
    Pinned,
    /// Skipped: a lease was live at the point of no return.
    InUse,
    /// Skipped: nothing is registered under the id.
    NotRegistered,
}
