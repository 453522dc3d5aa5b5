//! The [`Manager`] trait — what the base [`ModelManager`](crate::ModelManager) and every
//! decorator ([`crate::layer`]) implement: the lifecycle lock, the `*_locked` steps taken under
//! it, the lease, the hints, the ids and the first step of a shutdown. What a user calls —
//! `add_model`, `remove`, `pin`, `clear`, `shutdown`, ... — is
//! [`ManagerExt`](super::ManagerExt), one lock plus one of these steps each, for every stack.
//!
//! # Hint methods run under a layer's bookkeeping lock
//! [`Manager::contains`], [`Manager::in_use`], [`Manager::is_locked`] and
//! [`Manager::is_pinned`] are what a layer's bookkeeping consults while it holds its own
//! monitor (`FixedSizeCache` plans its victims there). An implementation — a custom
//! decorator's included — must answer at once from its own state or by forwarding: it must not
//! block, wait for a lifecycle lock, call back into an outer layer, or run user code (loaders,
//! unloads, a model's methods). Every other method is called with no layer monitor held.

use super::{Added, Designation, Eviction, Lease, LifecycleGuard, Model, Replaced, Snapshot};
use crate::deadline::Deadline;
use crate::error::{ManagerError, RegisterError};
use crate::id::ModelId;
use crate::runtime::Runtime;

/// Splits `(id, alias)` into the canonical id and the resolved id.
pub(crate) fn resolve(id: &str, alias: Option<&str>) -> Result<(ModelId, ModelId), ManagerError> {
    let canonical = ModelId::new(id)?;
    let resolved = match alias {
        Some(alias) => ModelId::new(alias)?,
        None => canonical.clone(),
    };
    Ok((canonical, resolved))
}

// ---- The trait ----------------------------------------------------------------------------------

