//! [`SharedLoader`]: one device's loader over a cache group, so that every device shares one
//! copy of each model's CPU weights.

use std::fmt;
use std::path::{Path, PathBuf};

use super::architecture::Architecture;
use super::backend::{Cpu, ServeBackend};
use super::error::BurnError;
use super::file::{infer, model_path};
use super::source::FileIdentity;
use super::weights::{BurnWeights, file_len, header_tensor_bytes, header_tensors};
use crate::cache::{CacheGroup, Declared, DeviceCache, DeviceGuard};
use crate::deadline::Deadline;
use crate::error::BoxError;
use crate::id::ModelId;
use crate::manager::{Loader, Model};
use crate::runtime::Arc;

/// The weights a [`SharedLoader`] keeps in its cache group.
pub type SharedWeights<A, T> = BurnWeights<A, T>;

/// Loads models for one device: the CPU weights come from the group (a record already in this
/// device's cache, or a canonical alive in a peer's, adopted as it is) or else from
/// `<dir>/<id>.safetensors`; the model is then locked on the device until the manager unloads
/// it.
pub struct SharedLoader<A: Architecture, T: ServeBackend = Cpu> {
    arch: Arc<A>,
    dir: PathBuf,
    group: Arc<CacheGroup<SharedWeights<A, T>>>,
    cache: Arc<DeviceCache<SharedWeights<A, T>>>,
}

impl<A: Architecture, T: ServeBackend> SharedLoader<A, T> {
    /// A loader for `device`, whose cache joins `group`. Fails (and creates no cache) if the
    /// backend cannot serve `device`, for instance CUDA without a driver.
    pub fn new(
        arch: Arc<A>,
        dir: &Path,
        group: &Arc<CacheGroup<SharedWeights<A, T>>>,
        device: &str,
    ) -> Result<Self, BurnError> {
        T::device(device)?;
        Ok(Self { arch, dir: dir.to_owned(), group: Arc::clone(group), cache: group.cache(device) })
    }

    /// This device's cache.
    pub fn cache(&self) -> &Arc<DeviceCache<SharedWeights<A, T>>> {
        &self.cache
    }

    /// The model `id` from the group if it holds weights of the file as it is now (and not
    /// `fresh`), else from the file (after the budget checks), locked on this device.
    fn load_from_file(
        &self,
        id: &ModelId,
        fresh: bool,
        deadline: Deadline,
    ) -> Result<Served<A, T>, BoxError> {
        let key = id.as_str();
        let path = model_path(&self.dir, key)?;
        let (declared, largest) = self.check_budgets(&path)?;
        let len = file_len(&path)?;
        let peak = load_peak(declared, largest, len);
        let current = || FileIdentity::of_path(&path);
        let load = || {
            // The file may have grown since its length was checked and reserved for.
            let weights = BurnWeights::load_checked(Arc::clone(&self.arch), &path, Some(len))?;
            match weights.stats().bytes {
                actual if actual > declared => {
                    Err(BurnError::OverDeclared { path: path.clone(), declared, actual })
                }
                _ => Ok(weights),
            }
        };
        let declared = Declared::new(declared).with_peak(peak);
        let loaded = self.cache.get_or_load_current(key, declared, current, load, fresh, deadline)?;
        Ok(Served { arch: Arc::clone(&self.arch), guard: loaded.lock_on_device_until(deadline)? })
    }

    /// Refuses a file that cannot fit, before any module or tensor is built: its length
    /// against the RAM budget, then the bytes its header declares for the architecture's
    /// tensors ([`Architecture::tensor_names`]; every tensor of the file if it does not say)
    /// against the RAM budget and (for a backend whose device copies cost device memory) this
    /// cache's device budget. Returns those declared bytes, and the largest tensor's.
    fn check_budgets(&self, path: &Path) -> Result<(u64, u64), BurnError> {
        let too_large =
            |bytes, budget, cap| BurnError::TooLarge { path: path.to_owned(), bytes, budget, cap };
        let cap = self.group.budget().cap();
        let len = file_len(path)?;
        if len > cap {
            return Err(too_large(len, "RAM budget", cap));
        }
        let (tensors, largest) = header_tensors(path, self.arch.tensor_names().as_deref())?;
        if tensors > cap {
            return Err(too_large(tensors, "RAM budget", cap));
        }
        match self.cache.device_budget_cap() {
            Some(device) if !T::SHARES_CPU_TENSORS && tensors > device => {
                Err(too_large(tensors, "device budget", device))
            }
            _ => Ok((tensors, largest)),
        }
    }
}

