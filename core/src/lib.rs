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
#![cfg_attr(feature = "burn", doc = include_str!("burn_example.md"))]
#![forbid(unsafe_code)]

#[cfg(feature = "burn")]
pub mod burn;
pub mod cache;
mod deadline;
mod error;
mod id;
pub mod layer;
mod manager;
pub mod runtime;

pub mod mutants;

pub use deadline::{CallOptions, Deadline};
pub use error::{BoxError, CacheError, InvalidConfig, ManagerError, SourceError};
pub use id::{InvalidId, ModelId};
pub use layer::{CapacityPolicy, Eviction, FixedSizeCache, FixedSizeConfig, Manager, ShutdownReport, Traced};
pub use manager::{
    Added, Lease, LifecycleGuard, LifecycleInfo, Loader, ManagerConfig, Model, ModelManager, Replaced,
    Snapshot,
};
