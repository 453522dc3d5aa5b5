//! Serving [burn](https://burn.dev) models (feature `burn`, on by default).
//!
//! A model family is an [`Architecture`]: it builds an empty module on any backend and runs a
//! forward pass on flat rows. Weights come from SafeTensors files into CPU tensors on the
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
//! ```
//! use resident::burn::{FileLoader, zoo::MlpSpec};
//! use resident::{Manager, ModelManager};
//!
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let dir = std::env::temp_dir().join(format!("resident-doc-{}", std::process::id()));
//! let spec = MlpSpec { d_in: 4, hidden: 8, d_out: 2 };
//! resident::burn::save(&spec.generate::<resident::burn::Cpu>(7, &Default::default()), &dir.join("mlp.safetensors"))?;
//!
//! let manager = ModelManager::new(FileLoader::new(spec, &dir));
//! manager.add_model("mlp", None)?;
//! let logits = manager.infer("mlp", |model| model.infer(&[0.1, 0.2, 0.3, 0.4]))??;
//! assert_eq!(logits.len(), 2);
//! # std::fs::remove_dir_all(&dir)?;
//! # Ok(())
//! # }
//! ```

mod architecture;
mod backend;
mod error;
mod file;
mod shared;
mod weights;
pub mod zoo;

pub use architecture::Architecture;
pub use backend::{Cpu, ServeBackend, copy_to, cuda_driver_present};
pub use error::BurnError;
pub use file::{BurnModel, FileLoader};
pub use shared::{Served, SharedLoader, SharedWeights};
pub use weights::{BurnWeights, LoadStats, OnDevice, load, param_bytes, save};

#[cfg(feature = "cuda")]
pub use backend::Gpu;
