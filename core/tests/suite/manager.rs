//! ModelManager behaviour on the production runtime. Concurrency here uses explicit sync points
//! (gates, channels); schedule exploration lives in `resident-sim`.

use std::collections::BTreeSet;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, mpsc};
use std::time::Duration;

use resident::{
    Added, BoxError, InvalidId, Loader, Manager, ManagerConfig, ManagerError, ManagerExt, Model, ModelId,
    ModelManager,
};

#[derive(Debug)]
struct TestModel {
    canonical: String,
    fail_unload: AtomicBool,
}

impl Model for TestModel {
    fn size_bytes(&self) -> u64 {
        self.canonical.len() as u64
    }

    fn unload(&self) -> Result<(), BoxError> {
        if self.fail_unload.load(Ordering::SeqCst) { Err("unload refused".into()) } else { Ok(()) }
    }
}

/// A gate the test opens; loads of gated ids wait on it.
#[derive(Default)]
struct Gate {
    open: Mutex<bool>,
    opened: Condvar,
}

impl Gate {
    fn wait(&self) {
        let mut open = self.open.lock().unwrap();
        while !*open {
            open = self.opened.wait(open).unwrap();
        }
    }
    fn open(&self) {
        *self.open.lock().unwrap() = true;
        self.opened.notify_all();
    }
}

#[derive(Default)]
struct TestLoader {
    seen: Mutex<Vec<String>>,
    fail: Mutex<BTreeSet<String>>,
    panic_once: Mutex<BTreeSet<String>>,
    gated: Mutex<BTreeSet<String>>,
    gate: Gate,
    entered: Mutex<Option<mpsc::Sender<String>>>,
}

impl Loader for TestLoader {
    type Model = TestModel;

    fn load(&self, id: &ModelId) -> Result<TestModel, BoxError> {
        let id = id.as_str().to_owned();
        self.seen.lock().unwrap().push(id.clone());
        if let Some(tx) = &*self.entered.lock().unwrap() {
            tx.send(id.clone()).unwrap();
        }
        if self.gated.lock().unwrap().contains(&id) {
            self.gate.wait();
        }
        if self.panic_once.lock().unwrap().remove(&id) {
            panic!("loader panicked on {id}");
        }
        if self.fail.lock().unwrap().contains(&id) {
            return Err(format!("no such model {id}").into());
        }
        Ok(TestModel { canonical: id, fail_unload: AtomicBool::new(false) })
    }
}

fn manager() -> ModelManager<TestLoader> {
    let config = ManagerConfig::default()
        .with_lock_timeout(Duration::from_millis(50))
        .with_lease_drain_timeout(Duration::from_millis(50));
    ModelManager::with_config(TestLoader::default(), config).unwrap()
}

fn assert_clean<L: Loader>(m: &ModelManager<L>) {
    let snapshot = m.snapshot();
    for entry in &snapshot.lifecycle {
        assert!(snapshot.registered.contains(&entry.id), "entry of {} outlived its model", entry.id);
        assert_eq!((entry.reservations, entry.locked), (0, false), "{entry:?}");
    }
}

#[test]
fn cold_add_loads_once_then_warm_adds_do_not() {
    let m = manager();
    let loader = m.loader();
    assert_eq!(m.add_model("coco/3", None).unwrap(), Added::Loaded);
    assert_eq!(m.add_model("coco/3", None).unwrap(), Added::Warm);
    assert_eq!(*loader.seen.lock().unwrap(), ["coco/3"]);
    assert!(m.contains("coco/3"));
    assert_eq!((m.len(), m.is_empty()), (1, false));
    assert_eq!(m.ids(), [ModelId::new("coco/3").unwrap()]);
    assert_clean(&m);
}

