//! The base [`ModelManager`]: registry, per-model lifecycle entries, leases.
//!
//! # Lifecycle protocol
//! Every mutation of a resolved id (`add_model`, `remove`) *reserves* the id's current
//! lifecycle entry under the table monitor, then waits (bounded) for the entry's lock with the
//! table monitor released. The loader and the unload run with only that per-model lock held.
//! An entry is retired only when it is still current, unreserved, and the id is unregistered,
//! so a caller that waited on a generation always mutates under the one generation newcomers
//! use too (I1, I2), and the table never keeps entries of ids nobody needs (I3).
//!
//! # Lock order
//! `lifecycle lock (per id)` → `table monitor` → `registry shard lock` (the retirement rule
//! reads the registry) → nothing; a lease takes only its id's registry shard lock, for the
//! lookup, then counts itself in its slot's use word (an atomic, no lock); `in_use` and
//! `designate` read or change a slot's word under its shard's read lock. `lifecycle lock` →
//! `slot wait monitor` (a drain or an eviction's outcome awaited) → nothing; `lifecycle lock` →
//! `swap monitor` (an in-place replace's) → nothing, and a lease waits on a swap monitor or a
//! slot's wait monitor holding nothing. None of them is held while waiting, loading, unloading
//! or calling any user code, and no thread ever waits for a second lifecycle lock while
//! holding one.

mod config;
mod contract;
mod ext;
mod lease;
mod lifecycle;
mod model;
mod outcome;
mod registry;
mod removal;
mod swap;
mod table;
mod use_word;

use std::fmt;

pub use config::ManagerConfig;
pub use contract::Manager;
pub use ext::ManagerExt;
pub use lease::{Designation, Lease};
pub use lifecycle::LifecycleGuard;
pub use model::{Loader, Model};
pub use outcome::{Added, Eviction, LifecycleInfo, Replaced, Snapshot};
pub use removal::RemovalReport;

use lease::ModelSlot;
use lifecycle::{Reservation, SharedTable};
use registry::{Found, Registry};
use table::Table;

use crate::deadline::Deadline;
use crate::error::{InvalidConfig, ManagerError, RegisterError, SourceError};
use crate::held::Held;
use crate::id::ModelId;
use crate::mutants::Mutant;
use crate::runtime::{Arc, Monitor, Runtime, Signal, StdRuntime};
use crate::telemetry;

/// Keeps models resident: loads each resolved id at most once at a time, shares it through
/// leases, and unloads it only when no lease is left.
///
/// ```
/// use resident::{BoxError, Loader, Manager, ManagerExt, Model, ModelId, ModelManager};
///
/// struct Echo(String);
/// impl Model for Echo {
///     fn size_bytes(&self) -> u64 { self.0.len() as u64 }
/// }
/// struct EchoLoader;
/// impl Loader for EchoLoader {
///     type Model = Echo;
///     fn load(&self, id: &ModelId) -> Result<Echo, BoxError> { Ok(Echo(id.to_string())) }
/// }
///
/// let manager = ModelManager::new(EchoLoader);
/// manager.add_model("coco/3", Some("detector"))?;
/// let name = manager.infer("detector", |m| m.0.clone())?;
/// assert_eq!(name, "coco/3"); // the loader saw the canonical id
/// manager.remove("detector")?;
/// assert!(!manager.contains("detector"));
/// # Ok::<(), resident::ManagerError>(())
/// ```
pub struct ModelManager<L: Loader, R: Runtime = StdRuntime> {
    loader: L,
    runtime: R,
    config: ManagerConfig,
    table: SharedTable<L::Model, R>,
    /// The registry the table retires entries by, read here without the table's monitor.
    registry: Arc<Registry<L::Model, R>>,
    changes: Arc<Signal<R>>,
}

impl<L: Loader> ModelManager<L> {
    /// A manager with the default configuration on the production runtime.
    pub fn new(loader: L) -> Self {
        Self::build(loader, ManagerConfig::default(), StdRuntime::new())
    }

    /// A manager with `config` on the production runtime.
    pub fn with_config(loader: L, config: ManagerConfig) -> Result<Self, InvalidConfig> {
        Self::with_runtime(loader, config, StdRuntime::new())
    }
}

// ---- The manager --------------------------------------------------------------------------------