/// A model manager: the base [`ModelManager`](crate::ModelManager) or any stack of decorators
/// over it, as a layer sees it. Every method works on every stack; the calls users make are
/// [`ManagerExt`](super::ManagerExt)'s. It is dyn-compatible: `Box<dyn Manager<Model = M,
/// Runtime = R>>` is a stack too.
pub trait Manager: Send + Sync + 'static {
    /// The models it manages.
    type Model: Model;
    /// The runtime it runs on.
    type Runtime: Runtime;

    /// The runtime of the innermost base (decorators create their monitors on it).
    fn runtime(&self) -> &Self::Runtime;

    /// The stack's change signal, owned by the innermost base. It is bumped after every change
    /// that can make room for an add waiting in a layer: a model's last lease ends, a lifecycle
    /// lock is released (every registration, removal and queue change happens under one), a
    /// pin is lifted. A decorator forwards it, and bumps it after any such change of its own
    /// that happens outside a lifecycle lock.
    fn changes(&self) -> &crate::runtime::Signal<Self::Runtime>;

    /// Reserves and locks the lifecycle entry of the resolved id `id` in the innermost base,
    /// waiting at most the configured lock timeout, and no later than `deadline`
    /// (`LockTimeout` naming the bound it had). The guard carries `deadline`: every wait of
    /// the `*_locked` calls made under it is bounded by it too.
    ///
    /// The two methods that create a lifecycle entry, this one and [`Manager::try_lock`], take
    /// the id validated (the entry and its guard keep it); the lookups and
    /// [`ManagerExt::lock`](super::ManagerExt::lock) take a `&str`. A layer passes the id it
    /// holds down as it is: no layer validates or copies it again.
    fn lock_until(
        &self,
        id: &ModelId,
        deadline: Deadline,
    ) -> Result<LifecycleGuard<Self::Model, Self::Runtime>, ManagerError>;

    /// Like [`ManagerExt::lock`](super::ManagerExt::lock), but only if nobody holds the lock right
    /// now (never waits). A `None` for a held lock is noted as for [`Manager::is_locked`]: its
    /// release bumps the stack's change signal.
    fn try_lock(&self, id: &ModelId) -> Option<LifecycleGuard<Self::Model, Self::Runtime>>;

    /// [`ManagerExt::add_model`](super::ManagerExt::add_model) for a caller that already holds
    /// `guard` (the resolved id's lock).
    fn add_locked(
        &self,
        guard: &LifecycleGuard<Self::Model, Self::Runtime>,
        canonical: &ModelId,
    ) -> Result<Added, ManagerError>;

    /// [`ManagerExt::replace`](super::ManagerExt::replace) for a caller that already holds `guard`
    /// (the resolved id's lock).
    fn replace_locked(
        &self,
        guard: &LifecycleGuard<Self::Model, Self::Runtime>,
        canonical: &ModelId,
    ) -> Result<Replaced, ManagerError>;

    /// [`ManagerExt::replace_in_place`](super::ManagerExt::replace_in_place) for a caller that
    /// already holds `guard` (the resolved
    /// id's lock).
    fn replace_in_place_locked(
        &self,
        guard: &LifecycleGuard<Self::Model, Self::Runtime>,
        canonical: &ModelId,
    ) -> Result<Replaced, ManagerError>;

    /// [`ManagerExt::remove`](super::ManagerExt::remove) for a caller that already holds `guard`.
    fn remove_locked(&self, guard: &LifecycleGuard<Self::Model, Self::Runtime>) -> Result<(), ManagerError>;

    /// Evicts the model under `guard` if nothing protects it at the point of no return: no layer
    /// pins it and no lease is live (the base closes the model without waiting, so an eviction
    /// never refuses a lease on a model it then keeps, and a lease that loses the race gets
    /// `NotFound`). An unload error leaves the model registered and open again (leases that
    /// arrived during that failed unload got `NotFound`).
    fn evict_locked(
        &self,
        guard: &LifecycleGuard<Self::Model, Self::Runtime>,
    ) -> Result<Eviction, ManagerError>;

    /// [`ManagerExt::register`](super::ManagerExt::register) for a caller that already holds
    /// `guard` (the id's lock).
    fn register_locked(
        &self,
        guard: &LifecycleGuard<Self::Model, Self::Runtime>,
        model: Self::Model,
    ) -> Result<(), RegisterError<Self::Model>>;

    /// [`ManagerExt::pin`](super::ManagerExt::pin) for a caller that already holds `guard`: pins
    /// its id in every layer.
    fn pin_locked(&self, guard: &LifecycleGuard<Self::Model, Self::Runtime>) -> Result<(), ManagerError>;

    /// A lease on the model registered under the resolved id `id`, without any lifecycle lock.
    /// Its one wait (for the outcome of an eviction that is unloading the model) ends by
    /// `deadline` at the latest (`LockTimeout`).
    fn lease_until(
        &self,
        id: &str,
        deadline: Deadline,
    ) -> Result<Lease<Self::Model, Self::Runtime>, ManagerError>;

    /// [`Manager::lease_until`] for a look at the model that is no use of it: no layer counts
    /// it as one (an LRU order does not move), so a layer reads a size, or a server a model's
    /// metadata, without changing what is evicted next. The provided default is a lease; a
    /// layer whose leases count as uses must forward this to the layer below instead
    /// ([`Decorator`](crate::layer::Decorator) does).
    fn peek_until(
        &self,
        id: &str,
        deadline: Deadline,
    ) -> Result<Lease<Self::Model, Self::Runtime>, ManagerError> {
        self.lease_until(id, deadline)
    }

    /// Whether a model is registered under `id` (a hint: it may change at once). Called under
    /// a layer's bookkeeping lock (see the module docs): answer at once, never block.
    fn contains(&self, id: &str) -> bool;

    /// Whether the model registered under `id` has live leases (a hint). Called under a layer's
    /// bookkeeping lock (see the module docs): answer at once, never block.
    fn in_use(&self, id: &str) -> bool;

    /// Whether some caller holds the lifecycle lock of `id` right now (a hint). Called under a
    /// layer's bookkeeping lock (see the module docs): answer at once, never block. A layer
    /// asks it of the victims it may skip: the lock's release, when it answered `true`, bumps
    /// the stack's change signal even if its holder changed nothing (a warm add, whose release
    /// is otherwise quiet).
    fn is_locked(&self, id: &str) -> bool;

    /// Whether some layer of the stack pins `id` (a hint: it may change at once; the base pins
    /// nothing). Called under a layer's bookkeeping lock (see the module docs): answer at once,
    /// never block.
    fn is_pinned(&self, id: &str) -> bool;

    /// Designates the model registered under the resolved id `id` as the victim of an add
    /// waiting for capacity (SPEC 2.14): while the returned [`Designation`] lives, the model's
    /// last lease closes it for eviction in the same step as its count reaches zero. `None` if
    /// nothing is registered under `id`, or if this manager cannot designate (the provided
    /// default: such a stack is fair only as far as its waiters win their races). Called under
    /// a layer's bookkeeping lock (see the module docs): answer at once, never block, run no user
    /// code. Decorators forward it.
    fn designate(&self, id: &str) -> Option<Designation<Self::Runtime>> {
        let _ = id;
        None
    }

    /// The registered resolved ids, in order.
    fn ids(&self) -> Vec<ModelId>;

    /// Registry and lifecycle table of the innermost base.
    fn snapshot(&self) -> Snapshot;

    /// Whether the stack is shut down (a hint; once true, true for good). Called under a
    /// layer's bookkeeping lock (see the module docs): answer at once, never block.
    fn is_shut_down(&self) -> bool;

    /// How many times an id has stopped being registered in the innermost base so far, if it
    /// counts them: a layer that mirrors the registry (a cache's queue) looks for ids removed
    /// below it only when the count moved since it last looked. Each removal must be counted
    /// after it took effect (a caller that reads a count with acquire ordering and then asks
    /// [`Manager::contains`] sees every removal the count includes). `None` (the provided
    /// default): not counted, so such a layer looks every time. Answer at once, never block.
    /// Decorators forward it: a decorator that hides ids from [`Manager::contains`] or
    /// [`Manager::ids`] (answers differently from the stack below) must count its own hidings
    /// into this too, or answer `None`.
    fn removals(&self) -> Option<u64> {
        None
    }

    /// How many pins were lifted at or below this layer so far, if it counts them: a layer
    /// that leaves out of its eviction plans the victims it found pinned below it looks at them
    /// again when the count moved (an unpin made through a layer below, which this layer's own
    /// bookkeeping never sees). Each unpin is counted after it took effect. `None` (the
    /// provided default): not counted, so such a layer looks at them again only when its own
    /// bookkeeping changes or an id is removed below (a pin lifted below goes unnoticed, and an
    /// add waiting for that victim may wait out its capacity wait). Answer at once, never
    /// block. Decorators forward it; a decorator that pins must add its own unpins.
    fn unpins(&self) -> Option<u64> {
        None
    }

    /// The first step of [`ManagerExt::shutdown`](super::ManagerExt::shutdown), in the innermost
    /// base: from now on adds and
    /// leases are refused with `ShutDown`, and the stack's waiters are woken so that they see
    /// it. Returns every id the shutdown must settle: the registered ones, and those with a
    /// caller in their lifecycle (an add that got past the check registers only under its
    /// lifecycle lock, which the shutdown then waits for). Idempotent.
    fn begin_shutdown(&self) -> Vec<ModelId>;

    /// [`ManagerExt::unpin`](super::ManagerExt::unpin) for a caller that already holds `guard`.
    fn unpin_locked(&self, guard: &LifecycleGuard<Self::Model, Self::Runtime>) -> Result<(), ManagerError>;
}
