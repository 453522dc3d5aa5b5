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
//! `lifecycle lock (per id)` → `table monitor` → nothing; `lifecycle lock` → `slot use-state
//! monitor` → nothing. The table monitor and the use-state monitors are never held while
//! waiting, loading, unloading or calling any user code, and no thread ever waits for a second
//! lifecycle lock while holding one.

mod config;
mod lease;
mod lifecycle;
mod model;
mod table;

use std::fmt;

pub use config::ManagerConfig;
pub use lease::Lease;
pub use model::{Loader, Model};

use lease::Slot;
use lifecycle::{Hold, Reservation};
use table::Table;

use crate::error::{InvalidConfig, ManagerError, SourceError};
use crate::id::ModelId;
use crate::mutants::{Mutant, MutantSet, on};
use crate::runtime::{Arc, Monitor, Runtime, StdRuntime};

/// How a successful [`ModelManager::add_model`] went.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Added {
    /// The model was already registered; nothing was loaded.
    Warm,
    /// The loader ran and the model is now registered.
    Loaded,
}

/// One lifecycle entry, as seen by [`ModelManager::snapshot`].
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

/// Keeps models resident: loads each resolved id at most once at a time, shares it through
/// leases, and unloads it only when no lease is left.
///
/// ```
/// use resident::{BoxError, Loader, Model, ModelId, ModelManager};
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
    table: R::Monitor<Table<L::Model, R>>,
    mutants: MutantSet,
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

impl<L: Loader, R: Runtime> ModelManager<L, R> {
    /// A manager on an explicit runtime (the model checker's, in `resident-sim`).
    pub fn with_runtime(loader: L, config: ManagerConfig, runtime: R) -> Result<Self, InvalidConfig> {
        config.validate()?;
        Ok(Self::build(loader, config, runtime))
    }

    fn build(loader: L, config: ManagerConfig, runtime: R) -> Self {
        let table = runtime.monitor(Table::new());
        Self { loader, runtime, config, table, mutants: MutantSet::NONE }
    }

    /// Switches historical bugs back on (model checking only).
    #[cfg(feature = "mutants")]
    pub fn with_mutants(mut self, mutants: MutantSet) -> Self {
        self.mutants = mutants;
        self
    }

    /// The configuration this manager runs with.
    pub fn config(&self) -> &ManagerConfig {
        &self.config
    }

    /// The loader this manager loads with.
    pub fn loader(&self) -> &L {
        &self.loader
    }

    /// Makes sure the model `id` is registered under its resolved id (`alias` if given, else
    /// `id`), loading it with the canonical `id` if it is not.
    ///
    /// Waits at most [`ManagerConfig::lock_timeout`] for another mutation of the same resolved
    /// id. A loader error or panic registers nothing and goes back to this caller only.
    pub fn add_model(&self, id: &str, alias: Option<&str>) -> Result<Added, ManagerError> {
        let canonical = ModelId::new(id)?;
        let resolved = match alias {
            Some(alias) => ModelId::new(alias)?,
            None => canonical.clone(),
        };
        let hold = self.hold(&resolved)?;
        if self.table.with(|t| t.registry.contains_key(&resolved)) {
            tracing::debug!(id = %resolved, "add: warm");
            return Ok(Added::Warm);
        }
        tracing::debug!(id = %resolved, %canonical, generation = hold.generation(), "add: loading");
        match self.loader.load(&canonical) {
            Ok(model) => {
                let slot = Arc::new(Slot::new(resolved.clone(), model, &self.runtime));
                self.table.with(|t| t.registry.insert(resolved.clone(), slot));
                tracing::debug!(id = %resolved, "add: loaded");
                Ok(Added::Loaded)
            }
            Err(error) => {
                if on(self.mutants, Mutant::RetireOnLoadFailure) {
                    self.table.with(|t| t.forget(&resolved));
                }
                tracing::debug!(id = %resolved, %error, "add: load failed");
                Err(ManagerError::Load { id: resolved, source: SourceError::new(error) })
            }
        }
    }

    /// Unloads and unregisters the model registered under the resolved id `id`.
    ///
    /// New leases are refused while it waits (at most
    /// [`ManagerConfig::lease_drain_timeout`]) for live leases to end; then the model's
    /// [`Model::unload`] runs. If the wait times out or the unload fails, the model stays
    /// registered and usable and the error is returned.
    pub fn remove(&self, id: &str) -> Result<(), ManagerError> {
        let id = ModelId::new(id)?;
        let hold = self.hold(&id)?;
        let slot = self
            .table
            .with(|t| t.registry.get(&id).cloned())
            .ok_or_else(|| ManagerError::NotFound { id: id.clone() })?;
        let closed = if on(self.mutants, Mutant::UnloadWhileLeased) {
            None
        } else {
            Some(slot.close(self.config.lease_drain_timeout())?)
        };
        tracing::debug!(id = %id, generation = hold.generation(), "remove: unloading");
        if let Err(error) = slot.model.unload() {
            tracing::debug!(id = %id, %error, "remove: unload failed");
            return Err(ManagerError::Unload { id, source: SourceError::new(error) });
        }
        if let Some(closed) = closed {
            closed.commit();
        }
        self.table.with(|t| {
            t.registry.remove(&id);
            if on(self.mutants, Mutant::RetireWhileHeld) {
                t.forget(&id);
            }
        });
        tracing::debug!(id = %id, "remove: unloaded");
        if on(self.mutants, Mutant::RetireAfterRelease) {
            hold.release_then_forget();
        }
        Ok(())
    }

    /// A lease on the model registered under the resolved id `id`, without any lifecycle lock.
    pub fn lease(&self, id: &str) -> Result<Lease<L::Model, R>, ManagerError> {
        let slot = self.slot(id)?;
        slot.lease()
    }

    /// Runs `f` on the model registered under `id`, holding a lease for the duration.
    pub fn infer<O>(&self, id: &str, f: impl FnOnce(&L::Model) -> O) -> Result<O, ManagerError> {
        let lease = self.lease(id)?;
        Ok(f(&lease))
    }

    /// Whether a model is registered under the resolved id `id` (a hint: it may change at once).
    pub fn contains(&self, id: &str) -> bool {
        self.table.with(|t| t.registry.contains_key(id))
    }

    /// How many models are registered.
    pub fn len(&self) -> usize {
        self.table.with(|t| t.registry.len())
    }

    /// Whether no model is registered.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The registered resolved ids, in order.
    pub fn ids(&self) -> Vec<ModelId> {
        self.table.with(|t| t.registry.keys().cloned().collect())
    }

    /// Registry and lifecycle table, read under one lock.
    pub fn snapshot(&self) -> Snapshot {
        let (registered, entries) =
            self.table.with(|t| (t.registry.keys().cloned().collect(), t.lifecycle()));
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

    fn slot(&self, id: &str) -> Result<Arc<Slot<L::Model, R>>, ManagerError> {
        let id = ModelId::new(id)?;
        self.table.with(|t| t.registry.get(&id).cloned()).ok_or(ManagerError::NotFound { id })
    }

    fn hold(&self, id: &ModelId) -> Result<Hold<'_, L::Model, R>, ManagerError> {
        let timeout = self.config.lock_timeout();
        Reservation::new(&self.table, id, &self.runtime, self.mutants)
            .acquire(timeout)
            .map_err(|_| ManagerError::LockTimeout { id: id.clone(), waited: timeout })
    }
}

impl<L: Loader, R: Runtime> fmt::Debug for ModelManager<L, R> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ModelManager")
            .field("registered", &self.ids())
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}