#[test]
fn an_alias_is_its_own_entry_and_the_loader_gets_the_canonical_id() {
    let m = manager();
    let loader = m.loader();
    m.add_model("coco/3", Some("detector")).unwrap();
    assert!(m.contains("detector") && !m.contains("coco/3"));
    assert_eq!(m.infer("detector", |model| model.canonical.clone()).unwrap(), "coco/3");
    assert_eq!(m.add_model("coco/3", None).unwrap(), Added::Loaded, "canonical id is another entry");
    assert_eq!(*loader.seen.lock().unwrap(), ["coco/3", "coco/3"]);
    m.remove("detector").unwrap();
    assert!(!m.contains("detector") && m.contains("coco/3"));
    assert_clean(&m);
}

#[test]
fn a_failed_load_registers_nothing_and_leaks_no_entry() {
    let m = manager();
    let loader = m.loader();
    loader.fail.lock().unwrap().insert("broken".into());
    let err = m.add_model("broken", None).unwrap_err();
    assert!(matches!(&err, ManagerError::Load { id, .. } if id.as_str() == "broken"), "{err}");
    assert!(err.to_string().contains("no such model broken"), "{err}");
    assert!(m.is_empty());
    assert!(m.snapshot().lifecycle.is_empty());
}

#[test]
fn a_loader_panic_reaches_its_caller_and_poisons_nothing() {
    let m = manager();
    let loader = m.loader();
    loader.panic_once.lock().unwrap().insert("x".into());
    let panicked = catch_unwind(AssertUnwindSafe(|| m.add_model("x", None)));
    assert!(panicked.is_err());
    assert!(!m.contains("x"));
    assert!(m.snapshot().lifecycle.is_empty(), "the reservation was released while unwinding");
    assert_eq!(m.add_model("x", None).unwrap(), Added::Loaded, "the lifecycle lock is usable again");
    assert_clean(&m);
}

#[test]
fn removing_an_absent_id_is_not_found_and_leaks_nothing() {
    let m = manager();
    assert!(matches!(m.remove("ghost"), Err(ManagerError::NotFound { .. })));
    assert!(m.snapshot().lifecycle.is_empty());
}

#[test]
fn a_failed_unload_keeps_the_model_registered_and_usable() {
    let m = manager();
    m.add_model("x", None).unwrap();
    m.infer("x", |model| model.fail_unload.store(true, Ordering::SeqCst)).unwrap();
    assert!(matches!(m.remove("x"), Err(ManagerError::Unload { .. })));
    assert!(m.contains("x"));
    let lease = m.lease("x").expect("leases are accepted again after the failed removal");
    assert_eq!(lease.id().as_str(), "x");
    lease.fail_unload.store(false, Ordering::SeqCst);
    drop(lease);
    m.remove("x").unwrap();
    assert!(m.is_empty());
    assert_clean(&m);
}

#[test]
fn remove_refuses_to_unload_under_a_live_lease() {
    let m = manager();
    m.add_model("x", None).unwrap();
    let lease = m.lease("x").unwrap();
    let err = m.remove("x").unwrap_err();
    assert!(matches!(err, ManagerError::Busy { leases: 1, .. }), "{err}");
    assert!(m.contains("x"));
    assert_eq!(lease.canonical, "x", "the leased model is untouched");
    drop(lease);
    m.remove("x").unwrap();
    assert!(matches!(m.lease("x"), Err(ManagerError::NotFound { .. })));
    assert_clean(&m);
}

#[test]
fn bad_input_is_a_typed_error_and_changes_nothing() {
    let m = manager();
    let loader = m.loader();
    assert!(matches!(
        m.add_model("../etc", None),
        Err(ManagerError::InvalidId(InvalidId::BadComponent { .. }))
    ));
    assert!(matches!(m.add_model("ok", Some("")), Err(ManagerError::InvalidId(InvalidId::Empty))));
    assert!(matches!(m.remove("/abs"), Err(ManagerError::InvalidId(InvalidId::Absolute { .. }))));
    assert!(matches!(m.lease("a\0b"), Err(ManagerError::InvalidId(_))));
    // The base keeps no pins, but it still refuses an id no model could have.
    assert!(matches!(m.pin(""), Err(ManagerError::InvalidId(InvalidId::Empty))));
    assert!(matches!(m.unpin("../up"), Err(ManagerError::InvalidId(InvalidId::BadComponent { .. }))));
    assert!(m.pin("ok").is_ok() && m.unpin("ok").is_ok());
    assert!(loader.seen.lock().unwrap().is_empty());
    assert!(m.snapshot().lifecycle.is_empty());
    let zero = ManagerConfig::default().with_lock_timeout(Duration::ZERO);
    let err = ModelManager::with_config(TestLoader::default(), zero).unwrap_err();
    assert_eq!(err.field, "lock_timeout");
}