impl<L: Loader, R: Runtime> ModelManager<L, R> {
    /// A manager on an explicit runtime (the model checker's, in `resident-sim`).
    pub fn with_runtime(loader: L, config: ManagerConfig, runtime: R) -> Result<Self, InvalidConfig> {
        config.validate()?;
        Ok(Self::build(loader, config, runtime))
    }

    fn build(loader: L, config: ManagerConfig, runtime: R) -> Self {
        let registry = Arc::new(Registry::new(&runtime));
        let table = Arc::new(runtime.monitor(Table::new(Arc::clone(&registry))));
        let changes = Arc::new(Signal::new(&runtime));
        Self { loader, runtime, config, table, registry, changes }
    }

    /// The configuration this manager runs with.
    pub fn config(&self) -> &ManagerConfig {
        &self.config
    }

    /// The loader this manager loads with.
    pub fn loader(&self) -> &L {
        &self.loader
    }

    /// Whether the manager is shut down, and whether `id` is registered: one look at the table.
    fn state_of(&self, id: &ModelId) -> (bool, bool) {
        self.table.with(|t| (t.registry.is_shut_down(), t.registry.contains_key(id)))
    }

    /// Whether a registration is refused once shut down ([`Table::register`]).
    fn refuses_late(&self) -> bool {
        !self.runtime.mutant(Mutant::REGISTERED_AFTER_SHUTDOWN)
    }

    /// The failed load of `of` that `guard`'s holder waited for: its error, even if a later
    /// caller loaded it afresh before this one got the lock (S-F1). Held across its report.
    fn shared(&self, guard: &LifecycleGuard<L::Model, R>, of: &ModelId) -> Option<ManagerError> {
        let error = Held::<_, R>::new(guard.shared_failure(of)?, self.guards_user_errors());
        tracing::debug!(id = %guard.id(), error = %error.get(), "add: shares a failed load");
        Some(error.into_inner())
    }

    /// How long a drain of leases under `guard` may wait: the drain timeout, or less by its deadline.
    fn drain_bound(&self, guard: &LifecycleGuard<L::Model, R>) -> std::time::Duration {
        guard.deadline().bound(&self.runtime, self.config.lease_drain_timeout(), Mutant::DEADLINE_SKIPS_DRAIN)
    }

    fn check_guard(&self, guard: &LifecycleGuard<L::Model, R>) -> Result<(), ManagerError> {
        let mine = guard.belongs_to(&self.table);
        mine.then_some(()).ok_or_else(|| ManagerError::ForeignGuard { id: guard.id().clone() })
    }
}

// ---- The layer-facing steps ---------------------------------------------------------------------

impl<L: Loader, R: Runtime> Manager for ModelManager<L, R> {
    type Model = L::Model;
    type Runtime = R;

    fn runtime(&self) -> &R {
        &self.runtime
    }

    fn changes(&self) -> &Signal<R> {
        &self.changes
    }

    fn lock_until(&self, id: &ModelId, until: Deadline) -> Result<LifecycleGuard<L::Model, R>, ManagerError> {
        let timeout = until.bound(&self.runtime, self.config.lock_timeout(), Mutant::DEADLINE_SKIPS_LOCK);
        Reservation::new(&self.table, id, &self.changes)
            .acquire(timeout, until)
            .map_err(|_| telemetry::refused(ManagerError::LockTimeout { id: id.clone(), waited: timeout }))
    }

    fn try_lock(&self, id: &ModelId) -> Option<LifecycleGuard<L::Model, R>> {
        Reservation::new(&self.table, id, &self.changes).try_acquire()
    }

