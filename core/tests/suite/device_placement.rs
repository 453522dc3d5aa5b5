//! Placing locked records on a cache's device within its device budget: sharing, offloading
//! unlocked copies smallest first, refusing when locked copies fill it, failed and blocked moves,
//! and lowering the budget while serving.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, mpsc};

use resident::cache::{CacheGroup, DeviceWeights, PutOptions};
use resident::{BoxError, CacheError, CallOptions};

/// A gate the test opens (flag and condition variable), and where a blocked move says it started.
type Gate = Arc<(Mutex<bool>, Condvar, mpsc::SyncSender<()>)>;

/// Test weights: device bytes, a move counter, a failure switch and an optional gate.
#[derive(Default)]
struct Weights {
    device_bytes: u64,
    moves: AtomicUsize,
    fail: Mutex<bool>,
    gate: Option<Gate>,
}

impl DeviceWeights for Weights {
    type OnDevice = String;

    fn device_bytes(&self) -> u64 {
        self.device_bytes
    }

    fn to_device(&self, device: &str) -> Result<String, BoxError> {
        self.moves.fetch_add(1, Ordering::SeqCst);
        if let Some(gate) = &self.gate {
            gate.2.send(()).unwrap();
            let mut open = gate.0.lock().unwrap();
            while !*open {
                open = gate.1.wait(open).unwrap();
            }
        }
        if *self.fail.lock().unwrap() {
            return Err("device out of memory".into());
        }
        Ok(format!("on {device}"))
    }
}

fn weights(device_bytes: u64) -> Weights {
    Weights { device_bytes, ..Weights::default() }
}

/// The group's cache on `cuda:0`, its waits for device room and for another move bounded at a
/// few seconds: a defect that keeps room from ever coming then fails a test with a typed
/// timeout rather than hanging it for the default minute.
fn gpu(group: &Arc<CacheGroup<Weights>>) -> Arc<resident::cache::DeviceCache<Weights>> {
    let gpu = group.cache("cuda:0");
    gpu.set_move_wait(std::time::Duration::from_secs(5)).unwrap();
    gpu
}

/// Puts `key` (`device_bytes` on the device, `bytes` in RAM) into `cache` and locks its copy on
/// the device.
fn placed(
    cache: &Arc<resident::cache::DeviceCache<Weights>>,
    key: &str,
    device_bytes: u64,
    bytes: u64,
) -> resident::cache::DeviceGuard<Weights> {
    cache
        .put(key, weights(device_bytes), bytes, PutOptions::default())
        .unwrap()
        .into_loaded()
        .lock_on_device()
        .unwrap()
}

#[test]
fn unlocked_copies_are_offloaded_smallest_first_and_locked_ones_never() {
    let group = CacheGroup::<Weights>::new(1000).unwrap();
    let gpu = gpu(&group);
    gpu.set_device_budget(Some(100), CallOptions::new()).unwrap();
    for (key, bytes) in [("small", 20), ("big", 50)] {
        drop(
            gpu.put(key, weights(bytes), 10, PutOptions::default())
                .unwrap()
                .into_loaded()
                .lock_on_device()
                .unwrap(),
        );
    }
    assert_eq!(gpu.device_bytes(), 70);
    let held = placed(&gpu, "held", 30, 10);
    assert_eq!(*held, "on cuda:0");
    assert_eq!(gpu.device_bytes(), 100, "30 more fit exactly");
    let next = placed(&gpu, "next", 20, 10);
    assert_eq!(gpu.device_bytes(), 100, "small (20) was offloaded, not big and not the locked one");
    // The locked copies could go (90 fits the budget): the lock waits for room, boundedly.
    gpu.set_move_wait(std::time::Duration::from_millis(1)).unwrap();
    let err = gpu
        .put("huge", weights(90), 10, PutOptions::default())
        .unwrap()
        .into_loaded()
        .lock_on_device()
        .unwrap_err();
    assert!(matches!(err, CacheError::DeviceFull { needed: 90, budget: 100, .. }), "{err}");
    assert_eq!(gpu.device_bytes(), 100, "a refusal offloads nothing");
    let twice = gpu.get("held").unwrap().lock_on_device().unwrap();
    assert!(twice.same_copy(&held) && !twice.same_copy(&next), "a second lock uses the resident copy");
    drop((held, next, twice));
    let again = gpu.get("held").unwrap().lock_on_device().unwrap();
    assert_eq!(*again, "on cuda:0");
}

