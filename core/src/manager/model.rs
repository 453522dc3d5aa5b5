//! What the manager needs from user code: a [`Loader`] that builds models and the [`Model`]s.

use crate::deadline::Deadline;
use crate::error::BoxError;
use crate::id::ModelId;

/// A model that can be kept resident.
///
/// The manager shares a model between concurrent leases, so it must be `Sync`; unloading takes
/// `&self` because it runs only once no lease is left.
pub trait Model: Send + Sync + 'static {
    /// Bytes this model keeps resident (used by byte budgets and metrics).
    fn size_bytes(&self) -> u64;

    /// Releases the model's resources before it is dropped.
    ///
    /// An error keeps the model registered and usable; the error goes back to the caller of
    /// `remove`. A panic propagates to that caller and likewise leaves the model registered.
    /// `replace_in_place` unloads the old version while it is still registered, as `remove`
    /// does: an error or a panic keeps it. `replace` unloads it once the registry has switched
    /// to the new version: an error detaches it
    /// ([`Replaced::Detached`](crate::Replaced::Detached)), and a panic propagates to the
    /// caller of `replace`, the new version serving, while the old version is dropped under a
    /// catch (its own `Drop` may panic too). A model loaded for an add, a replace or an
    /// in-place replace whose registration a shutdown refused meanwhile is unloaded too, then
    /// dropped: an error there is logged (a `tracing` warning) and dropped with it, and a panic
    /// goes to the caller of the add or the replace.
    fn unload(&self) -> Result<(), BoxError> {
        Ok(())
    }
}

/// Builds models from their canonical ids.
///
/// The manager never runs two loads for the same resolved id at once, and never runs a load
/// while holding a global lock, so a slow load does not stall other ids. A load may fail (the
/// error goes back to the caller) or panic (the panic goes back to that caller only).
pub trait Loader: Send + Sync + 'static {
    /// The model type this loader builds.
    type Model: Model;

    /// Builds the model named by the canonical `id` (not the alias).
    fn load(&self, id: &ModelId) -> Result<Self::Model, BoxError>;

    /// [`Loader::load`] for a call with a deadline (SPEC 1.10): a loader whose load waits (for
    /// room in a budget, for another device's load) bounds those waits by `deadline` too. The
    /// default ignores it and calls [`Loader::load`].
    fn load_until(&self, id: &ModelId, deadline: Deadline) -> Result<Self::Model, BoxError> {
        let _ = deadline;
        self.load(id)
    }

    /// Builds the model named by `id` afresh, for a [`replace`](crate::ManagerExt::replace): from
    /// its source as it is now, never from weights kept since an earlier load, not even
    /// unchanged ones (SPEC 1.11). A loader that keeps nothing between loads has nothing to
    /// forget: the default calls [`Loader::load_until`]. One that caches (a cache-backed
    /// loader) drops what it holds for `id` first.
    fn reload_until(&self, id: &ModelId, deadline: Deadline) -> Result<Self::Model, BoxError> {
        self.load_until(id, deadline)
    }

    /// [`Loader::load_until`], told the id the model will be registered under: `registered`
    /// is the id the caller added (an alias of `id`, or `id` itself), which the manager's
    /// per-id guarantees (one load at a time, SPEC I1 and I2) are keyed on. What the manager
    /// calls; the default ignores `registered`. A loader that checks or labels by registration
    /// (the sim's probes) overrides it; a loader that wraps another forwards this method and
    /// [`Loader::reload_as`] to it, or the registration is lost below it.
    fn load_as(
        &self,
        registered: &ModelId,
        id: &ModelId,
        deadline: Deadline,
    ) -> Result<Self::Model, BoxError> {
        let _ = registered;
        self.load_until(id, deadline)
    }

    /// [`Loader::reload_until`], told the id the model will be registered under, as
    /// [`Loader::load_as`]. What a replace calls; the default ignores `registered`.
    fn reload_as(
        &self,
        registered: &ModelId,
        id: &ModelId,
        deadline: Deadline,
    ) -> Result<Self::Model, BoxError> {
        let _ = registered;
        self.reload_until(id, deadline)
    }

    /// The bytes the model named by `id` takes once loaded, if the loader can tell without
    /// loading it (from a file header, a manifest): what a hard budget reserves before `load`
    /// runs. `Ok(None)`, the default: unknown.
    fn declared_bytes(&self, id: &ModelId) -> Result<Option<u64>, BoxError> {
        let _ = id;
        Ok(None)
    }
}
