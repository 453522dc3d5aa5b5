//! [`Decorator`]: write a layer by overriding only what it changes; every other method of the
//! [`Manager`] trait forwards to the layer below.

use crate::deadline::Deadline;
use crate::error::{ManagerError, RegisterError};
use crate::id::ModelId;
use crate::manager::{Added, Designation, Eviction, Lease, LifecycleGuard, Manager, Replaced, Snapshot};
use crate::runtime::Signal;

/// The models of the layer below `D`.
type ModelOf<D> = <<D as Decorator>::Inner as Manager>::Model;
/// The runtime of the layer below `D`.
type RuntimeOf<D> = <<D as Decorator>::Inner as Manager>::Runtime;
/// A lifecycle guard of the stack below `D`.
type GuardOf<D> = LifecycleGuard<ModelOf<D>, RuntimeOf<D>>;

// ---- The trait ----------------------------------------------------------------------------------

/// A layer over another [`Manager`] that overrides only what it changes: every method has a
/// default that forwards to [`Decorator::inner`], and every `Decorator` is a [`Manager`] (the
/// calls users make — [`ManagerExt`](crate::ManagerExt)'s `add_model`, `remove`, `pin`,
/// `clear`, `shutdown`, ... — go through the `*_locked` methods here, so an override of
/// `add_locked` sees every add, and no layer can answer a call around them).
///
/// Where both traits are in scope, a method they share needs its trait named
/// (`Manager::ids(&layer)`); implementing `Decorator` by its path keeps it out of scope.
///
/// The rules of the [`Manager`] trait hold for an override: the final decision of a mutation
/// is made under the [`LifecycleGuard`] it is given, and the hint methods (`contains`, `in_use`,
/// `is_locked`, `is_pinned`, `is_shut_down`) answer at once without blocking, as they run
/// under a layer's bookkeeping lock.
///
/// A layer that logs every cold load below it, composed under a
/// [`FixedSizeCache`](crate::FixedSizeCache):
///
/// ```
/// use resident::{
///     Added, BoxError, FixedSizeCache, FixedSizeConfig, LifecycleGuard, Loader, Manager,
///     ManagerError, ManagerExt, Model, ModelId, ModelManager,
/// };
/// # struct M; impl Model for M { fn size_bytes(&self) -> u64 { 1 } }
/// # struct L; impl Loader for L { type Model = M; fn load(&self, _: &ModelId) -> Result<M, BoxError> { Ok(M) } }
///
/// struct AuditLoads<M>(M);
///
/// // Implemented by its path: with `Decorator` out of scope, the methods it shares with
/// // `Manager` need no `Manager::` where the layer is used.
/// impl<M: Manager> resident::layer::Decorator for AuditLoads<M> {
///     type Inner = M;
///
///     fn inner(&self) -> &M {
///         &self.0
///     }
///
///     fn add_locked(
///         &self,
///         guard: &LifecycleGuard<M::Model, M::Runtime>,
///         canonical: &ModelId,
///     ) -> Result<Added, ManagerError> {
///         let added = self.0.add_locked(guard, canonical)?;
///         if added == Added::Loaded {
///             tracing::info!(id = %guard.id(), %canonical, "loaded");
///         }
///         Ok(added)
///     }
/// }
///
/// let cache = FixedSizeCache::new(AuditLoads(ModelManager::new(L)), FixedSizeConfig::new(1))?;
/// cache.add_model("a", None)?; // logged
/// cache.add_model("a", None)?; // warm: not logged
/// cache.add_model("b", None)?; // logged; evicts a through the audit layer
/// assert_eq!(cache.ids(), [ModelId::new("b")?]);
/// assert_eq!(cache.get_ref().ids(), cache.ids()); // the layer is a `Manager` too
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub trait Decorator: Send + Sync + 'static {
    /// The layer below.
    type Inner: Manager;

    /// The layer below.
    fn inner(&self) -> &Self::Inner;

    /// See [`Manager::lock_until`].
    fn lock_until(&self, id: &ModelId, deadline: Deadline) -> Result<GuardOf<Self>, ManagerError> {
        self.inner().lock_until(id, deadline)
    }

    /// See [`Manager::try_lock`].
    fn try_lock(&self, id: &ModelId) -> Option<GuardOf<Self>> {
        self.inner().try_lock(id)
    }

    /// See [`Manager::add_locked`].
    fn add_locked(&self, guard: &GuardOf<Self>, canonical: &ModelId) -> Result<Added, ManagerError> {
        self.inner().add_locked(guard, canonical)
    }

    /// See [`Manager::replace_locked`].
    fn replace_locked(&self, guard: &GuardOf<Self>, canonical: &ModelId) -> Result<Replaced, ManagerError> {
        self.inner().replace_locked(guard, canonical)
    }

    /// See [`Manager::replace_in_place_locked`].
    fn replace_in_place_locked(
        &self,
        guard: &GuardOf<Self>,
        canonical: &ModelId,
    ) -> Result<Replaced, ManagerError> {
        self.inner().replace_in_place_locked(guard, canonical)
    }

    /// See [`Manager::remove_locked`].
    fn remove_locked(&self, guard: &GuardOf<Self>) -> Result<(), ManagerError> {
        self.inner().remove_locked(guard)
    }

    /// See [`Manager::evict_locked`].
    fn evict_locked(&self, guard: &GuardOf<Self>) -> Result<Eviction, ManagerError> {
        self.inner().evict_locked(guard)
    }

    /// See [`Manager::register_locked`].
    fn register_locked(
        &self,
        guard: &GuardOf<Self>,
        model: ModelOf<Self>,
    ) -> Result<(), RegisterError<ModelOf<Self>>> {
        self.inner().register_locked(guard, model)
    }

    /// See [`Manager::pin_locked`].
    fn pin_locked(&self, guard: &GuardOf<Self>) -> Result<(), ManagerError> {
        self.inner().pin_locked(guard)
    }

    /// See [`Manager::unpin_locked`].
    fn unpin_locked(&self, guard: &GuardOf<Self>) -> Result<(), ManagerError> {
        self.inner().unpin_locked(guard)
    }

    /// See [`Manager::lease_until`].
    fn lease_until(
        &self,
        id: &str,
        deadline: Deadline,
    ) -> Result<Lease<ModelOf<Self>, RuntimeOf<Self>>, ManagerError> {
        self.inner().lease_until(id, deadline)
    }

    /// See [`Manager::peek_until`]: forwarded below, so that a layer overriding
    /// [`Decorator::lease_until`] to count uses never counts a look.
    fn peek_until(
        &self,
        id: &str,
        deadline: Deadline,
    ) -> Result<Lease<ModelOf<Self>, RuntimeOf<Self>>, ManagerError> {
        self.inner().peek_until(id, deadline)
    }

    /// See [`Manager::contains`] (a hint: never block).
    fn contains(&self, id: &str) -> bool {
        self.inner().contains(id)
    }

    /// See [`Manager::in_use`] (a hint: never block).
    fn in_use(&self, id: &str) -> bool {
        self.inner().in_use(id)
    }

    /// See [`Manager::is_locked`] (a hint: never block).
    fn is_locked(&self, id: &str) -> bool {
        self.inner().is_locked(id)
    }

    /// See [`Manager::is_pinned`] (a hint: never block).
    fn is_pinned(&self, id: &str) -> bool {
        self.inner().is_pinned(id)
    }

    /// See [`Manager::designate`] (never block).
    fn designate(&self, id: &str) -> Option<Designation<RuntimeOf<Self>>> {
        self.inner().designate(id)
    }

    /// See [`Manager::ids`].
    fn ids(&self) -> Vec<ModelId> {
        self.inner().ids()
    }

    /// See [`Manager::snapshot`].
    fn snapshot(&self) -> Snapshot {
        self.inner().snapshot()
    }

    /// See [`Manager::is_shut_down`] (a hint: never block).
    fn is_shut_down(&self) -> bool {
        self.inner().is_shut_down()
    }

    /// See [`Manager::removals`] (never block). Override it (or answer `None`) if this
    /// decorator hides ids from `contains` or `ids`.
    fn removals(&self) -> Option<u64> {
        self.inner().removals()
    }

    /// See [`Manager::unpins`] (never block). Override it if this decorator pins.
    fn unpins(&self) -> Option<u64> {
        self.inner().unpins()
    }

    /// See [`Manager::begin_shutdown`].
    fn begin_shutdown(&self) -> Vec<ModelId> {
        self.inner().begin_shutdown()
    }
}

