//! Serving [burn](https://burn.dev) models (feature `burn`, on by default).
//!
//! A model family is an [`Architecture`]: it builds an empty module on any backend, declares
//! the tensors it takes and answers ([`TensorSpec`]: a name, a [`DataType`], a shape of any
//! rank) and runs a forward pass on burn tensor data of those. Weights come from SafeTensors files into CPU tensors on the
//! [`Cpu`] (ndarray) backend; byte sizes are the tensors' own (elements × dtype size).
//!
//! Two ways to serve them:
//! - [`FileLoader`]: a [`Loader`](crate::Loader) whose [`BurnModel`]s live on the CPU, for a
//!   [`ModelManager`](crate::ModelManager) or a [`FixedSizeCache`](crate::FixedSizeCache).
//! - [`SharedLoader`]: one per device, over a [`CacheGroup`](crate::cache::CacheGroup). The CPU
//!   weights are the *canonical* weights of the group's store, shared by every device's cache
//!   and counted once in its budget; each model the manager holds is a [`Served`] lock on a
//!   device copy ([`ServeBackend::place`]: ndarray shares the CPU tensors, CUDA copies them).
//!
//! The [crate root](crate) shows a burn model served through the manager.

mod architecture;
mod backend;
mod error;
mod file;
mod shared;
mod source;
mod weights;
pub mod zoo;

pub use architecture::{Architecture, DataType, TensorSpec};
pub use backend::{Cpu, ServeBackend, copy_to, cuda_driver_present};
pub use error::BurnError;
pub use file::{BurnModel, FileLoader};
pub use shared::{FilePlan, ModelFiles, Served, SharedLoader, SharedWeights, load_peak};
pub use source::FileIdentity;
pub use weights::{BurnWeights, LoadStats, OnDevice, load, param_bytes, save};

#[cfg(feature = "cuda")]
pub use backend::Gpu;
