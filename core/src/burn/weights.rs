//! Canonical CPU weights: loading and saving SafeTensors files, and their byte sizes.

use std::fmt;
use std::path::Path;

use burn::module::{Module, ModuleVisitor, Param};
use burn::tensor::backend::Backend;
use burn::tensor::{Bool, Int, Tensor};
use burn_store::{ModuleSnapshot, ModuleStore, SafetensorsStore, SafetensorsStoreError};

use super::architecture::Architecture;
use super::backend::{Cpu, ServeBackend};
use super::error::BurnError;
use super::source::{FileIdentity, read_file, read_header};
use crate::cache::DeviceWeights;
use crate::error::{BoxError, SourceError};
use crate::runtime::Arc;

/// Bytes of every parameter tensor of `module`: elements × dtype size, summed.
pub fn param_bytes<B: Backend, M: Module<B>>(module: &M) -> u64 {
    let mut sizes = Sizes(0);
    module.visit(&mut sizes);
    sizes.0
}

struct Sizes(u64);

impl Sizes {
    fn add<B: Backend, const D: usize, K>(&mut self, tensor: &Tensor<B, D, K>)
    where
        K: burn::tensor::BasicOps<B>,
    {
        let bytes = tensor.shape().num_elements() * tensor.dtype().size();
        self.0 += u64::try_from(bytes).unwrap_or(u64::MAX);
    }
}

impl<B: Backend> ModuleVisitor<B> for Sizes {
    fn visit_float<const D: usize>(&mut self, param: &Param<Tensor<B, D>>) {
        self.add(&param.val());
    }

    fn visit_int<const D: usize>(&mut self, param: &Param<Tensor<B, D, Int>>) {
        self.add(&param.val());
    }

    fn visit_bool<const D: usize>(&mut self, param: &Param<Tensor<B, D, Bool>>) {
        self.add(&param.val());
    }
}

/// What a load cost.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LoadStats {
    /// Bytes of the loaded tensors.
    pub bytes: u64,
    /// Most bytes alive during the load: the tensors plus the file's bytes, which the loader
    /// maps while it decodes.
    pub peak_bytes: u64,
}

/// Writes `module`'s tensors to a SafeTensors file at `path`, replacing it atomically.
pub fn save<B: Backend, M: Module<B>>(module: &M, path: &Path) -> Result<(), BurnError> {
    let corrupt =
        |error: BoxError| BurnError::Corrupt { path: path.to_owned(), source: SourceError::new(error) };
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).map_err(|e| corrupt(e.into()))?;
    }
    // Written beside the target, then renamed over it: a reader that maps the old file never
    // sees it truncated, and a failed save leaves the old file whole.
    let partial = path.with_extension("safetensors.partial");
    let mut store = SafetensorsStore::from_file(&partial).overwrite(true);
    module.save_into(&mut store).map_err(|e| corrupt(e.into()))?;
    std::fs::rename(&partial, path).map_err(|e| corrupt(e.into()))
}

/// Loads `arch`'s weights from the SafeTensors file at `path` into CPU tensors. Every tensor
/// must be present with the architecture's shape and dtype: the file's header is checked
/// against the module before any tensor is built (burn-store would panic on a dtype ndarray
/// cannot hold, mid-update), so a bad file is a typed error and nothing half-loaded escapes.
///
/// The file is read into memory with plain reads (never mapped): one that is truncated or
/// rewritten while it loads is a typed error ([`BurnError::Changed`], or the parse's), never a
/// signal. Its bytes are part of the load's peak.
pub fn load<A: Architecture>(arch: &A, path: &Path) -> Result<(A::Module<Cpu>, LoadStats), BurnError> {
    load_read(arch, path, None).map(|(module, stats, _)| (module, stats))
}

/// [`load`], with the identity of the file the weights were read from; refused if the file is
/// longer than `checked` (what a budget check allowed) when it is opened.
fn load_read<A: Architecture>(
    arch: &A,
    path: &Path,
    checked: Option<u64>,
) -> Result<(A::Module<Cpu>, LoadStats, FileIdentity), BurnError> {
    let (identity, bytes) = read_file(path, checked)?;
    let file_bytes = identity.len;
    let mut module = arch.init::<Cpu>(&Default::default());
    let mut store = SafetensorsStore::from_bytes(Some(bytes));
    check_header(&module, &mut store, path)?;
    let applied = module.load_from(&mut store).map_err(|e| classify(e, path))?;
    if !applied.errors.is_empty() {
        let message = applied.errors.iter().map(|e| format!("{e:?}")).collect::<Vec<_>>().join("; ");
        return Err(BurnError::Mismatch { path: path.to_owned(), message });
    }
    let bytes = param_bytes(&module);
    Ok((module, LoadStats { bytes, peak_bytes: bytes.saturating_add(file_bytes) }, identity))
}

/// Length of the model file at `path`, or `NotFound` / `Corrupt`.
pub(super) fn file_len(path: &Path) -> Result<u64, BurnError> {
    match std::fs::metadata(path) {
        Ok(meta) if meta.is_file() => Ok(meta.len()),
        Ok(_) => Err(BurnError::NotFound { path: path.to_owned() }),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            Err(BurnError::NotFound { path: path.to_owned() })
        }
        Err(e) => Err(BurnError::Corrupt { path: path.to_owned(), source: SourceError::new(e.into()) }),
    }
}

/// Bytes of the tensors the file's header declares — of those named `names` only, when given
/// — read from the header alone, with plain reads. A named tensor the file lacks counts
/// nothing here; the load reports it as a mismatch.
pub(super) fn header_tensor_bytes(path: &Path, names: Option<&[String]>) -> Result<u64, BurnError> {
    header_tensors(path, names).map(|(total, _)| total)
}

