//! In-place replaces ([`ManagerExt::replace_in_place`](crate::ManagerExt::replace_in_place)).
//!
//! A replace normally loads the new version beside the old one. In place, the old version's
//! leases are drained first, it is unloaded and dropped, and only then is the new version loaded
//! into the slot it left: for a model that cannot have two versions resident at once (one slot
//! per device, or not enough memory for both). Meanwhile the id has no model in the registry;
//! the table keeps a [`Swap`] for it, and a lease that finds one waits (bounded by its own
//! timeout) for the swap to settle and then looks the id up again. It gets the new version, or
//! finds the id gone if the new version failed to load; never `NotFound` while the swap is
//! under way.

use super::lease::ModelSlot;
use super::registry::{Found, Swap};
use super::{LifecycleGuard, Loader, Model, ModelManager, Replaced};
use crate::error::{ManagerError, SourceError};
use crate::held::Held;
use crate::id::ModelId;
use crate::mutants::Mutant;
use crate::runtime::{Arc, Monitor, Runtime};
use crate::telemetry;

/// Lists a swap in the table while it lives; on every exit (a panic too) takes it out and
/// wakes its waiters, after whatever the exit left in the registry.
struct Listed<'a, L: Loader, R: Runtime> {
    manager: &'a ModelManager<L, R>,
    id: &'a ModelId,
    swap: Arc<Swap<R>>,
}

impl<'a, L: Loader, R: Runtime> Listed<'a, L, R> {
    fn new(manager: &'a ModelManager<L, R>, id: &'a ModelId) -> Self {
        let swap = Arc::new(Swap::new(&manager.runtime));
        manager.registry.insert_swap(id.clone(), Arc::clone(&swap));
        Self { manager, id, swap }
    }
}

impl<L: Loader, R: Runtime> Drop for Listed<'_, L, R> {
    fn drop(&mut self) {
        self.manager.registry.remove_swap(self.id, &self.swap);
        self.swap.settle(&self.manager.runtime);
    }
}

impl<L: Loader, R: Runtime> ModelManager<L, R> {
    /// The base's in-place replace of the registered `old` (see the module docs): drains its
    /// leases (at most [`ManagerConfig::lease_drain_timeout`](super::ManagerConfig) and the
    /// guard's deadline; `Busy` and nothing changed if they outlive it), unloads it (`Unload`
    /// and nothing changed if that fails), drops it, and loads the new version. A failed load
    /// leaves the id unregistered.
    pub(super) fn swap_in_place(
        &self,
        guard: &LifecycleGuard<L::Model, R>,
        old: Arc<ModelSlot<L::Model, R>>,
        canonical: &ModelId,
    ) -> Result<Replaced, ManagerError> {
        let id = guard.id();
        // Declared before the close: on an early exit the slot reopens first, then the swap
        // ends, so a lease never finds the slot closed with no swap listed.
        let listed = Listed::new(self, id);
        let closed = old.close_for_swap(self.drain_bound(guard))?;
        tracing::debug!(%id, %canonical, "replace in place: unloading the old version");
        if let Err(error) = old.model().unload() {
            let error = ManagerError::Unload { id: id.clone(), source: SourceError::new(error) };
            // Held across the report (user code): a panicking one drops it under a catch.
            let error = Held::<_, R>::new(error, self.guards_user_errors());
            tracing::debug!(%id, error = %error.get(), "replace in place: the old version's unload failed; kept");
            return Err(error.into_inner());
        }
        closed.commit();
        let removed = self.registry.remove(&self.runtime, id);
        // The old version's `Drop` (user code) runs here, under the lifecycle lock only (or with
        // the end of a lease still ending on another thread).
        drop((removed, old));
        tracing::debug!(%id, %canonical, "replace in place: loading the new version");
        let started = self.runtime.now();
        let model = self.loader.reload_as(id, canonical, guard.deadline()).map_err(|error| {
            let error = ManagerError::Load { id: id.clone(), source: SourceError::new(error) };
            telemetry::load_failed::<R>(error, self.guards_user_errors())
        })?;
        let took = self.runtime.now().saturating_sub(started);
        let new = Arc::new(ModelSlot::new(id.clone(), model, &self.changes));
        // Dropped here: the id had no model while the swap was under way.
        let registered = self.table.with(|t| t.register(id.clone(), new, self.refuses_late()));
        let _none = registered.map_err(|new| self.refused_late(id, new))?;
        drop(listed);
        telemetry::loaded(canonical, took);
        Ok(Replaced::Unloaded)
    }
}

impl<L: Loader, R: Runtime> ModelManager<L, R> {
    /// What a lease of `id` finds: its slot, or the in-place replace it must wait for. The id
    /// is validated only on a miss (every id the registry holds is valid): a malformed one is
    /// `InvalidId`, never `NotFound`.
    pub(super) fn lookup(&self, id: &str) -> Result<Found<L::Model, R>, ManagerError> {
        let refuse = !self.runtime.mutant(Mutant::LEASE_AFTER_SHUTDOWN);
        let swap_gone = self.runtime.mutant(Mutant::SWAP_LEASE_NOT_FOUND);
        let found = if refuse && self.registry.is_shut_down() {
            Err(())
        } else {
            Ok(self.registry.lookup(id, swap_gone))
        };
        match found {
            Ok(Some(found)) => Ok(found),
            Ok(None) => Err(ManagerError::NotFound { id: ModelId::new(id)? }),
            Err(()) => Err(telemetry::refused(ManagerError::ShutDown { id: ModelId::new(id)? })),
        }
    }
}
