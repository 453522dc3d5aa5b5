//! Recording what happens, through the `metrics` facade (see [`crate::metrics`] for the list
//! and the gauges). A leaf: every component calls it, and it names none of them.
//!
//! The one rule for the crate's own instrumentation — these calls and every `tracing` event:
//! a recorder and a subscriber are user code (they may block, re-enter or panic; SPEC 3.10).
//! So no report runs inside an internal monitor; a report of a claim (a lifecycle lock, a
//! reservation, a lease, a hold, an admission) comes after the handle that releases the claim
//! exists, so that a panic there drops the handle; a `Drop` that releases something reports
//! last, after every release and wake-up, and not at all while its thread unwinds (a panic
//! leaving a `Drop` during an unwind aborts); a report beside what may be a model's last
//! reference comes after that reference is dropped ([`after_dropping`]); and reports next to
//! other user code (eviction callbacks) run under the same `catch_unwind`. The sim runs every execution under a recorder
//! and a subscriber that check the first and can panic at any named report.

use std::time::Duration;

use crate::error::{CacheError, ManagerError};
use crate::held::Held;
use crate::id::ModelId;
use crate::runtime::Runtime;

/// A load of `model` succeeded after `took`.
pub(crate) fn loaded(model: &ModelId, took: Duration) {
    use ::metrics::{Key, Label, Level, Metadata, SharedString};
    // What `counter!` and `histogram!` register with by default.
    static METADATA: Metadata<'static> = Metadata::new(module_path!(), Level::INFO, Some(module_path!()));
    // One list of labels for both metrics: its label shares the id's string (no copy per load),
    // and it moves from the counter's key to the histogram's (one allocation per load, where
    // the two macros build one list each).
    let labels = vec![Label::new("model", SharedString::from(model.shared()))];
    let key = Key::from_parts("resident_model_loads_total", labels);
    ::metrics::with_recorder(|r| r.register_counter(&key, &METADATA)).increment(1);
    let key = Key::from_parts("resident_model_load_duration_seconds", key.into_parts().1);
    ::metrics::with_recorder(|r| r.register_histogram(&key, &METADATA)).record(took.as_secs_f64());
}

/// A load returned an error. Unlabelled: the id it was asked for is whatever a caller sent,
/// and a label taken from it would let any client grow the series without bound.
/// Hands `error` back once counted: it holds the loader's error (user code, whose `Drop` may
/// panic), so it is held across the count, and a panicking recorder drops it under a catch
/// (unless `guarded` is off: the `user-error-dropped-in-unwind` mutant).
pub(crate) fn load_failed<R: Runtime>(error: ManagerError, guarded: bool) -> ManagerError {
    let error = Held::<_, R>::new(error, guarded);
    ::metrics::counter!("resident_model_load_failures_total").increment(1);
    error.into_inner()
}

/// Why something was evicted: the `by` label of the eviction counters.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum EvictedBy {
    /// A [`FixedSizeCache`](crate::FixedSizeCache)'s `max_size` (resizes included).
    MaxSize,
    /// A [`FixedSizeCache`](crate::FixedSizeCache)'s `max_bytes`.
    MaxBytes,
    /// A device cache made room for a load.
    Room,
    /// A device cache's keep-alive ran out.
    Idle,
    /// `drop_model`, a shutdown or a stale record's last unlock.
    Dropped,
}

/// Something of `bytes` was evicted, `by` this.
pub(crate) fn evicted(by: EvictedBy, bytes: u64) {
    // Literal labels: each series' key is a static, built once (no allocation per eviction).
    macro_rules! count {
        ($by:literal) => {{
            ::metrics::counter!("resident_evictions_total", "by" => $by).increment(1);
            ::metrics::counter!("resident_evicted_bytes_total", "by" => $by).increment(bytes);
        }};
    }
    match by {
        EvictedBy::MaxSize => count!("max_size"),
        EvictedBy::MaxBytes => count!("max_bytes"),
        EvictedBy::Room => count!("room"),
        EvictedBy::Idle => count!("idle"),
        EvictedBy::Dropped => count!("dropped"),
    }
}

/// Counts `error` as a refusal, if it is one, and hands it back.
pub(crate) fn refused(error: ManagerError) -> ManagerError {
    let reason = match &error {
        ManagerError::LockTimeout { .. } => "lock_timeout",
        ManagerError::Busy { .. } => "drain_timeout",
        ManagerError::CapacityExhausted { .. } => "capacity_exhausted",
        ManagerError::OverLimit { .. } => "over_limit",
        ManagerError::ShutDown { .. } => "shut_down",
        _ => return error,
    };
    ::metrics::counter!("resident_refusals_total", "reason" => reason).increment(1);
    error
}

/// Counts a cache's `error` as a refusal, if it is one, and hands it back.
pub(crate) fn cache_refused(error: CacheError) -> CacheError {
    let reason = match &error {
        CacheError::NoRoom { .. } => "no_room",
        CacheError::TooLarge { .. } => "too_large",
        CacheError::DeviceFull { .. } => "device_full",
        CacheError::OverCap { .. } | CacheError::DeviceOverBudget { .. } => "over_limit",
        CacheError::ShutDown { .. } => "shut_down",
        CacheError::LoadWaitTimeout { .. } => "load_wait_timeout",
        CacheError::DeviceMoveTimeout { .. } => "move_timeout",
        _ => return error,
    };
    ::metrics::counter!("resident_refusals_total", "reason" => reason).increment(1);
    error
}

/// Counts a lease's wait for an eviction's outcome that ran out (`LockTimeout`), and hands the
/// error back.
pub(crate) fn lease_refused(error: ManagerError) -> ManagerError {
    ::metrics::counter!("resident_refusals_total", "reason" => "lease_timeout").increment(1);
    error
}

/// A lifecycle lock was waited for `waited`.
pub(crate) fn lock_waited(waited: Duration) {
    ::metrics::histogram!("resident_lock_wait_seconds").record(waited.as_secs_f64());
}

/// A lease waited `waited` for an eviction's outcome.
pub(crate) fn lease_waited(waited: Duration) {
    ::metrics::histogram!("resident_lease_wait_seconds").record(waited.as_secs_f64());
}

/// Drops `value` (the last reference to a model, maybe: its `Drop` is user code), then runs
/// `report`. In that order a panicking subscriber or recorder unwinds with no model left to drop,
/// where a `Drop` that panics would abort the process; a `Drop` that panics is caught, the
/// report still runs, and its panic goes on after.
pub(crate) fn after_dropping<R: Runtime, T>(value: T, report: impl FnOnce()) {
    let dropped = R::catch_unwind(move || drop(value));
    report();
    if let Err(payload) = dropped {
        R::resume_caught(payload);
    }
}
