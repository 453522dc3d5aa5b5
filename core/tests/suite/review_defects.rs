//! Regressions for the defects a review found outside the schedule catalogue, on the production
//! runtime, deterministic (no timing: where a defect was a hang, a generous watchdog turns the
//! hang into a failure). The concurrent ones are model-checked in `resident-sim` (M-E*, M-P*,
//! C-P*, C-D*); these pin the sequential shapes of the same defects.

use std::collections::BTreeSet;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::{Arc, Mutex, mpsc};
use std::time::Duration;

use resident::cache::{CacheGroup, DeviceWeights, PutOptions};
use resident::{
    BoxError, CacheError, CallOptions, FixedSizeCache, FixedSizeConfig, Loader, Manager, ManagerConfig,
    ManagerError, ManagerExt, Model, ModelId, ModelManager,
};

/// Scripted models: which ids panic in `size_bytes`, and in `Drop` after an unload.
#[derive(Default)]
struct Script {
    size_panics: Mutex<BTreeSet<String>>,
    drop_panics: Mutex<BTreeSet<String>>,
    load_panics: Mutex<BTreeSet<String>>,
}

struct Scripted {
    id: String,
    unloaded: Mutex<bool>,
    script: Arc<Script>,
}

impl Model for Scripted {
    fn size_bytes(&self) -> u64 {
        if self.script.size_panics.lock().unwrap().remove(&self.id) {
            panic!("size_bytes of {} panics", self.id);
        }
        1
    }

    fn unload(&self) -> Result<(), BoxError> {
        *self.unloaded.lock().unwrap() = true;
        Ok(())
    }
}

impl Drop for Scripted {
    fn drop(&mut self) {
        let unloaded = *self.unloaded.lock().unwrap();
        if unloaded && !std::thread::panicking() && self.script.drop_panics.lock().unwrap().remove(&self.id) {
            panic!("Drop of {} panics", self.id);
        }
    }
}

struct ScriptedLoader(Arc<Script>);

impl Loader for ScriptedLoader {
    type Model = Scripted;

    fn load(&self, id: &ModelId) -> Result<Scripted, BoxError> {
        if self.0.load_panics.lock().unwrap().remove(id.as_str()) {
            panic!("the load of {id} panics");
        }
        Ok(Scripted { id: id.to_string(), unloaded: Mutex::new(false), script: Arc::clone(&self.0) })
    }
}

fn cache(max: usize) -> (FixedSizeCache<ModelManager<ScriptedLoader>>, Arc<Script>) {
    let script = Arc::new(Script::default());
    let base = ModelManager::new(ScriptedLoader(Arc::clone(&script)));
    (FixedSizeCache::new(base, FixedSizeConfig::new(max)).unwrap(), script)
}

fn assert_queue_is_registry<M: Manager>(cache: &FixedSizeCache<M>, layer: &str) {
    let mut queued = cache.queue();
    queued.sort();
    assert_eq!(queued, cache.ids(), "{layer}: queue {:?} vs registry {:?}", cache.queue(), cache.ids());
}

/// Item 7: a cache over a cache: the outer queue learns of the inner cache's evictions.
#[test]
fn nested_caches_keep_every_queue_equal_to_the_registry() {
    let (inner, _) = cache(1);
    let outer = FixedSizeCache::new(inner, FixedSizeConfig::new(2)).unwrap();
    outer.add_model("a", None).unwrap();
    outer.add_model("b", None).unwrap();
    assert_eq!(outer.ids(), [ModelId::new("b").unwrap()]);
    assert_queue_is_registry(outer.get_ref(), "inner");
    assert_queue_is_registry(&outer, "outer");
}

/// Item 7, with a panic: the inner cache evicts `a`, then `b`'s load panics; the outer queue
/// still learns of the eviction.
#[test]
fn nested_caches_agree_when_an_inner_load_panics() {
    let (inner, script) = cache(1);
    let outer = FixedSizeCache::new(inner, FixedSizeConfig::new(2)).unwrap();
    outer.add_model("a", None).unwrap();
    script.load_panics.lock().unwrap().insert("b".to_owned());
    assert!(catch_unwind(AssertUnwindSafe(|| outer.add_model("b", None))).is_err());
    assert!(outer.is_empty());
    assert_queue_is_registry(outer.get_ref(), "inner");
    assert_queue_is_registry(&outer, "outer");
}

