//! What resident reports through the `metrics` facade (the names listed in `resident::metrics`),
//! read back from a recorder installed for the test's thread.

use std::collections::BTreeMap;
use std::sync::{Mutex, mpsc};
use std::time::Duration;

use metrics_util::debugging::{DebugValue, DebuggingRecorder, Snapshotter};
use resident::cache::CacheGroup;
use resident::{
    BoxError, CallOptions, FixedSizeCache, FixedSizeConfig, Loader, ManagerConfig, ManagerError, ManagerExt,
    Model, ModelId, ModelManager,
};

struct Sized;

impl Model for Sized {
    fn size_bytes(&self) -> u64 {
        7
    }
}

/// Loads anything but ids starting with `bad`.
struct Picky;

impl Loader for Picky {
    type Model = Sized;

    fn load(&self, id: &ModelId) -> Result<Sized, BoxError> {
        if id.starts_with("bad") { Err("refused".into()) } else { Ok(Sized) }
    }
}

/// Every metric recorded so far, as `name{label=value,...}` → value.
fn read(snapshotter: &Snapshotter) -> BTreeMap<String, DebugValue> {
    snapshotter
        .snapshot()
        .into_vec()
        .into_iter()
        .map(|(key, _, _, value)| {
            let key = key.key();
            let labels: Vec<String> = key.labels().map(|l| format!("{}={}", l.key(), l.value())).collect();
            (format!("{}{{{}}}", key.name(), labels.join(",")), value)
        })
        .collect()
}

fn counter(metrics: &BTreeMap<String, DebugValue>, key: &str) -> u64 {
    match metrics.get(key) {
        Some(DebugValue::Counter(n)) => *n,
        other => panic!("{key}: {other:?} in {metrics:?}"),
    }
}

fn samples(metrics: &BTreeMap<String, DebugValue>, key: &str) -> usize {
    match metrics.get(key) {
        Some(DebugValue::Histogram(values)) => values.len(),
        None => 0,
        other => panic!("{key}: {other:?}"),
    }
}

fn gauge(metrics: &BTreeMap<String, DebugValue>, key: &str) -> f64 {
    match metrics.get(key) {
        Some(DebugValue::Gauge(value)) => value.into_inner(),
        other => panic!("{key}: {other:?} in {metrics:?}"),
    }
}

#[test]
fn loads_failures_evictions_and_refusals_are_counted() {
    let recorder = DebuggingRecorder::new();
    let snapshotter = recorder.snapshotter();
    metrics::with_local_recorder(&recorder, || {
        let config = FixedSizeConfig::new(1).with_capacity_wait(Duration::from_millis(1));
        let cache = FixedSizeCache::new(ModelManager::new(Picky), config).unwrap();
        cache.add_model("a", None).unwrap();
        cache.add_model("a", None).unwrap(); // warm: no load
        assert!(cache.add_model("bad", None).is_err());
        assert!(cache.add_model("bad/2", None).is_err());
        cache.add_model("b", None).unwrap(); // evicts a
        let _lease = cache.lease("b").unwrap();
        let refused = cache.add_model("c", None).unwrap_err(); // b in use: no room
        assert!(matches!(refused, ManagerError::CapacityExhausted { .. }), "{refused}");

        let metrics = read(&snapshotter);
        assert_eq!(counter(&metrics, "resident_model_loads_total{model=a}"), 1);
        assert_eq!(counter(&metrics, "resident_model_loads_total{model=b}"), 1);
        // Ids a loader refused are a caller's: no label, one series however many there are.
        assert_eq!(counter(&metrics, "resident_model_load_failures_total{}"), 2);
        let failure_series =
            metrics.keys().filter(|k| k.starts_with("resident_model_load_failures_total")).count();
        assert_eq!(failure_series, 1, "{metrics:?}");
        assert_eq!(samples(&metrics, "resident_model_load_duration_seconds{model=a}"), 1);
        assert_eq!(counter(&metrics, "resident_evictions_total{by=max_size}"), 1);
        assert_eq!(counter(&metrics, "resident_evicted_bytes_total{by=max_size}"), 7);
        assert_eq!(counter(&metrics, "resident_refusals_total{reason=capacity_exhausted}"), 1);
        assert_eq!(samples(&metrics, "resident_lock_wait_seconds{}"), 0, "no lock was contended");
        assert_eq!(samples(&metrics, "resident_lease_wait_seconds{}"), 0, "no lease waited");

        resident::metrics::record_models(&cache, "cpu");
        assert_eq!(gauge(&read(&snapshotter), "resident_models{device=cpu}"), 1.0);
    });
}

#[test]
fn a_contended_lock_records_its_wait_and_a_timeout_is_a_refusal() {
    let recorder = DebuggingRecorder::new();
    let snapshotter = recorder.snapshotter();
    let config = ManagerConfig::default().with_lock_timeout(Duration::from_millis(5));
    let manager = ModelManager::with_config(Picky, config).unwrap();
    let (locked_tx, locked) = mpsc::channel();
    let (release, release_rx) = mpsc::channel::<()>();
    let holder = &manager;
    std::thread::scope(|s| {
        s.spawn(move || {
            let guard = holder.lock("a").unwrap();
            locked_tx.send(()).unwrap();
            release_rx.recv().unwrap();
            drop(guard);
        });
        locked.recv().unwrap();
        metrics::with_local_recorder(&recorder, || {
            let timed_out = manager.lock("a").unwrap_err();
            assert!(matches!(timed_out, ManagerError::LockTimeout { .. }), "{timed_out}");
        });
        release.send(()).unwrap();
    });
    let metrics = read(&snapshotter);
    assert_eq!(samples(&metrics, "resident_lock_wait_seconds{}"), 1);
    assert_eq!(counter(&metrics, "resident_refusals_total{reason=lock_timeout}"), 1);
}

