//! The production composition: a manager stack per device whose loader is a user of that
//! device's cache in one [`CacheGroup`](crate::cache::CacheGroup), so that every device shares
//! one copy of each model's CPU weights.
//!
//! [`CacheLoader`] is the one loader that does it, for any [`WeightFiles`]: check the
//! declaration against the budgets, then [`DeviceCache::get_or_load_current`] (a hit, a peer's
//! canonical adopted as it is, or the files read once for the whole group — only weights read
//! from the files as they are now), then [`LoadedModel::lock_on_device_until`], every wait
//! bounded by the call's deadline. `burn::SharedLoader` is a thin user of it over SafeTensors
//! files, and the model checker explores it as it is, over scripted files.
//!
//! [`LoadedModel::lock_on_device_until`]: crate::cache::LoadedModel::lock_on_device_until

use std::borrow::Cow;
use std::fmt;

use crate::cache::{Declared, DeviceCache, DeviceGuard, DeviceWeights, Sourced};
use crate::deadline::Deadline;
use crate::error::BoxError;
use crate::id::ModelId;
use crate::manager::{Loader, Model};
use crate::mutants::Mutant;
use crate::runtime::{Arc, Runtime, StdRuntime};

// ---- The files ----------------------------------------------------------------------------------

/// Where a [`CacheLoader`] reads each model's weights from (model files on disk; scripted
/// files in the model checker). Every method is user code: the loader calls it with no lock
/// held.
pub trait WeightFiles: Send + Sync + 'static {
    /// The weights read from a file.
    type Weights: DeviceWeights + Sourced;
    /// What the checks before a read found that the read needs (a file's length, say).
    type Plan;

    /// Checks `id`'s file against the budgets of `cache` (and its group) before anything is
    /// read, and declares what its weights will hold (their bytes, and the peak of the read):
    /// the cache reserves that before the read starts.
    fn plan<R: Runtime>(
        &self,
        id: &ModelId,
        cache: &DeviceCache<Self::Weights, R>,
    ) -> Result<(Declared, Self::Plan), BoxError>;

    /// The version of `id`'s file as it is now (a file's length, modification time and inode).
    fn current(&self, id: &ModelId) -> Result<<Self::Weights as Sourced>::Source, BoxError>;

    /// Reads `id`'s weights, as `plan` found the file.
    fn read(&self, id: &ModelId, plan: &Self::Plan) -> Result<Self::Weights, BoxError>;

    /// The bytes a model built from `weights` holds ([`Model::size_bytes`]).
    fn size_bytes(&self, weights: &Self::Weights) -> u64;

    /// The bytes `id`'s weights will hold, if the file says so without a read
    /// ([`Loader::declared_bytes`]); `None` by default.
    fn declared_bytes(&self, id: &ModelId) -> Result<Option<u64>, BoxError> {
        let _ = id;
        Ok(None)
    }
}

// ---- The loader ---------------------------------------------------------------------------------

/// One device's loader over its cache: see the [module docs](self).
pub struct CacheLoader<F: WeightFiles, R: Runtime = StdRuntime> {
    files: F,
    cache: Arc<DeviceCache<F::Weights, R>>,
}

impl<F: WeightFiles, R: Runtime> CacheLoader<F, R> {
    /// A loader reading `files` through `cache`.
    pub fn new(files: F, cache: Arc<DeviceCache<F::Weights, R>>) -> Self {
        Self { files, cache }
    }

    /// This device's cache.
    pub fn cache(&self) -> &Arc<DeviceCache<F::Weights, R>> {
        &self.cache
    }

    /// The group's key of `id`'s weights: the id with `%` and `:` escaped (`%25`, `%3A`). Each
    /// id is a file of its own, so no id's key may name a submodel of another's (`m:v2` of
    /// `m`): a drop of a key covers its submodels, and a replace or a rewrite of `m` would drop
    /// the weights of `m:v2`, whose file did not change.
    fn key<'a>(&self, id: &'a ModelId) -> Cow<'a, str> {
        if self.cache.runtime().mutant(Mutant::FILE_KEYS_NEST) {
            return Cow::Borrowed(id.as_str());
        }
        escaped(id.as_str())
    }

    /// The model `id` from the group if it holds weights of the file as it is now (and not
    /// `fresh`), else from the file (after the budget checks), locked on this device; every
    /// wait ends by `deadline`.
    fn load_from_files(
        &self,
        id: &ModelId,
        fresh: bool,
        deadline: Deadline,
    ) -> Result<DeviceModel<F::Weights, R>, BoxError> {
        let (declared, plan) = self.files.plan(id, &self.cache)?;
        let current = || self.files.current(id);
        let read = || self.files.read(id, &plan);
        let key = self.key(id);
        let loaded = self.cache.get_or_load_current(&key, declared, current, read, fresh, deadline)?;
        let guard = loaded.lock_on_device_until(deadline)?;
        let bytes = self.files.size_bytes(guard.cpu());
        Ok(DeviceModel { guard, bytes })
    }
}

