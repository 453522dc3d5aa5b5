//! [`ManagerExt`]: what a user calls on any stack — each call one lifecycle lock (or none,
//! for a lease) and one step of the layer-facing [`Manager`] protocol under it.
//!
//! It is implemented for every [`Manager`] and cannot be overridden, so no layer can take a
//! shortcut around the lock protocol (the bug class of M-S3, M-E1 and S-CL1): a layer changes
//! what a call does only through the `*_locked` steps it is given the guard for.
//!
//! Every call comes in two forms: `x(..)`, bounded by the configured timeouts, and
//! `x_with(.., CallOptions)`, bounded by the caller's own timeout or deadline too (SPEC 1.10).
//! The [`Deadline`](crate::Deadline) forms (`lock_until`, `lease_until`) are the layer-facing
//! ones, on [`Manager`].

use super::contract::{Manager, resolve};
use super::removal::{self, RemovalReport};
use super::{Added, Lease, LifecycleGuard, Replaced};
use crate::deadline::{CallOptions, Deadline};
use crate::error::{ManagerError, RegisterError};
use crate::held::Held;
use crate::id::ModelId;
use crate::mutants::Mutant;
use crate::runtime::Runtime as _;

// ---- The calls ----------------------------------------------------------------------------------

/// The calls a user makes on a [`Manager`] stack: adds, replaces, registrations, removals,
/// leases, pins, `clear` and `shutdown`. Implemented for every `Manager` (bring it into scope
/// with `use resident::ManagerExt`).
pub trait ManagerExt: Manager {
    /// [`Manager::lock_until`] with no deadline of the caller's own.
    fn lock(&self, id: &str) -> Result<LifecycleGuard<Self::Model, Self::Runtime>, ManagerError> {
        self.lock_until(&ModelId::new(id)?, Deadline::NONE)
    }

    /// [`Manager::lease_until`] with no deadline of the caller's own.
    fn lease(&self, id: &str) -> Result<Lease<Self::Model, Self::Runtime>, ManagerError> {
        self.lease_until(id, Deadline::NONE)
    }

    /// [`ManagerExt::lease`] whose wait is bounded by `options` too (SPEC 1.10).
    fn lease_with(
        &self,
        id: &str,
        options: CallOptions,
    ) -> Result<Lease<Self::Model, Self::Runtime>, ManagerError> {
        self.lease_until(id, options.deadline(self.runtime()))
    }