#[test]
fn a_wait_for_another_devices_load_that_runs_out_is_a_refusal() {
    let recorder = DebuggingRecorder::new();
    let snapshotter = recorder.snapshotter();
    let group = CacheGroup::<Vec<u8>>::new(100).unwrap();
    let (cpu, gpu) = (group.cache("cpu"), group.cache("gpu"));
    let (loading_tx, loading) = mpsc::channel();
    let (release, release_rx) = mpsc::channel::<()>();
    std::thread::scope(|s| {
        let cpu = &cpu;
        s.spawn(move || {
            let load = || {
                loading_tx.send(()).unwrap();
                release_rx.recv().unwrap();
                Ok::<_, resident::CacheError>(vec![0; 10])
            };
            drop(cpu.get_or_put("w", 10, load).unwrap());
        });
        loading.recv().unwrap();
        metrics::with_local_recorder(&recorder, || {
            let within = CallOptions::new().with_timeout(Duration::from_millis(5));
            let waited = gpu.get_or_put_with("w", 10, || Ok::<_, resident::CacheError>(vec![0; 10]), within);
            assert!(matches!(waited, Err(resident::CacheError::LoadWaitTimeout { .. })), "{waited:?}");
        });
        release.send(()).unwrap();
    });
    let metrics = read(&snapshotter);
    assert_eq!(counter(&metrics, "resident_refusals_total{reason=load_wait_timeout}"), 1);
}

/// Weights whose move to a device waits until the test lets it go, saying when it started.
struct GatedMove {
    started: Mutex<mpsc::Sender<()>>,
    go: Mutex<mpsc::Receiver<()>>,
}

impl resident::cache::DeviceWeights for GatedMove {
    type OnDevice = ();

    fn device_bytes(&self) -> u64 {
        1
    }

    fn to_device(&self, _: &str) -> Result<(), BoxError> {
        self.started.lock().unwrap().send(()).unwrap();
        self.go.lock().unwrap().recv().unwrap();
        Ok(())
    }
}

#[test]
fn a_wait_for_another_threads_move_that_runs_out_is_a_refusal() {
    let recorder = DebuggingRecorder::new();
    let snapshotter = recorder.snapshotter();
    let group = CacheGroup::<GatedMove>::new(100).unwrap();
    let gpu = group.cache("cuda:0");
    let ((started_tx, started), (go, go_rx)) = (mpsc::channel(), mpsc::channel());
    let weights = GatedMove { started: Mutex::new(started_tx), go: Mutex::new(go_rx) };
    drop(gpu.put("m", weights, 10, resident::cache::PutOptions::default()).unwrap());
    std::thread::scope(|s| {
        let gpu = &gpu;
        s.spawn(move || drop(gpu.get("m").unwrap().lock_on_device().unwrap()));
        started.recv().unwrap();
        metrics::with_local_recorder(&recorder, || {
            let within = CallOptions::new().with_timeout(Duration::from_millis(5));
            let waited = gpu.get("m").unwrap().lock_on_device_with(within);
            assert!(
                matches!(waited, Err(resident::CacheError::DeviceMoveTimeout { .. })),
                "{:?}",
                waited.err()
            );
        });
        go.send(()).unwrap();
    });
    let metrics = read(&snapshotter);
    assert_eq!(counter(&metrics, "resident_refusals_total{reason=move_timeout}"), 1);
}

#[test]
fn budget_gauges_are_set_on_scrape_and_cache_refusals_counted() {
    let recorder = DebuggingRecorder::new();
    let snapshotter = recorder.snapshotter();
    metrics::with_local_recorder(&recorder, || {
        let group = CacheGroup::<Vec<u8>>::new(100).unwrap();
        let cpu = group.cache("cpu");
        let weights = cpu.get_or_put("w", 60, || Ok::<_, resident::CacheError>(vec![0; 60])).unwrap();
        let too_large = cpu.get_or_put("huge", 101, || Ok::<_, resident::CacheError>(vec![0; 101]));
        assert!(matches!(too_large, Err(resident::CacheError::TooLarge { .. })));
        resident::metrics::record_budget(group.budget());
        resident::metrics::record_device(&cpu);
        let metrics = read(&snapshotter);
        assert_eq!(gauge(&metrics, "resident_memory_used_bytes{device=ram}"), 60.0);
        assert_eq!(gauge(&metrics, "resident_memory_reserved_bytes{device=ram}"), 0.0);
        assert_eq!(gauge(&metrics, "resident_memory_high_water_bytes{device=ram}"), 60.0);
        assert_eq!(gauge(&metrics, "resident_memory_budget_bytes{device=ram}"), 100.0);
        assert!(metrics.contains_key("resident_memory_used_bytes{device=cpu}"));
        assert_eq!(counter(&metrics, "resident_refusals_total{reason=too_large}"), 1);
        drop(weights);
        assert_eq!(cpu.make_room(100), 1);
        assert_eq!(counter(&read(&snapshotter), "resident_evicted_bytes_total{by=room}"), 60);
    });
}
