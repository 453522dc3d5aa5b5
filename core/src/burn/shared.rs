//! [`SharedLoader`]: one device's loader over a cache group, so that every device shares one
//! copy of each model's CPU weights.

use std::fmt;
use std::path::{Path, PathBuf};

use burn::tensor::TensorData;

use super::architecture::{Architecture, run, run_rows};
use super::backend::{Cpu, ServeBackend};
use super::error::BurnError;
use super::file::model_path;
use super::source::FileIdentity;
use super::weights::{BurnWeights, file_len, header_tensor_bytes, header_tensors};
use crate::cache::{CacheGroup, Declared, DeviceCache, DeviceGuard};
use crate::composition::{CacheLoader, DeviceModel, WeightFiles};
use crate::deadline::Deadline;
use crate::error::BoxError;
use crate::id::ModelId;
use crate::manager::{Loader, Model};
use crate::runtime::{Arc, Runtime};

/// The weights a [`SharedLoader`] keeps in its cache group.
pub type SharedWeights<A, T> = BurnWeights<A, T>;

/// Loads models for one device: the CPU weights come from the group (a record already in this
/// device's cache, or a canonical alive in a peer's, adopted as it is) or else from
/// `<dir>/<id>.safetensors`; the model is then locked on the device until the manager unloads
/// it. A thin user of the production composition's [`CacheLoader`] over [`ModelFiles`].
pub struct SharedLoader<A: Architecture, T: ServeBackend = Cpu> {
    arch: Arc<A>,
    loader: CacheLoader<ModelFiles<A, T>>,
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
        let files = ModelFiles { arch: Arc::clone(&arch), dir: dir.to_owned(), group: Arc::clone(group) };
        Ok(Self { arch, loader: CacheLoader::new(files, group.cache(device)) })
    }

    /// This device's cache.
    pub fn cache(&self) -> &Arc<DeviceCache<SharedWeights<A, T>>> {
        self.loader.cache()
    }

    fn serve(&self, model: DeviceModel<SharedWeights<A, T>>) -> Served<A, T> {
        Served { arch: Arc::clone(&self.arch), model }
    }
}

// ---- The loader ---------------------------------------------------------------------------------

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
        self.loader.load_until(id, deadline).map(|model| self.serve(model))
    }

    /// A replace's load: the file is read again whatever the group holds for `id` (the old
    /// version's weights are dropped from it; their holders keep them until they let go).
    fn reload_until(&self, id: &ModelId, deadline: Deadline) -> Result<Served<A, T>, BoxError> {
        self.loader.reload_until(id, deadline).map(|model| self.serve(model))
    }

    /// The bytes of the architecture's tensors as `<dir>/<id>.safetensors` declares them in
    /// its header (read without loading them; every tensor of the file if the architecture does
    /// not name its own).
    fn declared_bytes(&self, id: &ModelId) -> Result<Option<u64>, BoxError> {
        self.loader.declared_bytes(id)
    }
}

/// The model files of a [`SharedLoader`]: `<dir>/<id>.safetensors`, checked against the group's
/// RAM budget and the device's budget before a read, read with the architecture.
pub struct ModelFiles<A: Architecture, T: ServeBackend = Cpu> {
    arch: Arc<A>,
    dir: PathBuf,
    group: Arc<CacheGroup<SharedWeights<A, T>>>,
}

/// How many times [`ModelFiles`] reads a file that changes while it is read before it gives up.
const READS: usize = 3;

/// What [`ModelFiles::plan`] found: the file, its length and the bytes its header declares.
#[derive(Debug)]
pub struct FilePlan {
    path: PathBuf,
    len: u64,
    declared: u64,
}

impl<A: Architecture, T: ServeBackend> ModelFiles<A, T> {
    /// Refuses a file that cannot fit, before any module or tensor is built: its length
    /// against the RAM budget, then the bytes its header declares for the architecture's
    /// tensors ([`Architecture::tensor_names`]; every tensor of the file if it does not say)
    /// against the RAM budget and (for a backend whose device copies cost device memory) the
    /// device budget `device`. Returns those declared bytes, and the largest tensor's.
    fn check_budgets(&self, path: &Path, device: Option<u64>) -> Result<(u64, u64), BurnError> {
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
        match device {
            Some(device) if !T::SHARES_CPU_TENSORS && tensors > device => {
                Err(too_large(tensors, "device budget", device))
            }
            _ => Ok((tensors, largest)),
        }
    }
}

// ---- Reading the files --------------------------------------------------------------------------

impl<A: Architecture, T: ServeBackend> WeightFiles for ModelFiles<A, T> {
    type Weights = SharedWeights<A, T>;
    type Plan = FilePlan;

