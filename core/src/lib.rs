//! # resident
//!
//! Keeps machine-learning models resident in memory safely. A [`ModelManager`] loads, shares
//! and unloads models under concurrency without ever constructing a model twice at once,
//! retiring a lock generation that someone still waits on, or unloading a model that a
//! [`Lease`] still uses.
//!
//! ## Words
//! Callers name a model by *id*, optionally under an *alias*; the *resolved id* is the alias
//! if given, else the id. The resolved id is the one key of every structure (registry,
//! lifecycle lock, leases); the [`Loader`] receives the canonical id. Two aliases of one model
//! are independent entries.
//!
//! ## Runtimes
//! Every concurrent type is generic over a [`Runtime`](runtime::Runtime) that defaults to the
//! production [`StdRuntime`](runtime::StdRuntime). The `resident-sim` crate plugs in the
//! shuttle and loom model checkers through the same parameter, so what is checked is exactly
//! what ships.
//!
//! ## burn models
//! With the `burn` feature (on by default), [`burn`](mod@crate::burn) serves burn models: here
//! an MLP saved as SafeTensors, loaded through the manager and run on ndarray.
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
#![forbid(unsafe_code)]

#[cfg(feature = "burn")]
pub mod burn;
pub mod cache;
mod error;
mod id;
pub mod layer;
mod manager;
pub mod runtime;

#[cfg(feature = "mutants")]
pub mod mutants;
#[cfg(not(feature = "mutants"))]
#[allow(dead_code, unreachable_pub, missing_docs)]
mod mutants;

pub use error::{BoxError, CacheError, InvalidConfig, ManagerError, SourceError};
pub use id::{InvalidId, ModelId};
pub use layer::{CapacityPolicy, FixedSizeCache, FixedSizeConfig, Manager, Traced};
pub use manager::{
    Added, Lease, LifecycleGuard, LifecycleInfo, Loader, ManagerConfig, Model, ModelManager, Snapshot,
};
