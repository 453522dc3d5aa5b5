//! The [`Manager`] trait — the common face of the base [`ModelManager`](crate::ModelManager)
//! and every decorator ([`crate::layer`]) — beside the vocabulary it names.
//!
//! # Hint methods run under a layer's bookkeeping lock
//! [`Manager::contains`], [`Manager::in_use`], [`Manager::is_locked`] and
//! [`Manager::is_pinned`] are what a layer's bookkeeping consults while it holds its own
//! monitor (`FixedSizeCache` plans its victims there). An implementation — a custom
//! decorator's included — must answer at once from its own state or by forwarding: it must not
//! block, wait for a lifecycle lock, call back into an outer layer, or run user code (loaders,
//! unloads, a model's methods). Every other method is called with no layer monitor held.

use super::removal::{self, RemovalReport};
use super::{Added, Designation, Eviction, Lease, LifecycleGuard, Model, Replaced, Snapshot};
use crate::deadline::{CallOptions, Deadline};
use crate::error::{ManagerError, RegisterError};
use crate::id::ModelId;
use crate::mutants::Mutant;
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

/// A model manager: the base [`ModelManager`](crate::ModelManager) or any stack of decorators
/// over it. Every method works on every stack.
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
    fn lock_until(
        &self,
        id: &str,
        deadline: Deadline,
    ) -> Result<LifecycleGuard<Self::Model, Self::Runtime>, ManagerError>;

    /// [`Manager::lock_until`] with no deadline of the caller's own.
    fn lock(&self, id: &str) -> Result<LifecycleGuard<Self::Model, Self::Runtime>, ManagerError> {
        self.lock_until(id, Deadline::NONE)
    }

    /// Like [`Manager::lock`], but only if nobody holds the lock right now (never waits);
    /// `None` for an id that is not a valid [`ModelId`] too (nothing can be registered under
    /// it). A `None` for a held lock is noted as for [`Manager::is_locked`]: its release bumps
    /// the stack's change signal.
    fn try_lock(&self, id: &str) -> Option<LifecycleGuard<Self::Model, Self::Runtime>>;

    /// [`Manager::add_model`] for a caller that already holds `guard` (the resolved id's lock).
    fn add_locked(
        &self,
        guard: &LifecycleGuard<Self::Model, Self::Runtime>,
        canonical: &ModelId,
    ) -> Result<Added, ManagerError>;

    /// [`Manager::replace`] for a caller that already holds `guard` (the resolved id's lock).
    fn replace_locked(
        &self,
        guard: &LifecycleGuard<Self::Model, Self::Runtime>,
        canonical: &ModelId,
    ) -> Result<Replaced, ManagerError>;

    /// [`Manager::replace_in_place`] for a caller that already holds `guard` (the resolved
    /// id's lock).
    fn replace_in_place_locked(
        &self,
        guard: &LifecycleGuard<Self::Model, Self::Runtime>,
        canonical: &ModelId,
    ) -> Result<Replaced, ManagerError>;

    /// [`Manager::remove`] for a caller that already holds `guard`.
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

    /// [`Manager::register`] for a caller that already holds `guard` (the id's lock).
    fn register_locked(
        &self,
        guard: &LifecycleGuard<Self::Model, Self::Runtime>,
        model: Self::Model,
    ) -> Result<(), RegisterError<Self::Model>>;

    /// [`Manager::pin`] for a caller that already holds `guard`: pins its id in every layer.
    fn pin_locked(&self, guard: &LifecycleGuard<Self::Model, Self::Runtime>) -> Result<(), ManagerError>;

    /// A lease on the model registered under the resolved id `id`, without any lifecycle lock.
    /// Its one wait (for the outcome of an eviction that is unloading the model) ends by
    /// `deadline` at the latest (`LockTimeout`).
    fn lease_until(
        &self,
        id: &str,
        deadline: Deadline,
    ) -> Result<Lease<Self::Model, Self::Runtime>, ManagerError>;

    /// [`Manager::lease_until`] with no deadline of the caller's own.
    fn lease(&self, id: &str) -> Result<Lease<Self::Model, Self::Runtime>, ManagerError> {
        self.lease_until(id, Deadline::NONE)
    }

    /// [`Manager::lease`] whose wait is bounded by `options` too (SPEC 1.10).
    fn lease_with(
        &self,
        id: &str,
        options: CallOptions,
    ) -> Result<Lease<Self::Model, Self::Runtime>, ManagerError> {
        self.lease_until(id, options.deadline(self.runtime()))
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

    /// The first step of [`Manager::shutdown`], in the innermost base: from now on adds and
    /// leases are refused with `ShutDown`, and the stack's waiters are woken so that they see
    /// it. Returns every id the shutdown must settle: the registered ones, and those with a
    /// caller in their lifecycle (an add that got past the check registers only under its
    /// lifecycle lock, which the shutdown then waits for). Idempotent.
    fn begin_shutdown(&self) -> Vec<ModelId>;

    /// Shuts the stack down gracefully (SPEC 1.13): refuses new adds and leases with
    /// `ShutDown`, then, id by id under its lifecycle lock and through every layer (a cache's
    /// queue included), drains the live leases and unloads the model, as
    /// [`Manager::remove`] does. Every wait is bounded by `options` as well as by the
    /// configured timeouts. A call that races it either completes before it (and its model is
    /// then unloaded by it) or gets `ShutDown`; never a half state.
    ///
    /// What could not be unloaded (an unload error, leases that outlived the deadline) stays
    /// registered, refuses new leases, and is reported; calling `shutdown` again tries it
    /// again. Removes, pins and unpins keep working. A manager over a
    /// [`CacheGroup`](crate::cache::CacheGroup) is shut down first, then the group: the
    /// unloads release the records, and the group's shutdown evicts them.
    ///
    /// ```
    /// use std::time::Duration;
    /// use resident::{BoxError, CallOptions, Loader, Manager, ManagerError, Model, ModelId, ModelManager};
    /// # struct M; impl Model for M { fn size_bytes(&self) -> u64 { 1 } }
    /// # struct L; impl Loader for L { type Model = M; fn load(&self, _: &ModelId) -> Result<M, BoxError> { Ok(M) } }
    /// let manager = ModelManager::new(L);
    /// manager.add_model("a", None)?;
    /// let report = manager.shutdown(CallOptions::new().with_timeout(Duration::from_secs(5)));
    /// assert!(report.is_complete());
    /// assert_eq!(report.removed, [ModelId::new("a")?]);
    /// assert!(matches!(manager.add_model("a", None), Err(ManagerError::ShutDown { .. })));
    /// assert!(matches!(manager.lease("a"), Err(ManagerError::ShutDown { .. })));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    fn shutdown(&self, options: CallOptions) -> RemovalReport {
        removal::shut_down(self, options)
    }

    /// Protects the resolved id `id` from eviction in every layer of the stack. It takes the
    /// id's lifecycle lock (waiting at most the lock timeout, then `LockTimeout`), which every
    /// eviction holds from its last pin check to its unload: so a pin that returned `Ok` while
    /// the model was registered is honoured by every eviction that had not yet unloaded it.
    /// Pinning an id that is not registered (yet) is allowed; the pin waits for it.
    fn pin(&self, id: &str) -> Result<(), ManagerError> {
        self.pin_with(id, CallOptions::new())
    }

    /// [`Manager::pin`] with its wait for the lifecycle lock bounded by `options` too
    /// (SPEC 1.10): `LockTimeout` once it runs out, nothing pinned.
    fn pin_with(&self, id: &str, options: CallOptions) -> Result<(), ManagerError> {
        let id = ModelId::new(id)?;
        let deadline = options.deadline(self.runtime());
        let deadline =
            if self.runtime().mutant(Mutant::DEADLINE_SKIPS_PIN) { Deadline::NONE } else { deadline };
        let guard = self.lock_until(&id, deadline)?;
        self.pin_locked(&guard)
    }

    /// Undoes [`Manager::pin`] in every layer of the stack, under the id's lifecycle lock (at
    /// most [`ManagerConfig::lock_timeout`](crate::ManagerConfig::lock_timeout) for it, then
    /// `LockTimeout`, nothing changed), so that a pin and an unpin of one id racing each other
    /// take effect in the same order in every layer.
    fn unpin(&self, id: &str) -> Result<(), ManagerError> {
        self.unpin_with(id, CallOptions::new())
    }

    /// [`Manager::unpin`] with its wait for the lifecycle lock bounded by `options` too
    /// (SPEC 1.10).
    fn unpin_with(&self, id: &str, options: CallOptions) -> Result<(), ManagerError> {
        let id = ModelId::new(id)?;
        let guard = self.lock_until(&id, options.deadline(self.runtime()))?;
        self.unpin_locked(&guard)
    }

    /// [`Manager::unpin`] for a caller that already holds `guard`.
    fn unpin_locked(&self, guard: &LifecycleGuard<Self::Model, Self::Runtime>) -> Result<(), ManagerError>;

    /// Makes sure `id` is registered under its resolved id (`alias` if given, else `id`),
    /// loading it with the canonical `id` if it is not. See [`ModelManager`](crate::ModelManager).
    fn add_model(&self, id: &str, alias: Option<&str>) -> Result<Added, ManagerError> {
        self.add_model_with(id, alias, CallOptions::new())
    }

    /// [`Manager::add_model`] with every wait inside it — the lifecycle lock, a cache's wait
    /// for capacity, and the loader's own waits if it honours [`Loader::load_until`] — bounded
    /// by `options` too (SPEC 1.10). A wait that runs out returns its own error with the bound
    /// it had, and nothing changes.
    ///
    /// [`Loader::load_until`]: crate::Loader::load_until
    fn add_model_with(
        &self,
        id: &str,
        alias: Option<&str>,
        options: CallOptions,
    ) -> Result<Added, ManagerError> {
        let (canonical, resolved) = resolve(id, alias)?;
        let mut guard = self.lock_until(&resolved, options.deadline(self.runtime()))?;
        let added = self.add_locked(&guard, &canonical);
        if matches!(added, Ok(Added::Warm)) {
            guard.changed_nothing();
        }
        added
    }

    /// Replaces the model registered under the resolved id (`alias` if given, else `id`) by a
    /// new version loaded from the canonical `id`, atomically for its callers (SPEC 1.11).
    ///
    /// The new version is loaded beside the old one, which keeps serving meanwhile (a cache
    /// makes room for both first); the registry then switches to it in one step: a lease taken
    /// before the switch keeps the old version, one taken after gets the new one, and no lease
    /// ever sees `NotFound` or a version being unloaded. The old version's leases then drain
    /// (bounded by the lease drain timeout and `options`) and it is unloaded
    /// ([`Replaced::Unloaded`]); if they outlive the drain or its unload fails, the new version
    /// serves anyway and the old one is dropped with its last lease ([`Replaced::Detached`]).
    /// If the new version's load fails, nothing changes. Through a
    /// [`FixedSizeCache`](crate::FixedSizeCache) the id keeps its queue position and its pin.
    /// With nothing registered under the id, the new version is simply added
    /// ([`Replaced::Added`]).
    ///
    /// ```
    /// use std::time::Duration;
    /// use resident::{BoxError, CallOptions, Loader, Manager, ManagerError, Model, ModelId, ModelManager, Replaced};
    /// struct Version(String);
    /// impl Model for Version { fn size_bytes(&self) -> u64 { 1 } }
    /// struct L;
    /// impl Loader for L {
    ///     type Model = Version;
    ///     fn load(&self, id: &ModelId) -> Result<Version, BoxError> { Ok(Version(id.to_string())) }
    /// }
    /// let manager = ModelManager::new(L);
    /// manager.add_model("detector/v1", Some("detector"))?;
    /// let serving = manager.lease("detector")?; // taken before the switch: keeps v1
    /// let within = CallOptions::new().with_timeout(Duration::from_millis(10));
    /// let replaced = manager.replace("detector/v2", Some("detector"), within)?;
    /// // The live lease outlived the drain: v2 serves, v1 goes with its last lease.
    /// assert!(matches!(replaced, Replaced::Detached(ManagerError::Busy { .. })));
    /// assert_eq!(serving.0, "detector/v1");
    /// assert_eq!(manager.infer("detector", |m| m.0.clone())?, "detector/v2");
    /// drop(serving);
    /// let replaced = manager.replace("detector/v3", Some("detector"), CallOptions::new())?;
    /// assert!(matches!(replaced, Replaced::Unloaded));
    /// # Ok::<(), resident::ManagerError>(())
    /// ```
    fn replace(&self, id: &str, alias: Option<&str>, options: CallOptions) -> Result<Replaced, ManagerError> {
        let (canonical, resolved) = resolve(id, alias)?;
        let guard = self.lock_until(&resolved, options.deadline(self.runtime()))?;
        self.replace_locked(&guard, &canonical)
    }

    /// [`Manager::replace`] for a model that cannot have two versions resident at once (one
    /// slot per device, a [`FixedSizeCache`](crate::FixedSizeCache) of one, memory for one
    /// version only), opted into explicitly: the old version's leases are drained (new leases
    /// wait for the new version, each bounded by its own timeout, and none finds the id gone
    /// meanwhile), it is unloaded and dropped, and the new version is loaded into the slot it
    /// left, read afresh like any replace's. Nothing registered: the new version is added.
    ///
    /// Leases that outlive the drain (at most
    /// [`ManagerConfig::lease_drain_timeout`](crate::ManagerConfig::lease_drain_timeout) and the
    /// call's deadline) refuse it with `Busy`, and an unload that fails with `Unload`: the old
    /// version serves on, unchanged. **A new version that fails to load leaves the id
    /// unregistered** (the old one cannot come back: it is gone) and the call returns the load's
    /// error; so does a panic of user code after the unload. Returns
    /// [`Replaced::Unloaded`](crate::Replaced::Unloaded) or `Added`.
    ///
    /// ```
    /// use resident::{BoxError, FixedSizeCache, FixedSizeConfig, Loader, Manager, ManagerError};
    /// use resident::{Model, ModelId, ModelManager, Replaced};
    /// struct Version(String);
    /// impl Model for Version { fn size_bytes(&self) -> u64 { 1 } }
    /// struct L;
    /// impl Loader for L {
    ///     type Model = Version;
    ///     fn load(&self, id: &ModelId) -> Result<Version, BoxError> { Ok(Version(id.to_string())) }
    /// }
    /// // One model per device: v2 can never load beside v1.
    /// let gpu = FixedSizeCache::new(ModelManager::new(L), FixedSizeConfig::new(1))?;
    /// gpu.add_model("detector/v1", Some("detector"))?;
    /// let beside = gpu.replace("detector/v2", Some("detector"), Default::default());
    /// assert!(matches!(beside, Err(ManagerError::NoSlotBeside { .. })));
    /// let swapped = gpu.replace_in_place("detector/v2", Some("detector"), Default::default())?;
    /// assert!(matches!(swapped, Replaced::Unloaded));
    /// assert_eq!(gpu.infer("detector", |m| m.0.clone())?, "detector/v2");
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    fn replace_in_place(
        &self,
        id: &str,
        alias: Option<&str>,
        options: CallOptions,
    ) -> Result<Replaced, ManagerError> {
        let (canonical, resolved) = resolve(id, alias)?;
        let guard = self.lock_until(&resolved, options.deadline(self.runtime()))?;
        self.replace_in_place_locked(&guard, &canonical)
    }

    /// Registers `model`, built elsewhere, under the resolved id `id` (upstream's
    /// `ModelManager(models={...})`), with no loader call: from then on it is served, evicted,
    /// replaced and unloaded like a loaded model. Through a
    /// [`FixedSizeCache`](crate::FixedSizeCache) it goes through admission like a cold add
    /// (counted against `max_size`, evicting least recently used models, or waiting for room).
    ///
    /// Refused with the model handed back, and nothing changed: an id already registered
    /// (`AlreadyRegistered`; the registered model stays), an invalid id, a shut-down stack, no
    /// lock or no room in time. A panic of user code on the way (an evicted model's `unload`)
    /// reaches the caller, and the model is dropped with the unwinding call.
    ///
    /// ```
    /// use resident::{BoxError, Loader, Manager, ManagerError, Model, ModelId, ModelManager};
    /// struct Named(&'static str);
    /// impl Model for Named { fn size_bytes(&self) -> u64 { 1 } }
    /// struct L;
    /// impl Loader for L {
    ///     type Model = Named;
    ///     fn load(&self, _: &ModelId) -> Result<Named, BoxError> { Ok(Named("loaded")) }
    /// }
    /// let manager = ModelManager::new(L);
    /// manager.register("warm", Named("built elsewhere"))?;
    /// assert_eq!(manager.infer("warm", |m| m.0)?, "built elsewhere");
    /// let refused = manager.register("warm", Named("second")).unwrap_err();
    /// assert!(matches!(refused.error, ManagerError::AlreadyRegistered { .. }));
    /// assert_eq!(refused.model.0, "second"); // handed back
    /// # Ok::<(), ManagerError>(())
    /// ```
    fn register(&self, id: &str, model: Self::Model) -> Result<(), RegisterError<Self::Model>> {
        self.register_with(id, model, CallOptions::new())
    }

    /// [`Manager::register`] with its waits (the lifecycle lock, a cache's wait for room)
    /// bounded by `options` too (SPEC 1.10).
    fn register_with(
        &self,
        id: &str,
        model: Self::Model,
        options: CallOptions,
    ) -> Result<(), RegisterError<Self::Model>> {
        let id = match ModelId::new(id) {
            Ok(id) => id,
            Err(error) => return Err(RegisterError::new(error, model)),
        };
        match self.lock_until(&id, options.deadline(self.runtime())) {
            Ok(guard) => self.register_locked(&guard, model),
            Err(error) => Err(RegisterError::new(error, model)),
        }
    }

    /// Removes every model registered when it starts — pinned ones too; the pins stay, and
    /// protect the id again once it is added back — id by id under its lifecycle lock and
    /// through every layer, as [`Manager::remove_with`] does: live leases drain within the
    /// lease drain timeout and `options`. It goes on past a failure (unlike upstream's
    /// `clear`, which stops at the first): what could not be removed stays registered and
    /// serving, and is reported with its error. A model added while it runs may stay.
    ///
    /// ```
    /// use resident::{BoxError, CallOptions, FixedSizeCache, FixedSizeConfig, Loader, Manager, Model, ModelId, ModelManager};
    /// # struct M; impl Model for M { fn size_bytes(&self) -> u64 { 1 } }
    /// # struct L; impl Loader for L { type Model = M; fn load(&self, _: &ModelId) -> Result<M, BoxError> { Ok(M) } }
    /// let cache = FixedSizeCache::new(ModelManager::new(L), FixedSizeConfig::new(2))?;
    /// cache.add_model("a", None)?;
    /// cache.add_model("b", None)?;
    /// cache.pin("a")?;
    /// let report = cache.clear(CallOptions::new());
    /// assert!(report.is_complete() && cache.is_empty());
    /// assert!(cache.is_pinned("a")); // the pin stays
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    fn clear(&self, options: CallOptions) -> RemovalReport {
        removal::clear(self, options)
    }

    /// Unloads and unregisters the model registered under the resolved id `id`.
    fn remove(&self, id: &str) -> Result<(), ManagerError> {
        self.remove_with(id, CallOptions::new())
    }

    /// [`Manager::remove`] with its waits — the lifecycle lock and the drain of live leases —
    /// bounded by `options` too (SPEC 1.10). A wait that runs out returns `LockTimeout` or
    /// `Busy` with the bound it had, and the model stays registered and usable.
    fn remove_with(&self, id: &str, options: CallOptions) -> Result<(), ManagerError> {
        let id = ModelId::new(id)?;
        let guard = self.lock_until(&id, options.deadline(self.runtime()))?;
        self.remove_locked(&guard)
    }

    /// Runs `f` on the model registered under `id`, holding a lease for the duration.
    fn infer<O>(&self, id: &str, f: impl FnOnce(&Self::Model) -> O) -> Result<O, ManagerError>
    where
        Self: Sized,
    {
        self.infer_with(id, CallOptions::new(), f)
    }

    /// [`Manager::infer`] whose lease wait is bounded by `options` too (SPEC 1.10).
    fn infer_with<O>(
        &self,
        id: &str,
        options: CallOptions,
        f: impl FnOnce(&Self::Model) -> O,
    ) -> Result<O, ManagerError>
    where
        Self: Sized,
    {
        let lease = self.lease_with(id, options)?;
        Ok(f(&lease))
    }

    /// How many models are registered.
    fn len(&self) -> usize {
        self.ids().len()
    }

    /// Whether no model is registered.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
}