// ---- Every decorator is a manager ---------------------------------------------------------------

/// Every [`Decorator`] is a [`Manager`]: the runtime and the change signal are the layer
/// below's; every other required method is the decorator's (its override or its default).
impl<D: Decorator> Manager for D {
    type Model = ModelOf<D>;
    type Runtime = RuntimeOf<D>;

    fn runtime(&self) -> &Self::Runtime {
        self.inner().runtime()
    }

    fn changes(&self) -> &Signal<Self::Runtime> {
        self.inner().changes()
    }

    fn lock_until(&self, id: &ModelId, deadline: Deadline) -> Result<GuardOf<D>, ManagerError> {
        Decorator::lock_until(self, id, deadline)
    }

    fn try_lock(&self, id: &ModelId) -> Option<GuardOf<D>> {
        Decorator::try_lock(self, id)
    }

    fn add_locked(&self, guard: &GuardOf<D>, canonical: &ModelId) -> Result<Added, ManagerError> {
        Decorator::add_locked(self, guard, canonical)
    }

    fn replace_locked(&self, guard: &GuardOf<D>, canonical: &ModelId) -> Result<Replaced, ManagerError> {
        Decorator::replace_locked(self, guard, canonical)
    }

    fn replace_in_place_locked(
        &self,
        guard: &GuardOf<D>,
        canonical: &ModelId,
    ) -> Result<Replaced, ManagerError> {
        Decorator::replace_in_place_locked(self, guard, canonical)
    }