    /// Waits at most [`ManagerConfig::lock_timeout`] (in [`ManagerExt::lock`]) for another
    /// mutation of the same resolved id. A loader panic registers nothing and goes back to this
    /// caller only. A loader error registers nothing either, and is shared (SPEC 1.9): the
    /// callers that were waiting for this load of the same model (they reserved the id before
    /// it failed) get the same [`ManagerError::Load`], its source shared, without loading
    /// again; a caller that arrives after the failure loads afresh, unless the negative cache
    /// ([`ManagerConfig::with_failure_cache`]) still remembers it. Waiters that add another
    /// model under the same alias load their own.
    fn add_locked(
        &self,
        guard: &LifecycleGuard<L::Model, R>,
        canonical: &ModelId,
    ) -> Result<Added, ManagerError> {
        self.check_guard(guard)?;
        let resolved = guard.id();
        let (shut_down, registered) = self.state_of(resolved);
        if shut_down && !self.runtime.mutant(Mutant::ADD_AFTER_SHUTDOWN) {
            return Err(telemetry::refused(ManagerError::ShutDown { id: resolved.clone() }));
        }
        if let Some(error) = self.shared(guard, canonical) {
            return Err(error);
        }
        if registered {
            tracing::debug!(id = %resolved, "add: warm");
            return Ok(Added::Warm);
        }
        tracing::debug!(id = %resolved, %canonical, generation = guard.generation(), "add: loading");
        let started = self.runtime.now();
        match self.loader.load_as(resolved, canonical, guard.deadline()) {
            Ok(model) => {
                let took = self.runtime.now().saturating_sub(started);
                let slot = Arc::new(ModelSlot::new(resolved.clone(), model, &self.changes));
                let inside = self.runtime.mutant(Mutant::FAILURE_DROPPED_IN_MONITOR);
                let displaced = self.table.with(|t| {
                    let old = t.register(resolved.clone(), slot, self.refuses_late())?;
                    // The historical bug drops the failures it forgets (user code) in here.
                    Ok((old, (!inside).then_some(t.loaded(resolved))))
                });
                drop(displaced.map_err(|slot| self.refused_late(resolved, slot))?);
                tracing::debug!(id = %resolved, "add: loaded");
                telemetry::loaded(canonical, took);
                Ok(Added::Loaded)
            }
            Err(error) => {
                if self.runtime.mutant(Mutant::RETIRE_ON_LOAD_FAILURE) {
                    self.table.with(|t| t.forget(resolved));
                }
                // A bounded wait of this caller's that expired inside the load (its deadline,
                // or a configured wait) is its own error: never shared, never remembered
                // (S-F2). Only a failure of the load itself is.
                let expired = crate::error::is_wait_expiry(&*error);
                let error = ManagerError::Load { id: resolved.clone(), source: SourceError::new(error) };
                // Held across the reports (user code): a panicking one drops it under a catch.
                let guarded = self.guards_user_errors();
                let error = Held::<_, R>::new(error, guarded);
                if !expired || self.runtime.mutant(Mutant::EXPIRY_SHARED_AS_FAILURE) {
                    guard.record_failure(canonical, error.get(), self.config.failure_cache());
                }
                tracing::debug!(id = %resolved, error = %error.get(), expired, "add: load failed");
                Err(telemetry::load_failed::<R>(error.into_inner(), guarded))
            }
        }
    }

    /// New leases are refused while it waits (at most [`ManagerConfig::lease_drain_timeout`])
    /// for live leases to end; then the model's [`Model::unload`] runs. If the wait times out or
    /// the unload fails, the model stays registered and usable and the error is returned.
    fn remove_locked(&self, guard: &LifecycleGuard<L::Model, R>) -> Result<(), ManagerError> {
        self.check_guard(guard)?;
        let id = guard.id();
        let slot = self.registry.get(id).ok_or_else(|| ManagerError::NotFound { id: id.clone() })?;
        let closed = if self.runtime.mutant(Mutant::UNLOAD_WHILE_LEASED) {
            None
        } else {
            Some(slot.close(self.drain_bound(guard))?)
        };
        let unloaded = self.unload(guard, &slot, closed);
        self.unloaded(id, slot, unloaded)
    }

