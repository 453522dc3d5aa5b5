//! Graceful shutdown on the production runtime (SPEC 1.13): live leases drain, models unload,
//! what cannot be unloaded is reported and stays, later adds and leases are refused, and a
//! second shutdown settles what is left. The races are explored by the sim's `S-G1` and
//! `W-16`; here threads meet at explicit sync points, never at a time.

use std::sync::mpsc;
use std::time::Duration;

use resident::runtime::Arc;
use resident::{
    BoxError, CallOptions, FixedSizeCache, FixedSizeConfig, Loader, Manager, ManagerError, ManagerExt, Model,
    ModelId, ModelManager,
};

struct Weights;

impl Model for Weights {
    fn size_bytes(&self) -> u64 {
        1
    }
}

struct Build;

impl Loader for Build {
    type Model = Weights;

    fn load(&self, _: &ModelId) -> Result<Weights, BoxError> {
        Ok(Weights)
    }
}

fn id(s: &str) -> ModelId {
    ModelId::new(s).expect("valid")
}

#[test]
fn a_shutdown_drains_the_live_lease_then_unloads_everything() {
    let cache =
        Arc::new(FixedSizeCache::new(ModelManager::new(Build), FixedSizeConfig::new(4)).expect("valid"));
    cache.add_model("a", None).expect("loads");
    cache.add_model("b", None).expect("loads");
    let lease = cache.lease("a").expect("registered");
    let (started, shutting) = mpsc::channel();
    let stopper = {
        let cache = Arc::clone(&cache);
        std::thread::spawn(move || {
            started.send(()).expect("the test waits");
            cache.shutdown()
        })
    };
    shutting.recv().expect("the thread started");
    // Once the shutdown has begun, new leases are refused while the live one keeps serving.
    while !cache.is_shut_down() {
        std::thread::yield_now();
    }
    assert!(matches!(cache.lease("b"), Err(ManagerError::ShutDown { .. })));
    assert!(matches!(cache.add_model("c", None), Err(ManagerError::ShutDown { .. })));
    assert_eq!(lease.size_bytes(), 1);
    drop(lease);
    let report = stopper.join().expect("no panic");
    assert!(report.is_complete(), "{report:?}");
    assert_eq!(report.removed, [id("a"), id("b")]);
    assert!(cache.is_empty() && cache.queue().is_empty());
}

#[test]
fn what_cannot_drain_by_the_deadline_is_reported_and_a_second_shutdown_settles_it() {
    let manager = ModelManager::new(Build);
    manager.add_model("kept", None).expect("loads");
    manager.add_model("idle", None).expect("loads");
    let lease = manager.lease("kept").expect("registered");
    let report = manager.shutdown_with(CallOptions::new().with_timeout(Duration::from_millis(20)));
    assert_eq!(report.removed, [id("idle")]);
    assert!(
        matches!(report.failed.as_slice(), [(kept, ManagerError::Busy { leases: 1, .. })] if *kept == id("kept")),
        "{report:?}"
    );
    assert_eq!(manager.ids(), [id("kept")], "still registered, as reported");
    assert!(matches!(manager.lease("kept"), Err(ManagerError::ShutDown { .. })));
    drop(lease);
    let again = manager.shutdown();
    assert!(again.is_complete() && again.removed == [id("kept")], "{again:?}");
    assert!(manager.is_empty());
    assert!(manager.shutdown().removed.is_empty(), "idempotent");
}
