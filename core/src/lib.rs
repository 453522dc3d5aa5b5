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
//! ## Serving semantics
//! What a model server needs, on every stack (each item links to its guarantee and a runnable
//! example):
//! - *Shared failure* (SPEC 1.9): callers waiting for a load that fails get that load's very
//!   error instead of loading again; [`ManagerConfig::with_failure_cache`] remembers a failure
//!   for new callers for a while.
//! - *Per-call deadlines* (SPEC 1.10): [`CallOptions`] bound every wait inside
//!   [`Manager::add_model_with`], [`Manager::remove_with`], [`Manager::lease_with`],
//!   [`Manager::infer_with`] and [`DeviceCache::get_or_put_with`](cache::DeviceCache::get_or_put_with);
//!   expiry is that wait's own typed error.
//! - *Atomic replacement* (SPEC 1.11): [`Manager::replace`] loads the new version beside the
//!   old one and switches in one step; no request sees `NotFound`.
//! - *Runtime resizing* (SPEC 1.12): [`FixedSizeCache::set_max_size`],
//!   [`CacheGroup::set_cap`](cache::CacheGroup::set_cap) and
//!   [`DeviceCache::set_device_budget`](cache::DeviceCache::set_device_budget) evict down to a
//!   lowered limit (idle least recently used first, a bounded wait for the rest, then a typed
//!   error naming what is still over) and wake the waiters of a raised one.
//! - *Graceful shutdown* (SPEC 1.13): [`Manager::shutdown`] refuses new adds and leases, drains
//!   live leases and unloads every model through every layer, reporting what could not go.
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
pub use layer::{CapacityPolicy, FixedSizeCache, FixedSizeConfig, Traced};
pub use manager::{
    Added, Eviction, Lease, LifecycleGuard, LifecycleInfo, Loader, Manager, ManagerConfig, Model,
    ModelManager, Replaced, ShutdownReport, Snapshot,
};