    /// Registers `model` under the guard's id if nothing is registered there, without calling
    /// the loader; a failed load the id's callers share is forgotten, as by a load.
    fn register_locked(
        &self,
        guard: &LifecycleGuard<L::Model, R>,
        model: L::Model,
    ) -> Result<(), RegisterError<L::Model>> {
        if let Err(error) = self.check_guard(guard) {
            return Err(RegisterError::new(error, model));
        }
        let id = guard.id();
        let overwrite = self.runtime.mutant(Mutant::REGISTER_OVERWRITES);
        let model = match self.state_of(id) {
            (true, _) => model,
            (false, true) if !overwrite => {
                return Err(RegisterError::new(ManagerError::AlreadyRegistered { id: id.clone() }, model));
            }
            // Registered unless a shutdown began since the look ([`Table::register`]); the
            // mutant's old model (if any) is dropped here, outside the table monitor.
            (false, _) => match self.table.with(|t| {
                if self.refuses_late() && t.registry.is_shut_down() {
                    return Err(model);
                }
                let slot = Arc::new(ModelSlot::new(id.clone(), model, &self.changes));
                Ok((t.loaded(id), t.registry.insert(id.clone(), slot)))
            }) {
                Ok(old) => {
                    // Dropped before the report (user code): it may hold a loader's errors.
                    drop(old);
                    tracing::debug!(%id, "registered a model built elsewhere");
                    return Ok(());
                }
                Err(model) => model,
            },
        };
        // Held across the refusal's report (user code).
        let model =
            Held::<_, R>::new(model, !self.runtime.mutant(Mutant::REGISTERED_MODEL_DROPPED_IN_UNWIND));
        let refused = telemetry::refused(ManagerError::ShutDown { id: id.clone() });
        Err(RegisterError::new(refused, model.into_inner()))
    }

    /// Unloads the model only if no lease is live at its point of no return (a non-blocking
    /// close); a lease that loses the race to the close gets `NotFound`. Never waits.
    fn evict_locked(&self, guard: &LifecycleGuard<L::Model, R>) -> Result<Eviction, ManagerError> {
        self.check_guard(guard)?;
        if self.runtime.mutant(Mutant::EVICT_DRAINS_LEASES) {
            return self.evict_draining_leases(guard);
        }
        let Some(slot) = self.registry.get(guard.id()) else {
            return Ok(Eviction::NotRegistered);
        };
        let Some(closed) = slot.try_close() else {
            tracing::debug!(id = %guard.id(), "evict: in use, skipped");
            return Ok(Eviction::InUse);
        };
        let unloaded = self.unload(guard, &slot, Some(closed));
        self.unloaded(guard.id(), slot, unloaded).map(|()| Eviction::Evicted)
    }

    fn lease_until(&self, id: &str, deadline: Deadline) -> Result<Lease<L::Model, R>, ManagerError> {
        let timeout =
            || deadline.bound(&self.runtime, self.config.lock_timeout(), Mutant::DEADLINE_SKIPS_LEASE);
        loop {
            match self.lookup(id)? {
                // A version replaced after the lookup sends the lease to the registry again.
                Found::Slot(slot) => {
                    if let Some(lease) = slot.lease(timeout)? {
                        return Ok(lease);
                    }
                }
                Found::Swapping(swap) => {
                    let waited = timeout();
                    if swap.wait(waited).is_err() {
                        let id = ModelId::new(id)?;
                        return Err(telemetry::lease_refused(ManagerError::LockTimeout { id, waited }));
                    }
                }
            }
        }
    }

    /// Loads the new version with the old one still serving, switches the registry to it in
    /// one step (leases from then on get the new version; a lease that looked up the old one
    /// just before looks again), drains the old version's leases (at most
    /// [`ManagerConfig::lease_drain_timeout`] and the guard's deadline), then unloads it. A
    /// failed load changes nothing. Nothing registered: the new version is added.
    fn replace_locked(
        &self,
        guard: &LifecycleGuard<L::Model, R>,
        canonical: &ModelId,
    ) -> Result<Replaced, ManagerError> {
        self.check_guard(guard)?;
        let id = guard.id();
        match self.state_of(id) {
            (true, _) => return Err(telemetry::refused(ManagerError::ShutDown { id: id.clone() })),
            (false, false) => return self.add_locked(guard, canonical).map(|_| Replaced::Added),
            (false, true) => {}
        }
        if self.runtime.mutant(Mutant::REPLACE_REMOVES_FIRST) {
            self.remove_locked(guard)?;
            return self.add_locked(guard, canonical).map(|_| Replaced::Unloaded);
        }
        tracing::debug!(%id, %canonical, "replace: loading the new version");
        let started = self.runtime.now();
        let loaded = if self.runtime.mutant(Mutant::REPLACE_ADOPTS_CACHED) {
            self.loader.load_as(id, canonical, guard.deadline())
        } else {
            self.loader.reload_as(id, canonical, guard.deadline())
        };
        let model = loaded.map_err(|error| {
            let error = ManagerError::Load { id: id.clone(), source: SourceError::new(error) };
            telemetry::load_failed::<R>(error, self.guards_user_errors())
        })?;
        let took = self.runtime.now().saturating_sub(started);
        let new = Arc::new(ModelSlot::new(id.clone(), model, &self.changes));
        let switched = self.table.with(|t| t.register(id.clone(), new, self.refuses_late()));
        let old = switched.map_err(|new| self.refused_late(id, new))?;
        let old = old.expect("registered: checked under the lifecycle lock");
        let drain = self.drain_bound(guard);
        // Reported once the old version is settled and dropped: a recorder is user code and
        // may panic.
        Ok(self.settle_replaced(id, old, drain, || telemetry::loaded(canonical, took)))
    }