#[test]
fn lowering_the_device_budget_offloads_idle_copies_lru_first_and_waits_for_locked_ones() {
    let group = CacheGroup::<Weights>::new(1000).unwrap();
    let gpu = gpu(&group);
    gpu.set_device_budget(Some(100), CallOptions::new()).unwrap();
    for key in ["old", "young"] {
        drop(placed(&gpu, key, 30, 10));
    }
    let held = placed(&gpu, "held", 30, 10);
    assert_eq!(gpu.device_bytes(), 90);

    gpu.set_device_budget(Some(60), CallOptions::new()).unwrap();
    assert_eq!(gpu.device_bytes(), 60, "one idle copy offloaded");
    let young = gpu.get("young").unwrap().lock_on_device().unwrap();
    assert_eq!(young.cpu().moves.load(Ordering::SeqCst), 1, "the least recently used (old) went, not young");
    drop(young);

    let short = CallOptions::new().with_timeout(std::time::Duration::from_millis(1));
    let err = gpu.set_device_budget(Some(20), short).unwrap_err();
    match &err {
        CacheError::DeviceOverBudget { budget: 20, used: 30, locked, .. } => assert_eq!(locked, &["held"]),
        other => panic!("lowering under a locked copy gave {other}"),
    }
    assert_eq!(gpu.device_bytes(), 30, "every idle copy offloaded; the locked one stays");
    assert_eq!(gpu.device_budget_cap(), Some(20), "the new budget stays");
    let larger = gpu.get("young").unwrap().lock_on_device().unwrap_err();
    assert!(matches!(larger, CacheError::DeviceFull { needed: 30, budget: 20, .. }), "{larger}");

    // A lowering that may wait for the unlock: it returns once the locked copy could go.
    let lowering = std::thread::scope(|scope| {
        let waiter = scope.spawn(|| gpu.set_device_budget(Some(10), CallOptions::new()));
        drop(held);
        waiter.join().unwrap()
    });
    assert_eq!(lowering, Ok(()));
    assert_eq!(gpu.device_bytes(), 0);

    let refused = gpu.set_device_budget(Some(0), CallOptions::new()).unwrap_err();
    assert!(matches!(refused, CacheError::InvalidConfig(_)), "{refused}");
    assert_eq!(gpu.device_budget_cap(), Some(10), "a refused budget changes nothing");
    gpu.set_device_budget(None, CallOptions::new()).unwrap();
    assert_eq!(gpu.device_budget_cap(), None);
}

#[test]
fn a_locked_copy_is_never_offloaded_even_when_it_is_the_smallest() {
    let group = CacheGroup::<Weights>::new(1000).unwrap();
    let gpu = gpu(&group);
    gpu.set_device_budget(Some(100), CallOptions::new()).unwrap();
    let tiny = placed(&gpu, "tiny", 10, 10);
    drop(placed(&gpu, "big", 50, 10));
    let new = placed(&gpu, "new", 45, 10);
    assert_eq!(gpu.device_bytes(), 55, "big (50) was offloaded; the locked tiny copy stays");
    let again = gpu.get("tiny").unwrap().lock_on_device().unwrap();
    assert!(again.same_copy(&tiny), "tiny's resident copy was not taken from its slot");
    assert_eq!(again.cpu().moves.load(Ordering::SeqCst), 1, "tiny moved once");
    drop((tiny, new, again));
}

#[test]
fn a_failed_move_is_a_typed_error_and_the_record_stays_usable() {
    let group = CacheGroup::<Weights>::new(1000).unwrap();
    let gpu = gpu(&group);
    let w = weights(10);
    *w.fail.lock().unwrap() = true;
    let admission = gpu.put("m", w, 10, PutOptions::default()).unwrap();
    let err = admission.into_loaded().lock_on_device().unwrap_err();
    match &err {
        CacheError::DeviceMove { key, source } => {
            assert_eq!((key.as_str(), source.to_string()), ("m", "device out of memory".to_owned()));
            // The mover's own error is the source, not a copy of its text.
            let source = std::error::Error::source(&err).expect("a source");
            assert_eq!(source.to_string(), "device out of memory");
        }
        other => panic!("a failed move gave {other}"),
    }
    let cpu = gpu.get("m").expect("still resident").lock();
    *cpu.fail.lock().unwrap() = false;
    drop(cpu);
    let placed = gpu.get("m").unwrap().lock_on_device().unwrap();
    assert_eq!(placed.cpu().moves.load(Ordering::SeqCst), 2);
    assert_eq!(gpu.device_bytes(), 10);
}

#[test]
fn a_second_locker_waits_for_the_first_move_and_shares_its_copy() {
    let group = CacheGroup::<Weights>::new(1000).unwrap();
    let gpu = gpu(&group);
    let (entered_tx, entered) = mpsc::sync_channel(4);
    let gate = Arc::new((Mutex::new(false), Condvar::new(), entered_tx));
    let w = Weights { device_bytes: 10, gate: Some(Arc::clone(&gate)), ..Weights::default() };
    drop(gpu.put("m", w, 10, PutOptions::default()).unwrap());
    let spawn_locker = || {
        let gpu = Arc::clone(&gpu);
        std::thread::spawn(move || {
            gpu.get("m").unwrap().lock_on_device().map(|g| g.cpu().moves.load(Ordering::SeqCst))
        })
    };
    let first = spawn_locker();
    entered.recv().unwrap(); // the first locker is inside its move
    let second = spawn_locker();
    *gate.0.lock().unwrap() = true;
    gate.1.notify_all();
    assert_eq!(first.join().unwrap().unwrap(), 1);
    assert_eq!(second.join().unwrap().unwrap(), 1, "one move for both lockers");
    assert!(entered.try_recv().is_err(), "no second move started");
}