impl<A: Architecture, T: ServeBackend> Loader for SharedLoader<A, T> {
    type Model = Served<A, T>;

    /// The group's [`DeviceCache::get_or_put`]: a hit, or a peer's canonical adopted as it is,
    /// or the file read once for the whole group (after the budget checks), with the header's
    /// bytes declared and the load's peak ([`load_peak`]) reserved before any module is built.
    /// A module larger than its declaration is refused ([`BurnError::OverDeclared`]).
    fn load(&self, id: &ModelId) -> Result<Served<A, T>, BoxError> {
        self.load_until(id, Deadline::NONE)
    }

    /// [`SharedLoader::load`] whose waits in the group (another device's load of the file, room
    /// in the RAM budget, room on the device) end by `deadline` at the latest
    /// ([`DeviceCache::get_or_put_until`], [`LoadedModel::lock_on_device_until`]).
    ///
    /// Weights held in the group serve only while the file is the one they were read from
    /// ([`FileIdentity`]: its length, modification time and inode): after a rewrite, the next
    /// load reads the file again ([`DeviceCache::get_or_load_current`]).
    ///
    /// [`LoadedModel::lock_on_device_until`]: crate::cache::LoadedModel::lock_on_device_until
    fn load_until(&self, id: &ModelId, deadline: Deadline) -> Result<Served<A, T>, BoxError> {
        self.load_from_file(id, false, deadline)
    }

    /// A replace's load: the file is read again whatever the group holds for `id` (the old
    /// version's weights are dropped from it; their holders keep them until they let go).
    fn reload_until(&self, id: &ModelId, deadline: Deadline) -> Result<Served<A, T>, BoxError> {
        self.load_from_file(id, true, deadline)
    }

    /// The bytes of the architecture's tensors as `<dir>/<id>.safetensors` declares them in
    /// its header (read without loading them; every tensor of the file if the architecture does
    /// not name its own).
    fn declared_bytes(&self, id: &ModelId) -> Result<Option<u64>, BoxError> {
        let path = model_path(&self.dir, id.as_str())?;
        Ok(Some(header_tensor_bytes(&path, self.arch.tensor_names().as_deref())?))
    }
}

/// The most a load of a file of `file` bytes declaring `tensors` bytes, the largest of them
/// `largest`, allocates at once: the file's bytes, read into memory for decoding; the module
/// the architecture initialises; the tensors decoded from the file while that module still
/// holds its own; and a transient copy of one tensor as it is converted. Measured by a counting
/// allocator in the `serve` example (it prints the measured peak of every load next to this).
pub fn load_peak(tensors: u64, largest: u64, file: u64) -> u64 {
    tensors.saturating_mul(2).saturating_add(largest).saturating_add(file)
}

impl<A: Architecture, T: ServeBackend> fmt::Debug for SharedLoader<A, T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SharedLoader").field("dir", &self.dir).field("device", &self.cache.device()).finish()
    }
}

/// A model served from a device: a lock on its cache record and its device copy. Unloading it
/// (dropping it) unlocks the record. The CPU weights stay in the group until its RAM budget
/// evicts them, and the device copy stays with the record until then, or until the cache's
/// device budget ([`DeviceCache::set_device_budget`]) offloads it to make room for another
/// lock: set one to bound device memory by more than the RAM budget.
pub struct Served<A: Architecture, T: ServeBackend = Cpu> {
    arch: Arc<A>,
    guard: DeviceGuard<SharedWeights<A, T>>,
}

impl<A: Architecture, T: ServeBackend> Served<A, T> {
    /// The record lock and device copy.
    pub fn guard(&self) -> &DeviceGuard<SharedWeights<A, T>> {
        &self.guard
    }

    /// Runs whole rows of `input` through the device copy; returns the output rows, flat.
    pub fn infer(&self, input: &[f32]) -> Result<Vec<f32>, BurnError> {
        infer(&*self.arch, &self.guard.module, &self.guard.device, input)
    }
}

impl<A: Architecture, T: ServeBackend> Model for Served<A, T> {
    fn size_bytes(&self) -> u64 {
        self.guard.cpu().stats().bytes
    }
}

impl<A: Architecture, T: ServeBackend> fmt::Debug for Served<A, T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Served").field("key", &self.guard.cpu().key()).finish()
    }
}