    /// Shuts the stack down gracefully (SPEC 1.13): refuses new adds and leases with
    /// `ShutDown`, then, id by id under its lifecycle lock and through every layer (a cache's
    /// queue included), drains the live leases and unloads the model, as
    /// [`ManagerExt::remove`] does. Every wait is bounded by the configured timeouts
    /// (and by `options` too, with [`ManagerExt::shutdown_with`]). A call that races it either completes before it (and its model is
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
    /// use resident::{BoxError, CallOptions, Loader, Manager, ManagerExt, ManagerError, Model, ModelId, ModelManager};
    /// # struct M; impl Model for M { fn size_bytes(&self) -> u64 { 1 } }
    /// # struct L; impl Loader for L { type Model = M; fn load(&self, _: &ModelId) -> Result<M, BoxError> { Ok(M) } }
    /// let manager = ModelManager::new(L);
    /// manager.add_model("a", None)?;
    /// let report = manager.shutdown_with(CallOptions::new().with_timeout(Duration::from_secs(5)));
    /// assert!(report.is_complete());
    /// assert_eq!(report.removed, [ModelId::new("a")?]);
    /// assert!(matches!(manager.add_model("a", None), Err(ManagerError::ShutDown { .. })));
    /// assert!(matches!(manager.lease("a"), Err(ManagerError::ShutDown { .. })));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    fn shutdown(&self) -> RemovalReport {
        self.shutdown_with(CallOptions::new())
    }

    /// [`ManagerExt::shutdown`] with every wait bounded by `options` too (SPEC 1.10).
    fn shutdown_with(&self, options: CallOptions) -> RemovalReport {
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

    /// [`ManagerExt::pin`] with its wait for the lifecycle lock bounded by `options` too
    /// (SPEC 1.10): `LockTimeout` once it runs out, nothing pinned.
    fn pin_with(&self, id: &str, options: CallOptions) -> Result<(), ManagerError> {
        let id = ModelId::new(id)?;
        let guard = self.lock_until(&id, options.deadline(self.runtime()))?;
        self.pin_locked(&guard)
    }

    /// Undoes [`ManagerExt::pin`] in every layer of the stack, under the id's lifecycle lock (at
    /// most [`ManagerConfig::lock_timeout`](crate::ManagerConfig::lock_timeout) for it, then
    /// `LockTimeout`, nothing changed), so that a pin and an unpin of one id racing each other
    /// take effect in the same order in every layer.
    fn unpin(&self, id: &str) -> Result<(), ManagerError> {
        self.unpin_with(id, CallOptions::new())
    }

    /// [`ManagerExt::unpin`] with its wait for the lifecycle lock bounded by `options` too
    /// (SPEC 1.10).
    fn unpin_with(&self, id: &str, options: CallOptions) -> Result<(), ManagerError> {
        let id = ModelId::new(id)?;
        let guard = self.lock_until(&id, options.deadline(self.runtime()))?;
        self.unpin_locked(&guard)
    }

    /// Makes sure `id` is registered under its resolved id (`alias` if given, else `id`),
    /// loading it with the canonical `id` if it is not. See [`ModelManager`](crate::ModelManager).
    fn add_model(&self, id: &str, alias: Option<&str>) -> Result<Added, ManagerError> {
        self.add_model_with(id, alias, CallOptions::new())
    }

    /// [`ManagerExt::add_model`] with every wait inside it — the lifecycle lock, a cache's wait
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
        released(guard, added, user_errors_guarded(self.runtime()))
    }

    /// Replaces the model registered under the resolved id (`alias` if given, else `id`) by a
    /// new version loaded from the canonical `id`, atomically for its callers (SPEC 1.11).
    ///
    /// The new version is loaded beside the old one, which keeps serving meanwhile (a cache
    /// makes room for both first); the registry then switches to it in one step: a lease taken
    /// before the switch keeps the old version, one taken after gets the new one, and no lease
    /// ever sees `NotFound` or a version being unloaded. The old version's leases then drain
    /// (bounded by the lease drain timeout, and by `options` with [`ManagerExt::replace_with`]) and it is unloaded
    /// ([`Replaced::Unloaded`]); if they outlive the drain or its unload fails, the new version
    /// serves anyway and the old one is dropped with its last lease ([`Replaced::Detached`]).
    /// If the new version's load fails, nothing changes. Through a
    /// [`FixedSizeCache`](crate::FixedSizeCache) the id keeps its queue position and its pin.
    /// With nothing registered under the id, the new version is simply added
    /// ([`Replaced::Added`]).
    ///
    /// ```
    /// use std::time::Duration;
    /// use resident::{BoxError, CallOptions, Loader, Manager, ManagerExt, ManagerError, Model, ModelId, ModelManager, Replaced};
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
    /// let replaced = manager.replace_with("detector/v2", Some("detector"), within)?;
    /// // The live lease outlived the drain: v2 serves, v1 goes with its last lease.
    /// assert!(matches!(replaced, Replaced::Detached(ManagerError::Busy { .. })));
    /// assert_eq!(serving.0, "detector/v1");
    /// assert_eq!(manager.infer("detector", |m| m.0.clone())?, "detector/v2");
    /// drop(serving);
    /// let replaced = manager.replace("detector/v3", Some("detector"))?;
    /// assert!(matches!(replaced, Replaced::Unloaded));
    /// # Ok::<(), resident::ManagerError>(())
    /// ```
    fn replace(&self, id: &str, alias: Option<&str>) -> Result<Replaced, ManagerError> {
        self.replace_with(id, alias, CallOptions::new())
    }

    /// [`ManagerExt::replace`] with its waits (the lifecycle lock, a cache's wait for room, the
    /// old version's drain) bounded by `options` too (SPEC 1.10).
    fn replace_with(
        &self,
        id: &str,
        alias: Option<&str>,
        options: CallOptions,
    ) -> Result<Replaced, ManagerError> {
        let (canonical, resolved) = resolve(id, alias)?;
        let guard = self.lock_until(&resolved, options.deadline(self.runtime()))?;
        let replaced = self.replace_locked(&guard, &canonical);
        released(guard, replaced, user_errors_guarded(self.runtime()))
    }

    /// [`ManagerExt::replace`] for a model that cannot have two versions resident at once (one
    /// slot per device, a [`FixedSizeCache`](crate::FixedSizeCache) of one, memory for one
    /// version only), opted into explicitly: the old version's leases are drained (new leases
    /// wait for the new version, each bounded by its own timeout, and none finds the id gone
    /// meanwhile), it is unloaded and dropped, and the new version is loaded into the slot it
    /// left, read afresh like any replace's. Nothing registered: the new version is added.
    ///
    /// Leases that outlive the drain (at most
    /// [`ManagerConfig::lease_drain_timeout`](crate::ManagerConfig::lease_drain_timeout) and the
    /// call's deadline, with [`ManagerExt::replace_in_place_with`]) refuse it with `Busy`, and an unload that fails with `Unload`: the old
    /// version serves on, unchanged. **A new version that fails to load leaves the id
    /// unregistered** (the old one cannot come back: it is gone) and the call returns the load's
    /// error; so does a panic of user code after the unload. Returns
    /// [`Replaced::Unloaded`](crate::Replaced::Unloaded) or `Added`.
    ///
    /// ```
    /// use resident::{BoxError, FixedSizeCache, FixedSizeConfig, Loader, Manager, ManagerExt, ManagerError};
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
    /// let beside = gpu.replace("detector/v2", Some("detector"));
    /// assert!(matches!(beside, Err(ManagerError::NoSlotBeside { .. })));
    /// let swapped = gpu.replace_in_place("detector/v2", Some("detector"))?;
    /// assert!(matches!(swapped, Replaced::Unloaded));
    /// assert_eq!(gpu.infer("detector", |m| m.0.clone())?, "detector/v2");
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    fn replace_in_place(&self, id: &str, alias: Option<&str>) -> Result<Replaced, ManagerError> {
        self.replace_in_place_with(id, alias, CallOptions::new())
    }

    /// [`ManagerExt::replace_in_place`] with its waits (the lifecycle lock, the drain, a cache's
    /// wait for room) bounded by `options` too (SPEC 1.10).
    fn replace_in_place_with(
        &self,
        id: &str,
        alias: Option<&str>,
        options: CallOptions,
    ) -> Result<Replaced, ManagerError> {
        let (canonical, resolved) = resolve(id, alias)?;
        let guard = self.lock_until(&resolved, options.deadline(self.runtime()))?;
        let replaced = self.replace_in_place_locked(&guard, &canonical);
        released(guard, replaced, user_errors_guarded(self.runtime()))
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
    /// use resident::{BoxError, Loader, Manager, ManagerExt, ManagerError, Model, ModelId, ModelManager};
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

    /// [`ManagerExt::register`] with its waits (the lifecycle lock, a cache's wait for room)
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
        // Held across the reports of the lock's wait and release (user code): a panic there
        // lets go of the model under a catch.
        let guarded = !self.runtime().mutant(Mutant::REGISTERED_MODEL_DROPPED_IN_UNWIND);
        let mut held = Held::<_, Self::Runtime>::new(model, guarded);
        match self.lock_until(&id, options.deadline(self.runtime())) {
            Ok(guard) => {
                let model = held.take().expect("held until registered");
                let registered = self.register_locked(&guard, model);
                released(guard, registered, guarded)
            }
            Err(error) => Err(RegisterError::new(error, held.into_inner())),
        }
    }

    /// Removes every model registered when it starts — pinned ones too; the pins stay, and
    /// protect the id again once it is added back — id by id under its lifecycle lock and
    /// through every layer, as [`ManagerExt::remove_with`] does: live leases drain within the
    /// lease drain timeout (and `options`, with [`ManagerExt::clear_with`]). It goes on past a failure (unlike upstream's
    /// `clear`, which stops at the first): what could not be removed stays registered and
    /// serving, and is reported with its error. A model added while it runs may stay.
    ///
    /// ```
    /// use resident::{BoxError, CallOptions, FixedSizeCache, FixedSizeConfig, Loader, Manager, ManagerExt, Model, ModelId, ModelManager};
    /// # struct M; impl Model for M { fn size_bytes(&self) -> u64 { 1 } }
    /// # struct L; impl Loader for L { type Model = M; fn load(&self, _: &ModelId) -> Result<M, BoxError> { Ok(M) } }
    /// let cache = FixedSizeCache::new(ModelManager::new(L), FixedSizeConfig::new(2))?;
    /// cache.add_model("a", None)?;
    /// cache.add_model("b", None)?;
    /// cache.pin("a")?;
    /// let report = cache.clear();
    /// assert!(report.is_complete() && cache.is_empty());
    /// assert!(cache.is_pinned("a")); // the pin stays
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    fn clear(&self) -> RemovalReport {
        self.clear_with(CallOptions::new())
    }

    /// [`ManagerExt::clear`] with every wait bounded by `options` too (SPEC 1.10).
    fn clear_with(&self, options: CallOptions) -> RemovalReport {
        removal::clear(self, options)
    }

    /// Unloads and unregisters the model registered under the resolved id `id`.
    fn remove(&self, id: &str) -> Result<(), ManagerError> {
        self.remove_with(id, CallOptions::new())
    }

    /// [`ManagerExt::remove`] with its waits — the lifecycle lock and the drain of live leases —
    /// bounded by `options` too (SPEC 1.10). A wait that runs out returns `LockTimeout` or
    /// `Busy` with the bound it had, and the model stays registered and usable.
    fn remove_with(&self, id: &str, options: CallOptions) -> Result<(), ManagerError> {
        let id = ModelId::new(id)?;
        let guard = self.lock_until(&id, options.deadline(self.runtime()))?;
        let removed = self.remove_locked(&guard);
        released(guard, removed, user_errors_guarded(self.runtime()))
    }

    /// Runs `f` on the model registered under `id`, holding a lease for the duration.
    fn infer<O>(&self, id: &str, f: impl FnOnce(&Self::Model) -> O) -> Result<O, ManagerError> {
        self.infer_with(id, CallOptions::new(), f)
    }

    /// [`ManagerExt::infer`] whose lease wait is bounded by `options` too (SPEC 1.10).
    fn infer_with<O>(
        &self,
        id: &str,
        options: CallOptions,
        f: impl FnOnce(&Self::Model) -> O,
    ) -> Result<O, ManagerError> {
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

impl<M: Manager + ?Sized> ManagerExt for M {}

/// Lets go of `guard` with the step's `result` held (`guarded`: unless a mutant drops it
/// plainly): the release reports (user code), and a panic there must not drop the user's error
/// (a loader's, an `unload`'s) or model plainly in its unwind, where a panicking `Drop` aborts
/// the process.
fn released<T, M, R>(guard: LifecycleGuard<M, R>, result: T, guarded: bool) -> T
where
    M: Send + Sync + 'static,
    R: crate::runtime::Runtime,
{
    let held = Held::<_, R>::new(result, guarded);
    drop(guard);
    held.into_inner()
}

/// Whether a user's error is held across reports (not under `user-error-dropped-in-unwind`).
fn user_errors_guarded<R: crate::runtime::Runtime>(runtime: &R) -> bool {
    !runtime.mutant(Mutant::USER_ERROR_DROPPED_IN_UNWIND)
}