    /// Drains the old version's leases (new leases wait for the new version), unloads and drops
    /// it, then loads the new version into its slot (see [`ManagerExt::replace_in_place`]).
    fn replace_in_place_locked(
        &self,
        guard: &LifecycleGuard<L::Model, R>,
        canonical: &ModelId,
    ) -> Result<Replaced, ManagerError> {
        self.check_guard(guard)?;
        let id = guard.id();
        match (self.registry.is_shut_down(), self.registry.get(id)) {
            (true, _) => Err(telemetry::refused(ManagerError::ShutDown { id: id.clone() })),
            (false, None) => self.add_locked(guard, canonical).map(|_| Replaced::Added),
            (false, Some(old)) => self.swap_in_place(guard, old, canonical),
        }
    }

    fn contains(&self, id: &str) -> bool {
        self.registry.contains_key(id)
    }

    /// Reads the slot's lease count under the registry's read lock, so that no reference to the
    /// model outlives the call: a hint taken under a layer's bookkeeping lock must never end up
    /// dropping a model there.
    fn in_use(&self, id: &str) -> bool {
        self.registry.with_slot(id, |slot| slot.is_some_and(|slot| slot.leases() > 0))
    }

    /// The base pins nothing: pins live in the layers above it.
    fn is_pinned(&self, _id: &str) -> bool {
        false
    }

    /// Under the registry's read lock (as for [`Manager::in_use`]); the designation keeps no
    /// reference to the model.
    fn designate(&self, id: &str) -> Option<Designation<R>> {
        self.registry.with_slot(id, |slot| slot.map(ModelSlot::designate))
    }

    fn is_locked(&self, id: &str) -> bool {
        // A layer that skips a victim for its lock hears of its release, even a quiet one.
        self.table.with(|t| t.entry(id)).is_some_and(|entry| entry.lock.is_held_noting())
    }

    fn ids(&self) -> Vec<ModelId> {
        self.registry.ids()
    }

    fn is_shut_down(&self) -> bool {
        self.registry.is_shut_down()
    }

    fn removals(&self) -> Option<u64> {
        Some(self.registry.removals())
    }

    fn unpins(&self) -> Option<u64> {
        Some(0)
    }

    fn begin_shutdown(&self) -> Vec<ModelId> {
        let ids = self.table.with(|t| t.shut_down(|bug| self.runtime.mutant(bug)));
        // Adds waiting in a layer for room must see the shutdown now.
        self.changes.bump_at(Mutant::LOST_WAKEUP_SHUTDOWN);
        tracing::info!(ids = ids.len(), "shutting down");
        ids
    }

    fn snapshot(&self) -> Snapshot {
        let (registered, entries) = self.table.with(|t| (t.registry.ids(), t.lifecycle()));
        let lifecycle = entries
            .into_iter()
            .map(|(id, generation, reservations, entry)| LifecycleInfo {
                id,
                generation,
                reservations,
                locked: entry.lock.is_held(),
            })
            .collect();
        Snapshot { registered, lifecycle }
    }

    /// The base keeps no pins; it only checks the guard.
    fn pin_locked(&self, guard: &LifecycleGuard<L::Model, R>) -> Result<(), ManagerError> {
        self.check_guard(guard)
    }

    /// The base keeps no pins; it only checks the guard.
    fn unpin_locked(&self, guard: &LifecycleGuard<L::Model, R>) -> Result<(), ManagerError> {
        self.check_guard(guard)
    }
}

impl<L: Loader, R: Runtime> fmt::Debug for ModelManager<L, R> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ModelManager")
            .field("registered", &Manager::ids(self))
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}