/// [`header_tensor_bytes`], and the bytes of the largest of those tensors.
pub(super) fn header_tensors(path: &Path, names: Option<&[String]>) -> Result<(u64, u64), BurnError> {
    let (_, header) = read_header(path)?;
    let overflow = || BurnError::Corrupt {
        path: path.to_owned(),
        source: SourceError::new("the header's tensor sizes overflow".into()),
    };
    let taken = |name: &String| names.is_none_or(|names| names.contains(name));
    header
        .tensors
        .iter()
        .filter(|(name, _)| taken(name))
        .try_fold((0u64, 0u64), |(sum, largest), (_, bytes)| {
            Ok((sum.checked_add(*bytes).ok_or_else(overflow)?, largest.max(*bytes)))
        })
}

/// Every tensor of `module` is in the file with the same shape and dtype.
fn check_header<M: ModuleSnapshot<Cpu>>(
    module: &M,
    store: &mut SafetensorsStore,
    path: &Path,
) -> Result<(), BurnError> {
    let found = store.get_all_snapshots().map_err(|e| classify(e, path))?;
    let problems: Vec<String> = module
        .collect(None, None, false)
        .iter()
        .filter_map(|want| {
            let key = want.full_path();
            match found.get(&key) {
                None => Some(format!("{key} is missing")),
                Some(have) if have.shape != want.shape => {
                    Some(format!("{key} has shape {:?}, expected {:?}", have.shape, want.shape))
                }
                Some(have) if have.dtype != want.dtype => {
                    Some(format!("{key} has dtype {:?}, expected {:?}", have.dtype, want.dtype))
                }
                Some(_) => None,
            }
        })
        .collect();
    if problems.is_empty() {
        Ok(())
    } else {
        Err(BurnError::Mismatch { path: path.to_owned(), message: problems.join("; ") })
    }
}

fn classify(error: SafetensorsStoreError, path: &Path) -> BurnError {
    let path = path.to_owned();
    match error {
        SafetensorsStoreError::Io(e) if e.kind() == std::io::ErrorKind::NotFound => {
            BurnError::NotFound { path }
        }
        SafetensorsStoreError::TensorNotFound(message) | SafetensorsStoreError::ValidationFailed(message) => {
            BurnError::Mismatch { path, message }
        }
        other => BurnError::Corrupt { path, source: SourceError::new(other.into()) },
    }
}

// ---- The weights --------------------------------------------------------------------------------

/// A model's canonical CPU weights, as the shared-weight cache keeps them: placed on a
/// [`ServeBackend`] device by [`DeviceWeights::to_device`]. Cloning shares the tensors.
pub struct BurnWeights<A: Architecture, T: ServeBackend = Cpu> {
    arch: Arc<A>,
    module: A::Module<Cpu>,
    stats: LoadStats,
    source: FileIdentity,
    _target: std::marker::PhantomData<fn() -> T>,
}

impl<A: Architecture, T: ServeBackend> BurnWeights<A, T> {
    /// Loads the weights from `path` (see [`load`]).
    pub fn load(arch: Arc<A>, path: &Path) -> Result<Self, BurnError> {
        Self::load_checked(arch, path, None)
    }

    /// [`BurnWeights::load`] of a file whose length a budget check allowed: one that grew past
    /// `checked` since is [`BurnError::Changed`], nothing allocated for it.
    pub(super) fn load_checked(arch: Arc<A>, path: &Path, checked: Option<u64>) -> Result<Self, BurnError> {
        let (module, stats, source) = load_read(&*arch, path, checked)?;
        Ok(Self { arch, module, stats, source, _target: std::marker::PhantomData })
    }

    /// The identity of the file these weights were read from: a rewrite of the file changes
    /// it, so they are never served for the rewritten file.
    pub fn source(&self) -> FileIdentity {
        self.source
    }

    /// The CPU module.
    pub fn module(&self) -> &A::Module<Cpu> {
        &self.module
    }

    /// The architecture.
    pub fn arch(&self) -> &Arc<A> {
        &self.arch
    }

    /// Bytes of the CPU tensors, and the load's peak.
    pub fn stats(&self) -> LoadStats {
        self.stats
    }
}

/// The file a canonical was read from names it: a rewrite of the file is a new canonical.
impl<A: Architecture, T: ServeBackend> crate::cache::Sourced for BurnWeights<A, T> {
    type Source = FileIdentity;

    fn source(&self) -> FileIdentity {
        self.source
    }
}

impl<A: Architecture, T: ServeBackend> Clone for BurnWeights<A, T> {
    fn clone(&self) -> Self {
        Self {
            arch: Arc::clone(&self.arch),
            module: self.module.clone(),
            stats: self.stats,
            source: self.source,
            _target: std::marker::PhantomData,
        }
    }
}

impl<A: Architecture, T: ServeBackend> fmt::Debug for BurnWeights<A, T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("BurnWeights").field("bytes", &self.stats.bytes).finish_non_exhaustive()
    }
}

/// A model placed on a device: its module there and the device, to build inputs on.
pub struct OnDevice<A: Architecture, T: ServeBackend> {
    /// The module on the device.
    pub module: A::Module<T>,
    /// The device.
    pub device: T::Device,
}

impl<A: Architecture, T: ServeBackend> DeviceWeights for BurnWeights<A, T> {
    type OnDevice = OnDevice<A, T>;

    fn device_bytes(&self) -> u64 {
        if T::SHARES_CPU_TENSORS { 0 } else { self.stats.bytes }
    }

    fn to_device(&self, device: &str) -> Result<OnDevice<A, T>, BoxError> {
        let target = T::device(device)?;
        let module = T::place(&*self.arch, &self.module, &target, device)?;
        Ok(OnDevice { module, device: target })
    }
}