/// `id` with `%` and `:` escaped (`%25`, `%3A`): a key that names no submodel, one per id, at
/// most [`ModelId::MAX_KEY_LEN`] bytes.
fn escaped(id: &str) -> Cow<'_, str> {
    if !id.contains([':', '%']) {
        return Cow::Borrowed(id);
    }
    let mut key = String::with_capacity(id.len() + 8);
    for c in id.chars() {
        match c {
            '%' => key.push_str("%25"),
            ':' => key.push_str("%3A"),
            c => key.push(c),
        }
    }
    Cow::Owned(key)
}

impl<F: WeightFiles, R: Runtime> Loader for CacheLoader<F, R> {
    type Model = DeviceModel<F::Weights, R>;

    /// [`CacheLoader::load_until`] with no deadline of the caller's own.
    fn load(&self, id: &ModelId) -> Result<Self::Model, BoxError> {
        self.load_until(id, Deadline::NONE)
    }

    /// The group's weights of `id` if they were read from the file as it is now, else the file
    /// read once for the whole group (after [`WeightFiles::plan`]'s checks, its declaration
    /// reserved first), then locked on this device. Waits in the group (another device's read
    /// of the file, room in the RAM budget, room on the device) end by `deadline`.
    fn load_until(&self, id: &ModelId, deadline: Deadline) -> Result<Self::Model, BoxError> {
        self.load_from_files(id, false, deadline)
    }

    /// A replace's load: the file is read again whatever the group holds for `id` (the old
    /// version's weights are dropped from it; their holders keep them until they let go).
    fn reload_until(&self, id: &ModelId, deadline: Deadline) -> Result<Self::Model, BoxError> {
        self.load_from_files(id, true, deadline)
    }

    fn declared_bytes(&self, id: &ModelId) -> Result<Option<u64>, BoxError> {
        self.files.declared_bytes(id)
    }
}

impl<F: WeightFiles + fmt::Debug, R: Runtime> fmt::Debug for CacheLoader<F, R> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CacheLoader")
            .field("files", &self.files)
            .field("device", &self.cache.device())
            .finish()
    }
}

// ---- The model it loads -------------------------------------------------------------------------

/// A model served from a device: a lock on its cache record and its device copy. Unloading it
/// (dropping it) unlocks the record; the CPU weights stay in the group until its RAM budget
/// evicts them.
pub struct DeviceModel<W: DeviceWeights, R: Runtime = StdRuntime> {
    guard: DeviceGuard<W, R>,
    bytes: u64,
}

impl<W: DeviceWeights, R: Runtime> DeviceModel<W, R> {
    /// The record lock and device copy.
    pub fn guard(&self) -> &DeviceGuard<W, R> {
        &self.guard
    }
}

impl<W: DeviceWeights, R: Runtime> Model for DeviceModel<W, R> {
    fn size_bytes(&self) -> u64 {
        self.bytes
    }
}

impl<W: DeviceWeights, R: Runtime> fmt::Debug for DeviceModel<W, R> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DeviceModel").field("guard", &self.guard).field("bytes", &self.bytes).finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_id_has_a_key_of_its_own_that_names_no_submodel() {
        let ids = ["m", "m:v2", "m%3Av2", "m%v2", "%", ":", "a/b:c%d", "m:"];
        let keys: std::collections::BTreeSet<_> = ids.iter().map(|id| escaped(id)).collect();
        assert_eq!(keys.len(), ids.len(), "one key per id");
        assert!(keys.iter().all(|key| !key.contains(':')), "no key names a submodel: {keys:?}");
        assert_eq!(escaped("plain/id"), Cow::Borrowed("plain/id"));
        // The longest id, escaped whole, is still a valid key.
        let longest = ":".repeat(ModelId::MAX_LEN);
        assert!(ModelId::validate(&longest).is_ok());
        let key = escaped(&longest);
        assert_eq!(key.len(), ModelId::MAX_KEY_LEN);
        assert!(ModelId::validate_key(&key).is_ok());
        assert!(ModelId::validate_key(&format!("{key}x")).is_err());
    }
}