    /// The budget checks (the file and its declared tensors against the RAM budget and the
    /// device budget, before any module is built), then the header's bytes declared
    /// with the load's peak ([`load_peak`]).
    fn plan<R: Runtime>(
        &self,
        id: &ModelId,
        cache: &DeviceCache<Self::Weights, R>,
    ) -> Result<(Declared, FilePlan), BoxError> {
        let path = model_path(&self.dir, id.as_str())?;
        let (declared, largest) = self.check_budgets(&path, cache.device_budget_cap())?;
        let len = file_len(&path)?;
        let peak = load_peak(declared, largest, len);
        Ok((Declared::new(declared).with_peak(peak), FilePlan { path, len, declared }))
    }

    fn current(&self, id: &ModelId) -> Result<FileIdentity, BoxError> {
        Ok(FileIdentity::of_path(&model_path(&self.dir, id.as_str())?)?)
    }

    /// The file read as planned: no further than its planned length (it may have grown since),
    /// and refused if its module holds more than the header declared. A read that a rewrite
    /// overlapped ([`BurnError::Changed`]: a save renamed into place moves the old file's
    /// status-change time) is read again, a few times, within the same plan: what it then
    /// reads names its own version, which the cache compares with the file's.
    fn read(&self, _id: &ModelId, plan: &FilePlan) -> Result<Self::Weights, BoxError> {
        let read = || BurnWeights::load_checked(Arc::clone(&self.arch), &plan.path, Some(plan.len));
        let mut weights = read();
        for _ in 1..READS {
            match weights {
                Err(BurnError::Changed { .. }) => weights = read(),
                _ => break,
            }
        }
        let weights = weights?;
        match weights.stats().bytes {
            actual if actual > plan.declared => {
                Err(BurnError::OverDeclared { path: plan.path.clone(), declared: plan.declared, actual }
                    .into())
            }
            _ => Ok(weights),
        }
    }

    fn size_bytes(&self, weights: &Self::Weights) -> u64 {
        weights.stats().bytes
    }

    fn declared_bytes(&self, id: &ModelId) -> Result<Option<u64>, BoxError> {
        let path = model_path(&self.dir, id.as_str())?;
        Ok(Some(header_tensor_bytes(&path, self.arch.tensor_names().as_deref())?))
    }
}

impl<A: Architecture, T: ServeBackend> fmt::Debug for ModelFiles<A, T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ModelFiles").field("dir", &self.dir).finish_non_exhaustive()
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
        f.debug_struct("SharedLoader").field("loader", &self.loader).finish()
    }
}

/// A model served from a device: a lock on its cache record and its device copy. Unloading it
/// (dropping it) unlocks the record. The CPU weights stay in the group until its RAM budget
/// evicts them, and the device copy stays with the record until then, or until the cache's
/// device budget ([`DeviceCache::set_device_budget`]) offloads it to make room for another
/// lock: set one to bound device memory by more than the RAM budget.
pub struct Served<A: Architecture, T: ServeBackend = Cpu> {
    arch: Arc<A>,
    model: DeviceModel<SharedWeights<A, T>>,
}

impl<A: Architecture, T: ServeBackend> Served<A, T> {
    /// The record lock and device copy.
    pub fn guard(&self) -> &DeviceGuard<SharedWeights<A, T>> {
        self.model.guard()
    }

    /// The architecture the model was built with (the tensors it takes and answers, its
    /// weights).
    pub fn architecture(&self) -> &A {
        &self.arch
    }

    /// Runs whole rows of `input` through the device copy of a model of one `FP32` input and
    /// output; returns the output rows, flat (rows along the first dimension of the declared
    /// shapes).
    pub fn infer(&self, input: &[f32]) -> Result<Vec<f32>, BurnError> {
        let guard = self.model.guard();
        run_rows(&*self.arch, &guard.module, &guard.device, input)
    }

    /// Runs `inputs`, one per declared input in order, through the device copy; returns one
    /// tensor per declared output. Inputs that do not match the declaration are
    /// [`BurnError::Tensor`].
    pub fn run(&self, inputs: Vec<TensorData>) -> Result<Vec<TensorData>, BurnError> {
        let guard = self.model.guard();
        run(&*self.arch, &guard.module, &guard.device, inputs)
    }
}

impl<A: Architecture, T: ServeBackend> Model for Served<A, T> {
    fn size_bytes(&self) -> u64 {
        self.model.size_bytes()
    }
}

impl<A: Architecture, T: ServeBackend> fmt::Debug for Served<A, T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Served").field("key", &self.guard().cpu().key()).finish()
    }
}
