//! [`FileLoader`]: models loaded from files onto the CPU, for a manager.

use std::fmt;
use std::path::{Path, PathBuf};

use burn::tensor::TensorData;
use burn::tensor::backend::Backend;

use super::architecture::{Architecture, run, run_rows};
use super::backend::Cpu;
use super::error::BurnError;
use super::weights::{LoadStats, load};
use crate::error::BoxError;
use crate::id::ModelId;
use crate::manager::{Loader, Model};
use crate::runtime::Arc;

/// Loads `<dir>/<id>.safetensors` as an `A` onto the CPU.
pub struct FileLoader<A: Architecture> {
    arch: Arc<A>,
    dir: PathBuf,
}

impl<A: Architecture> FileLoader<A> {
    /// Models of architecture `arch` from the files in `dir`.
    pub fn new(arch: A, dir: &Path) -> Self {
        Self { arch: Arc::new(arch), dir: dir.to_owned() }
    }

    /// The file that holds model `id`.
    pub fn path(&self, id: &str) -> Result<PathBuf, BurnError> {
        model_path(&self.dir, id)
    }
}

/// `<dir>/<id>.safetensors`, for an id that names a plain file.
pub(super) fn model_path(dir: &Path, id: &str) -> Result<PathBuf, BurnError> {
    let plain = !id.is_empty() && !id.contains(['/', '\\']) && id != "..";
    if plain {
        Ok(dir.join(format!("{id}.safetensors")))
    } else {
        Err(BurnError::BadId { id: id.to_owned() })
    }
}

impl<A: Architecture> Loader for FileLoader<A> {
    type Model = BurnModel<A>;

    fn load(&self, id: &ModelId) -> Result<BurnModel<A>, BoxError> {
        let (module, stats) = load(&*self.arch, &self.path(id.as_str())?)?;
        Ok(BurnModel { arch: Arc::clone(&self.arch), module, device: Default::default(), stats })
    }
}

impl<A: Architecture> fmt::Debug for FileLoader<A> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("FileLoader").field("dir", &self.dir).finish_non_exhaustive()
    }
}

/// A burn model resident in a manager: its module on backend `B`'s device.
pub struct BurnModel<A: Architecture, B: Backend = Cpu> {
    arch: Arc<A>,
    module: A::Module<B>,
    device: B::Device,
    stats: LoadStats,
}

impl<A: Architecture, B: Backend> BurnModel<A, B> {
    /// The module.
    pub fn module(&self) -> &A::Module<B> {
        &self.module
    }

    /// What loading it cost.
    pub fn stats(&self) -> LoadStats {
        self.stats
    }

    /// Runs whole rows of `input` through a model of one `FP32` input and output; returns the
    /// output rows, flat (rows along the first dimension of the declared shapes).
    pub fn infer(&self, input: &[f32]) -> Result<Vec<f32>, BurnError> {
        run_rows(&*self.arch, &self.module, &self.device, input)
    }

    /// Runs `inputs`, one per declared input in order, through the model; returns one tensor
    /// per declared output. Inputs that do not match the declaration are
    /// [`BurnError::Tensor`].
    pub fn run(&self, inputs: Vec<TensorData>) -> Result<Vec<TensorData>, BurnError> {
        run(&*self.arch, &self.module, &self.device, inputs)
    }

    /// The architecture the model was built with (the tensors it takes and answers).
    pub fn architecture(&self) -> &A {
        &self.arch
    }
}

impl<A: Architecture, B: Backend> Model for BurnModel<A, B> {
    fn size_bytes(&self) -> u64 {
        self.stats.bytes
    }
}

impl<A: Architecture, B: Backend> fmt::Debug for BurnModel<A, B> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("BurnModel").field("stats", &self.stats).finish_non_exhaustive()
    }
}