#[test]
fn a_caller_that_times_out_on_the_lifecycle_lock_changes_nothing() {
    let m = Arc::new(manager());
    let loader = m.loader();
    loader.gated.lock().unwrap().insert("slow".into());
    let (tx, rx) = mpsc::channel();
    *loader.entered.lock().unwrap() = Some(tx);
    let holder = {
        let m = Arc::clone(&m);
        std::thread::spawn(move || m.add_model("slow", None))
    };
    assert_eq!(rx.recv().unwrap(), "slow", "the holder is inside the loader, holding the lock");
    let err = m.add_model("slow", None).unwrap_err();
    assert!(matches!(err, ManagerError::LockTimeout { .. }), "{err}");
    let entry = m.snapshot().lifecycle.into_iter().find(|e| e.id.as_str() == "slow").unwrap();
    assert_eq!(entry.reservations, 1, "only the holder's reservation is left");
    loader.gate.open();
    assert_eq!(holder.join().unwrap().unwrap(), Added::Loaded);
    assert_eq!(loader.seen.lock().unwrap().len(), 1);
    assert_clean(&m);
}

#[test]
fn cold_loads_of_different_ids_overlap() {
    const N: usize = 16;
    struct Rendezvous {
        inside: Mutex<usize>,
        all_in: Condvar,
    }
    struct Overlapping(Arc<Rendezvous>);
    impl Loader for Overlapping {
        type Model = TestModel;
        fn load(&self, id: &ModelId) -> Result<TestModel, BoxError> {
            let mut inside = self.0.inside.lock().unwrap();
            *inside += 1;
            self.0.all_in.notify_all();
            // Every load waits for all N to be inside at once: that only happens if they overlap.
            // The bound turns a serialized manager into a failure instead of a hang.
            let (inside, wait) =
                self.0.all_in.wait_timeout_while(inside, Duration::from_secs(30), |n| *n < N).unwrap();
            if wait.timed_out() {
                return Err(format!("only {} loads overlapped", *inside).into());
            }
            Ok(TestModel { canonical: id.to_string(), fail_unload: AtomicBool::new(false) })
        }
    }
    let rendezvous = Arc::new(Rendezvous { inside: Mutex::new(0), all_in: Condvar::new() });
    let m = Arc::new(ModelManager::new(Overlapping(Arc::clone(&rendezvous))));
    let done = Arc::new(AtomicUsize::new(0));
    let threads: Vec<_> = (0..N)
        .map(|i| {
            let (m, done) = (Arc::clone(&m), Arc::clone(&done));
            std::thread::spawn(move || {
                m.add_model(&format!("model/{i}"), None).unwrap();
                done.fetch_add(1, Ordering::SeqCst);
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    assert_eq!((done.load(Ordering::SeqCst), m.len()), (N, N));
}

#[test]
fn the_manager_keeps_its_configuration_and_a_loader_declares_nothing_by_default() {
    let m = manager();
    assert_eq!(m.config().lock_timeout(), Duration::from_millis(50));
    assert_eq!(m.config().lease_drain_timeout(), Duration::from_millis(50));
    let id = ModelId::new("a").unwrap();
    assert!(matches!(m.loader().declared_bytes(&id), Ok(None)), "unknown unless the loader says");
}