/// Item 16's neighbour: the least recently used id is pinned only in the inner cache; the outer
/// cache evicts the next one instead of re-planning the pinned one until its deadline.
#[test]
fn a_victim_pinned_below_is_passed_over_for_the_next_one() {
    let (inner, _) = cache(4);
    let config = FixedSizeConfig::new(2).with_capacity_wait(Duration::from_millis(20));
    let outer = FixedSizeCache::new(inner, config).unwrap();
    outer.add_model("p", None).unwrap();
    outer.add_model("a", None).unwrap();
    outer.get_ref().pin("p").unwrap();
    outer.add_model("x", None).unwrap();
    assert_eq!(outer.ids(), ["p", "x"].map(|s| ModelId::new(s).unwrap()));
    assert_queue_is_registry(&outer, "outer");
}

/// Item 9: `size_bytes` panics after a successful load: the model is registered *and* queued, so
/// it can be evicted and `max_size` holds.
#[test]
fn a_panicking_size_bytes_leaves_the_model_queued() {
    let (cache, script) = cache(1);
    script.size_panics.lock().unwrap().insert("x".to_owned());
    assert!(catch_unwind(AssertUnwindSafe(|| cache.add_model("x", None))).is_err());
    assert!(cache.contains("x"));
    assert_queue_is_registry(&cache, "cache");
    cache.add_model("y", None).unwrap();
    assert_eq!(cache.ids(), [ModelId::new("y").unwrap()], "x was evictable");
}

/// Item 15: a model's `Drop` panics after a successful remove: no phantom queue entry.
#[test]
fn a_panicking_drop_after_remove_leaves_no_phantom() {
    let (cache, script) = cache(2);
    cache.add_model("x", None).unwrap();
    script.drop_panics.lock().unwrap().insert("x".to_owned());
    assert!(catch_unwind(AssertUnwindSafe(|| cache.remove("x"))).is_err());
    assert!(!cache.contains("x"));
    assert_queue_is_registry(&cache, "cache");
}

/// Item 16: an outer cache whose only victim an inner cache pins: the cold add fails by its
/// deadline instead of spinning for ever (the watchdog only turns a hang into a failure).
#[test]
fn a_cold_add_whose_victims_are_skipped_fails_by_its_deadline() {
    let (inner, _) = cache(2);
    let config = FixedSizeConfig::new(1).with_capacity_wait(Duration::from_millis(20));
    let outer = Arc::new(FixedSizeCache::new(inner, config).unwrap());
    outer.add_model("v", None).unwrap();
    outer.get_ref().pin("v").unwrap();
    let (done, result) = mpsc::channel();
    let adder = Arc::clone(&outer);
    std::thread::spawn(move || done.send(adder.add_model("n", None).map(drop)).unwrap());
    let added = result.recv_timeout(Duration::from_secs(30)).expect("the cold add returned");
    assert!(matches!(added, Err(ManagerError::CapacityExhausted { .. })), "{added:?}");
}

/// Item 13: `Duration::MAX` is "unbounded" in every config, and no call panics on it.
#[test]
fn unbounded_durations_are_accepted_and_never_overflow() {
    let config =
        ManagerConfig::default().with_lock_timeout(Duration::MAX).with_lease_drain_timeout(Duration::MAX);
    let base = ModelManager::with_config(ScriptedLoader(Arc::default()), config).unwrap();
    let cache = FixedSizeCache::new(base, FixedSizeConfig::new(1).with_capacity_wait(Duration::MAX)).unwrap();
    cache.add_model("a", None).unwrap();
    cache.add_model("b", None).unwrap();
    cache.remove("b").unwrap();
    assert!(cache.is_empty());
}

/// Weights whose device copy costs `device` bytes.
struct Placed(u64);

impl DeviceWeights for Placed {
    type OnDevice = u64;

    fn device_bytes(&self) -> u64 {
        self.0
    }

    fn to_device(&self, _device: &str) -> Result<u64, BoxError> {
        Ok(self.0)
    }
}

/// Items 2 and 17: after `drop_model`, no cache of the group serves the dropped record, and after
/// `shutdown` the cache serves no stale one.
#[test]
fn get_misses_dropped_and_shut_down_records_on_every_peer() {
    let group = CacheGroup::<Placed>::new(1000).unwrap();
    let (gpu0, gpu1) = (group.cache("cuda:0"), group.cache("cuda:1"));
    let held0 = gpu0.put("m", Placed(1), 10, PutOptions::default()).unwrap().into_loaded().lock();
    let held1 = gpu1.put("m", Placed(1), 10, PutOptions::default()).unwrap().into_loaded().lock();
    gpu0.drop_model("m");
    assert!(gpu0.get("m").is_none(), "the dropping cache serves the dropped record");
    assert!(gpu1.get("m").is_none(), "a peer serves the dropped record");
    let n = gpu1.put("n", Placed(1), 10, PutOptions::default()).unwrap().into_loaded().lock();
    gpu1.shutdown();
    assert!(gpu1.get("n").is_none(), "a shut-down cache serves a stale record");
    drop((held0, held1, n));
    assert_eq!(group.budget().in_use(), 0);
}

