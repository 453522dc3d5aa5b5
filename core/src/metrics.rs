//! What resident reports through the [`metrics`](https://docs.rs/metrics) facade.
//!
//! resident calls the facade directly, always: with no recorder installed every call is a
//! no-op, and the code that `cargo test` checks is the code that ships (no cargo feature turns
//! it on). Install any recorder (`metrics-exporter-prometheus`, say; the `resident-serve`
//! crate shows it) to collect them. Names follow the Prometheus conventions: a `resident_`
//! prefix, base units in the name, `_total` on counters.
//!
//! # Counters and histograms, recorded as things happen
//! | name | kind | labels | what |
//! |---|---|---|---|
//! | `resident_model_loads_total` | counter | `model` | loads that succeeded (an add's or a replace's), by the canonical id the loader loaded |
//! | `resident_model_load_failures_total` | counter | | loads that returned an error (unlabelled: the id a failed load was asked for is a caller's) |
//! | `resident_model_load_duration_seconds` | histogram | `model` | how long a successful load took |
//! | `resident_evictions_total` | counter | `by` | what was evicted and why: models a [`FixedSizeCache`](crate::FixedSizeCache) evicted for `max_size` (`by="max_size"`, resizes included) or `max_bytes` (`by="max_bytes"`); weight records a [`DeviceCache`] evicted to make room for a load (`by="room"`), after their keep-alive (`by="idle"`), or for `drop_model`, a shutdown or a stale record's last unlock (`by="dropped"`) |
//! | `resident_evicted_bytes_total` | counter | `by` | their bytes |
//! | `resident_refusals_total` | counter | `reason` | calls refused, each counted once where it is refused: `lock_timeout` (a lifecycle lock), `lease_timeout` (a lease's wait for an eviction's outcome), `drain_timeout` (live leases outlived a removal's drain), `capacity_exhausted`, `over_limit` (a lowered `max_size`, RAM cap or device budget not reached in time), `shut_down`, `no_room` (the RAM budget), `too_large`, `device_full`, `load_wait_timeout` (a wait for another caller's load of the same key), `move_timeout` (a wait for another thread's move of the same record to its device) |
//! | `resident_lock_wait_seconds` | histogram | | waits for a model's lifecycle lock that did not get it at once (a timed-out one included) |
//! | `resident_lease_wait_seconds` | histogram | | waits of a lease for the outcome of an eviction unloading its model |
//!
//! An uncontended lock or lease records nothing (a lock reads the clock, nothing more).
//! Labels come from bounded sets: the `model` label is the canonical id a loader accepted,
//! never an alias a caller chose, nor an id a loader refused.
//!
//! # Gauges, set when scraped
//! Gauges are read off the live structures when an exporter asks, by calling these before
//! rendering: [`record_models`] (`resident_models{device}`: models registered in a stack),
//! [`record_budget`] (`resident_memory_{used,reserved,high_water,budget}_bytes{device="ram"}`:
//! the RAM budget of a [`CacheGroup`](crate::cache::CacheGroup)), and [`record_device`] (the
//! same names for a [`DeviceCache`]'s device budget, `device` its device).
//!
//! ```
//! use resident::{BoxError, Loader, Manager, ManagerExt, Model, ModelId, ModelManager};
//! # struct M; impl Model for M { fn size_bytes(&self) -> u64 { 1 } }
//! # struct L; impl Loader for L { type Model = M; fn load(&self, _: &ModelId) -> Result<M, BoxError> { Ok(M) } }
//! let manager = ModelManager::new(L);
//! manager.add_model("a", None)?; // counts resident_model_loads_total{model="a"}
//! // On scrape, before rendering:
//! resident::metrics::record_models(&manager, "cpu:0");
//! # Ok::<(), resident::ManagerError>(())
//! ```

use crate::cache::{DeviceCache, RamBudget};
use crate::manager::{Manager, ManagerExt};
use crate::runtime::Runtime;

/// Sets `resident_models{device}` to the models `manager` has registered.
pub fn record_models<M: Manager + ?Sized>(manager: &M, device: &str) {
    #[allow(clippy::cast_precision_loss)] // model counts are far below 2^52
    ::metrics::gauge!("resident_models", "device" => device.to_owned()).set(manager.len() as f64);
}

/// Sets the `resident_memory_*_bytes{device="ram"}` gauges from a group's RAM budget: bytes in
/// use, reserved by loads in flight, the high-water mark, and the cap.
pub fn record_budget<R: Runtime>(budget: &RamBudget<R>) {
    memory("ram", budget.in_use(), Some(budget.reserved()), Some(budget.high_water()), Some(budget.cap()));
}

/// Sets the `resident_memory_used_bytes{device}` and, with a device budget,
/// `resident_memory_budget_bytes{device}` gauges of `cache`'s device.
pub fn record_device<W: Send + Sync + 'static, R: Runtime>(cache: &DeviceCache<W, R>) {
    memory(cache.device(), cache.device_bytes(), None, None, cache.device_budget_cap());
}

#[allow(clippy::cast_precision_loss)] // a gauge is an f64: bytes past 2^53 round
fn memory(device: &str, used: u64, reserved: Option<u64>, high_water: Option<u64>, budget: Option<u64>) {
    let set = |name: &'static str, bytes: u64| {
        ::metrics::gauge!(name, "device" => device.to_owned()).set(bytes as f64);
    };
    set("resident_memory_used_bytes", used);
    if let Some(reserved) = reserved {
        set("resident_memory_reserved_bytes", reserved);
    }
    if let Some(high_water) = high_water {
        set("resident_memory_high_water_bytes", high_water);
    }
    if let Some(budget) = budget {
        set("resident_memory_budget_bytes", budget);
    }
}
