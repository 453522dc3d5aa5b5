//! Shared failure on the production runtime (SPEC 1.9): callers that wait for a load that fails
//! get its error without loading again, a caller that comes after loads afresh, and the opt-in
//! negative cache answers new callers for a while. The interleavings are explored by the sim's
//! `S-F1`; here the waiters are lined up with explicit sync points (the manager's own snapshot),
//! never with timing.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use resident::runtime::Arc;

use crate::manual_clock::ManualClock;
use resident::{
    Added, BoxError, FixedSizeCache, FixedSizeConfig, Loader, Manager, ManagerConfig, ManagerError,
    ManagerExt, Model, ModelId, ModelManager,
};

struct Weights;

impl Model for Weights {
    fn size_bytes(&self) -> u64 {
        1
    }
}

/// Fails while `broken`, counting every call.
#[derive(Default)]
struct Flaky {
    calls: AtomicUsize,
    broken: std::sync::atomic::AtomicBool,
}

/// The manager's handle on a shared [`Flaky`].
struct Handle(Arc<Flaky>);

impl Loader for Handle {
    type Model = Weights;

    fn load(&self, id: &ModelId) -> Result<Weights, BoxError> {
        let call = self.0.calls.fetch_add(1, Ordering::SeqCst);
        if self.0.broken.load(Ordering::SeqCst) {
            return Err(format!("{id}: corrupt file (call {call})").into());
        }
        Ok(Weights)
    }
}

fn flaky(broken: bool) -> Arc<Flaky> {
    let loader = Arc::new(Flaky::default());
    loader.broken.store(broken, Ordering::SeqCst);
    loader
}

/// Blocks until the current generation of `id` has `n` reservations.
fn until_reserved<M: Manager>(manager: &M, id: &str, n: usize) {
    while manager.snapshot().lifecycle.iter().find(|e| e.id.as_str() == id).map_or(0, |e| e.reservations) < n
    {
        std::thread::yield_now();
    }
}

/// Sixteen waiters line up behind a load of `x` that fails: the loader runs once, every waiter
/// gets that very error, and the id is left clean.
fn sixteen_waiters_share_one_failure<M: Manager + 'static>(manager: Arc<M>, loader: &Flaky) {
    let x = ModelId::new("x").expect("valid");
    let guard = manager.lock(&x).expect("uncontended");
    let waiters: Vec<_> = (0..16)
        .map(|_| {
            let manager = Arc::clone(&manager);
            std::thread::spawn(move || manager.add_model("x", None))
        })
        .collect();
    until_reserved(&*manager, "x", 17);
    let failed = manager.add_locked(&guard, &x);
    drop(guard);
    let Err(ManagerError::Load { source, .. }) = failed else { panic!("the load did not fail: {failed:?}") };
    for waiter in waiters {
        match waiter.join().expect("no panic") {
            Err(ManagerError::Load { source: shared, .. }) => {
                assert_eq!(shared, source, "the same error, shared")
            }
            other => panic!("a waiter got {other:?}"),
        }
    }
    assert_eq!(loader.calls.load(Ordering::SeqCst), 1, "one loader call for seventeen callers");
    assert!(
        manager.snapshot().lifecycle.iter().all(|e| e.id.as_str() != "x"),
        "every reservation of x released"
    );
}

/// The failure was delivered: a new caller loads afresh.
fn a_later_caller_loads_afresh<M: Manager>(manager: &M, loader: &Flaky) {
    let before = loader.calls.load(Ordering::SeqCst);
    assert!(matches!(manager.add_model("x", None), Err(ManagerError::Load { .. })));
    assert_eq!(loader.calls.load(Ordering::SeqCst), before + 1);
}

#[test]
fn sixteen_waiters_on_a_failing_load_cause_one_loader_call() {
    let loader = flaky(true);
    let manager = Arc::new(ModelManager::new(Handle(Arc::clone(&loader))));
    sixteen_waiters_share_one_failure(Arc::clone(&manager), &loader);
    a_later_caller_loads_afresh(&*manager, &loader);
}

