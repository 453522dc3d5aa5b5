//! # resident
//!
//! Keeps machine-learning models resident in memory safely. A [`ModelManager`] loads, shares
//! and unloads models under concurrency without ever constructing a model twice at once,
//! retiring a lock generation that someone still waits on, or unloading a model that a
//! [`Lease`] still uses.
//!
//! ## Which piece do I need
//! - **The manager alone** ([`ModelManager`]): a registry of models your [`Loader`] builds,
//!   never two loads of one id at once, leases that keep a model from being unloaded under a
//!   request.
//!
//!   ```
//!   use resident::{BoxError, Loader, Manager, ManagerExt, Model, ModelId, ModelManager};
//!   struct Echo(String);
//!   impl Model for Echo { fn size_bytes(&self) -> u64 { self.0.len() as u64 } }
//!   struct EchoLoader;
//!   impl Loader for EchoLoader {
//!       type Model = Echo;
//!       fn load(&self, id: &ModelId) -> Result<Echo, BoxError> { Ok(Echo(id.to_string())) }
//!   }
//!   let manager = ModelManager::new(EchoLoader);
//!   manager.add_model("coco/3", None)?;
//!   assert_eq!(manager.infer("coco/3", |m| m.0.clone())?, "coco/3");
//!   # Ok::<(), resident::ManagerError>(())
//!   ```
//! - **+ [`FixedSizeCache`]**: at most `max_size` models, least recently used evicted first,
//!   never one in use or pinned; cold adds wait (bounded) for room.
//!
//!   ```
//!   # use resident::{BoxError, Loader, Model, ModelId};
//!   # struct Echo(String);
//!   # impl Model for Echo { fn size_bytes(&self) -> u64 { self.0.len() as u64 } }
//!   # struct EchoLoader;
//!   # impl Loader for EchoLoader {
//!   #     type Model = Echo;
//!   #     fn load(&self, id: &ModelId) -> Result<Echo, BoxError> { Ok(Echo(id.to_string())) }
//!   # }
//!   use resident::{FixedSizeCache, FixedSizeConfig, Manager, ManagerExt, ModelManager};
//!   let cache = FixedSizeCache::new(ModelManager::new(EchoLoader), FixedSizeConfig::new(2))?;
//!   for id in ["a", "b", "c"] {
//!       cache.add_model(id, None)?;
//!   }
//!   assert_eq!(cache.ids(), [ModelId::new("b")?, ModelId::new("c")?]); // `a` was evicted
//!   # Ok::<(), Box<dyn std::error::Error>>(())
//!   ```
//! - **+ a [`CacheGroup`](cache::CacheGroup)** for weights shared across devices and models
//!   (one canonical copy per key), a hard RAM budget reserved before every load, device budgets,
//!   keep-alive: see [`cache`].
//!
//!   ```
//!   use resident::cache::CacheGroup;
//!   let group = CacheGroup::<Vec<u8>>::new(1_000)?; // a 1,000-byte RAM budget
//!   let cpu = group.cache("cpu");
//!   let weights = cpu.get_or_put("encoder", 600, || Ok::<_, resident::CacheError>(vec![0; 600]))?;
//!   let again = group.cache("cpu").get_or_put("encoder", 600, || -> Result<Vec<u8>, resident::CacheError> {
//!       unreachable!("a resident key is not loaded twice")
//!   });
//!   assert!(again.is_ok() && group.budget().in_use() == 600);
//!   drop(weights);
//!   # Ok::<(), Box<dyn std::error::Error>>(())
//!   ```
//! - **+ burn** (feature `burn`, default): [`burn`](mod@crate::burn) loads burn models from
//!   SafeTensors files into that cache and serves them on ndarray, or on CUDA with the `cuda`
//!   feature (the example below, with the feature on).
//! - **+ metrics**: every piece reports loads, evictions, refusals and waits through the
//!   [`metrics`](https://docs.rs/metrics) facade (a no-op until you install a recorder); the
//!   names, and the gauges to set on scrape, are in [`mod@metrics`]. The `resident-serve` crate
//!   of this workspace serves them to Prometheus over HTTP.
//!
//!   ```
//!   # use resident::{BoxError, Loader, Manager, ManagerExt, Model, ModelId, ModelManager};
//!   # struct M; impl Model for M { fn size_bytes(&self) -> u64 { 1 } }
//!   # struct L; impl Loader for L { type Model = M; fn load(&self, _: &ModelId) -> Result<M, BoxError> { Ok(M) } }
//!   let manager = ModelManager::new(L);
//!   manager.add_model("a", None)?; // resident_model_loads_total{model="a"} += 1
//!   resident::metrics::record_models(&manager, "cpu"); // resident_models{device="cpu"} = 1
//!   # Ok::<(), resident::ManagerError>(())
//!   ```
//!
//! A layer of your own implements [`layer::Decorator`]: only what it changes.
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
//!   [`ManagerExt::add_model_with`], [`ManagerExt::remove_with`], [`ManagerExt::lease_with`],
//!   [`ManagerExt::infer_with`] and [`DeviceCache::get_or_put_with`](cache::DeviceCache::get_or_put_with);
//!   expiry is that wait's own typed error.
//! - *Atomic replacement* (SPEC 1.11): [`ManagerExt::replace`] loads the new version beside the
//!   old one and switches in one step; no request sees `NotFound`.
//! - *Runtime resizing* (SPEC 1.12): [`FixedSizeCache::set_max_size`],
//!   [`CacheGroup::set_cap`](cache::CacheGroup::set_cap) and
//!   [`DeviceCache::set_device_budget`](cache::DeviceCache::set_device_budget) evict down to a
//!   lowered limit (idle least recently used first, a bounded wait for the rest, then a typed
//!   error naming what is still over) and wake the waiters of a raised one.
//! - *Graceful shutdown* (SPEC 1.13): [`ManagerExt::shutdown`] refuses new adds and leases, drains
//!   live leases and unloads every model through every layer, reporting what could not go.
#![cfg_attr(feature = "burn", doc = include_str!("burn_example.md"))]
#![forbid(unsafe_code)]

#[cfg(feature = "burn")]
pub mod burn;
pub mod cache;
pub mod composition;
mod deadline;
mod error;
mod first_panic;
mod hashed;
mod held;
mod id;
pub mod layer;
mod line;
mod manager;
pub mod metrics;
pub mod runtime;
mod shards;
mod telemetry;

pub mod mutants;

pub use deadline::{CallOptions, Deadline};
pub use error::{BoxError, CacheError, InvalidConfig, ManagerError, RegisterError, SourceError, UserPanic};
pub use id::{InvalidId, ModelId};
pub use layer::{CapacityPolicy, FixedSizeCache, FixedSizeConfig, Traced};
pub use manager::{
    Added, Designation, Eviction, Lease, LifecycleGuard, LifecycleInfo, Loader, Manager, ManagerConfig,
    ManagerExt, Model, ModelManager, RemovalReport, Replaced, Snapshot,
};