/// Item 3: `drop_model("m")` also invalidates `m:*`: a peer's reload does not adopt the old
/// submodel canonical.
#[test]
fn drop_model_invalidates_submodels() {
    let group = CacheGroup::<Placed>::new(1000).unwrap();
    let (gpu0, gpu1) = (group.cache("cuda:0"), group.cache("cuda:1"));
    let old = gpu0.put("m:vae", Placed(1), 10, PutOptions::default()).unwrap().into_loaded().lock();
    gpu0.drop_model("m");
    let new = gpu1.put("m:vae", Placed(1), 10, PutOptions::default()).unwrap().into_loaded().lock();
    assert!(!new.shares_weights_with(&old), "the reload adopted the dropped submodel");
}

/// Item 1: a copy used through a detached record (locked on the device, dropped, re-admitted)
/// still counts against the device budget.
#[test]
fn a_copy_used_through_a_detached_record_still_counts() {
    let group = CacheGroup::<Placed>::new(1000).unwrap();
    let gpu = group.cache("cuda:0");
    gpu.set_device_budget(Some(100), CallOptions::new()).unwrap();
    // The second lock waits for room that only the first one's release makes: briefly.
    gpu.set_move_wait(std::time::Duration::from_millis(1)).unwrap();
    let first =
        gpu.put("m", Placed(60), 10, PutOptions::default()).unwrap().into_loaded().lock_on_device().unwrap();
    gpu.drop_model("m");
    let again = gpu.put("m", Placed(60), 10, PutOptions::default()).unwrap().into_loaded().lock_on_device();
    assert!(
        matches!(again, Err(CacheError::DeviceFull { .. })),
        "120 device bytes live on a 100-byte device"
    );
    assert_eq!(gpu.device_bytes(), 60);
    drop(first);
    assert_eq!(gpu.device_bytes(), 0);
}

/// Items 14 and 19: sizes that would overflow the budget's sums and malformed keys are refused,
/// changing nothing.
#[test]
fn overflowing_sizes_and_bad_keys_are_refused() {
    let group = CacheGroup::<Placed>::new(u64::MAX).unwrap();
    // Under the hard budget a sum past `u64::MAX` is no room: wait for it only briefly.
    group.budget().set_room_wait(std::time::Duration::from_millis(1));
    let gpu = group.cache("cuda:0");
    let half = u64::MAX / 2 + 1;
    let a = gpu.put("a", Placed(1), half, PutOptions::default()).unwrap();
    assert!(gpu.put("b", Placed(1), half, PutOptions::default()).is_err(), "the sum overflows");
    let private = PutOptions { shared: false, ..PutOptions::default() };
    assert!(gpu.put("c", Placed(1), half, private).is_err(), "the sum overflows");
    assert_eq!(group.budget().in_use(), half);
    assert_eq!(gpu.keys(), ["a"]);
    for key in ["", "../etc", "a\0b"] {
        assert!(gpu.put(key, Placed(1), 1, PutOptions::default()).is_err(), "key {key:?} accepted");
    }
    assert!(gpu.put("m:vae", Placed(1), 1, PutOptions::default()).is_ok(), "a submodel key is valid");
    drop(a);
}

/// A panicking eviction callback does not cut the evictions short: every evicted record is
/// dropped and reported, then the panic reaches the caller.
#[test]
fn a_panicking_eviction_callback_still_reports_every_eviction() {
    let group = CacheGroup::<Placed>::new(1000).unwrap();
    let gpu = group.cache("cuda:0");
    let seen = Arc::new(Mutex::new(Vec::new()));
    let log = Arc::clone(&seen);
    gpu.on_evict(move |key, _| {
        log.lock().unwrap().push(key.to_owned());
        assert_ne!(key, "a", "the callback panics for a");
    });
    for key in ["a", "b"] {
        drop(gpu.put(key, Placed(1), 10, PutOptions::default()).unwrap());
    }
    assert!(catch_unwind(AssertUnwindSafe(|| gpu.shutdown())).is_err());
    assert_eq!(*seen.lock().unwrap(), ["a", "b"]);
    assert_eq!(group.budget().in_use(), 0);
    assert!(gpu.keys().is_empty());
}