    fn remove_locked(&self, guard: &GuardOf<D>) -> Result<(), ManagerError> {
        Decorator::remove_locked(self, guard)
    }

    fn evict_locked(&self, guard: &GuardOf<D>) -> Result<Eviction, ManagerError> {
        Decorator::evict_locked(self, guard)
    }

    fn register_locked(
        &self,
        guard: &GuardOf<D>,
        model: ModelOf<D>,
    ) -> Result<(), RegisterError<ModelOf<D>>> {
        Decorator::register_locked(self, guard, model)
    }

    fn pin_locked(&self, guard: &GuardOf<D>) -> Result<(), ManagerError> {
        Decorator::pin_locked(self, guard)
    }

    fn unpin_locked(&self, guard: &GuardOf<D>) -> Result<(), ManagerError> {
        Decorator::unpin_locked(self, guard)
    }

    fn lease_until(
        &self,
        id: &str,
        deadline: Deadline,
    ) -> Result<Lease<ModelOf<D>, RuntimeOf<D>>, ManagerError> {
        Decorator::lease_until(self, id, deadline)
    }

    fn peek_until(
        &self,
        id: &str,
        deadline: Deadline,
    ) -> Result<Lease<ModelOf<D>, RuntimeOf<D>>, ManagerError> {
        Decorator::peek_until(self, id, deadline)
    }

    fn contains(&self, id: &str) -> bool {
        Decorator::contains(self, id)
    }

    fn in_use(&self, id: &str) -> bool {
        Decorator::in_use(self, id)
    }

    fn is_locked(&self, id: &str) -> bool {
        Decorator::is_locked(self, id)
    }

    fn is_pinned(&self, id: &str) -> bool {
        Decorator::is_pinned(self, id)
    }

    fn designate(&self, id: &str) -> Option<Designation<RuntimeOf<D>>> {
        Decorator::designate(self, id)
    }

    fn ids(&self) -> Vec<ModelId> {
        Decorator::ids(self)
    }

    fn snapshot(&self) -> Snapshot {
        Decorator::snapshot(self)
    }

    fn is_shut_down(&self) -> bool {
        Decorator::is_shut_down(self)
    }

    fn removals(&self) -> Option<u64> {
        Decorator::removals(self)
    }

    fn unpins(&self) -> Option<u64> {
        Decorator::unpins(self)
    }

    fn begin_shutdown(&self) -> Vec<ModelId> {
        Decorator::begin_shutdown(self)
    }
}