#[test]
fn through_a_cache_the_waiters_of_a_failing_load_evict_nothing() {
    let loader = flaky(false);
    let cache = FixedSizeCache::new(ModelManager::new(Handle(Arc::clone(&loader))), FixedSizeConfig::new(2))
        .expect("valid");
    cache.add_model("a", None).expect("loads");
    cache.add_model("b", None).expect("loads");
    loader.broken.store(true, Ordering::SeqCst);
    loader.calls.store(0, Ordering::SeqCst);
    let cache = Arc::new(cache);
    // The failing load itself evicts `a` to make room; its waiters evict nothing more.
    sixteen_waiters_share_one_failure(Arc::clone(&cache), &loader);
    assert_eq!(cache.queue(), [ModelId::new("b").expect("valid")]);
    a_later_caller_loads_afresh(&*cache, &loader);
}

#[test]
fn waiters_for_another_model_under_the_same_alias_load_their_own() {
    let loader = flaky(true);
    let manager = Arc::new(ModelManager::new(Handle(Arc::clone(&loader))));
    let alias = ModelId::new("current").expect("valid");
    let guard = manager.lock(&alias).expect("uncontended");
    let other = {
        let manager = Arc::clone(&manager);
        std::thread::spawn(move || manager.add_model("v2", Some("current")))
    };
    until_reserved(&*manager, "current", 2);
    let failed = manager.add_locked(&guard, &ModelId::new("v1").expect("valid"));
    assert!(matches!(failed, Err(ManagerError::Load { .. })));
    loader.broken.store(false, Ordering::SeqCst);
    drop(guard);
    assert_eq!(other.join().expect("no panic").expect("v2 loads"), Added::Loaded);
    assert_eq!(loader.calls.load(Ordering::SeqCst), 2);
}

#[test]
fn the_negative_cache_answers_new_callers_until_it_expires() {
    let clock = ManualClock::default();
    let loader = flaky(true);
    let config = ManagerConfig::default().with_failure_cache(Duration::from_secs(2));
    let manager =
        ModelManager::with_runtime(Handle(Arc::clone(&loader)), config, clock.clone()).expect("valid");
    let first = manager.add_model("x", None);
    let Err(ManagerError::Load { source, .. }) = first else { panic!("{first:?}") };
    loader.broken.store(false, Ordering::SeqCst);
    clock.advance(Duration::from_secs(1));
    match manager.add_model("x", None) {
        Err(ManagerError::Load { source: again, .. }) => {
            assert_eq!(again, source, "remembered, not reloaded")
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(loader.calls.load(Ordering::SeqCst), 1);
    // Another model under the same resolved id is not answered by the failure of the first.
    assert_eq!(manager.add_model("y", Some("x")).expect("loads"), Added::Loaded);
    manager.remove("x").expect("removes");
    loader.broken.store(true, Ordering::SeqCst);
    assert!(matches!(manager.add_model("x", None), Err(ManagerError::Load { .. })));
    loader.broken.store(false, Ordering::SeqCst);
    clock.advance(Duration::from_millis(1999));
    assert!(matches!(manager.add_model("x", None), Err(ManagerError::Load { .. })), "still remembered");
    assert_eq!(loader.calls.load(Ordering::SeqCst), 3);
    clock.advance(Duration::from_millis(1));
    assert_eq!(manager.add_model("x", None).expect("expired: loads afresh"), Added::Loaded);
    assert_eq!(loader.calls.load(Ordering::SeqCst), 4);
    assert!(ManagerConfig::default().with_failure_cache(Duration::ZERO).validate().is_err());
}

/// Which errors are the expiry of a bounded wait (a caller's own, never shared) and which are
/// failures of a load: a copy larger than the whole device budget is a failure, for good.
#[test]
fn wait_expiries_are_told_from_failures() {
    use resident::CacheError;
    let waited = Duration::from_millis(5);
    let key = || "m".to_owned();
    assert!(CacheError::LoadWaitTimeout { key: key(), waited }.is_wait_expiry());
    assert!(CacheError::DeviceMoveTimeout { key: key(), waited }.is_wait_expiry());
    assert!(CacheError::DeviceFull { key: key(), needed: 10, budget: 100, used: 95 }.is_wait_expiry());
    assert!(!CacheError::DeviceFull { key: key(), needed: 200, budget: 100, used: 0 }.is_wait_expiry());
    assert!(!CacheError::TooLarge { key: key(), bytes: 200, cap: 100 }.is_wait_expiry());
    let id = resident::ModelId::new("m").unwrap();
    assert!(ManagerError::LockTimeout { id: id.clone(), waited }.is_wait_expiry());
    assert!(!ManagerError::NotFound { id }.is_wait_expiry());
}
