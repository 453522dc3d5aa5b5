//! More models in demand than slots, on the production runtime (SPEC 2.14): the add waiting for
//! capacity is handed its victim at the end of the victim's last lease, and adds waiting for
//! capacity are served in arrival order. The threads synchronise on the cache's own state
//! ([`FixedSizeCache::waiting`]), never on time.

use std::sync::{Arc, Mutex};
use std::thread;
use std::time::Duration;

use resident::{
    Added, BoxError, FixedSizeCache, FixedSizeConfig, Loader, ManagerError, ManagerExt, Model, ModelId,
    ModelManager,
};

struct Tiny;

impl Model for Tiny {
    fn size_bytes(&self) -> u64 {
        1
    }
}

/// Records the order of its loads.
#[derive(Default)]
struct Recording(Arc<Mutex<Vec<String>>>);

impl Loader for Recording {
    type Model = Tiny;

    fn load(&self, id: &ModelId) -> Result<Tiny, BoxError> {
        self.0.lock().unwrap().push(id.to_string());
        Ok(Tiny)
    }
}

type Cache = Arc<FixedSizeCache<ModelManager<Recording>>>;

/// A capacity wait that outlasts any schedule of these tests.
const LONG: Duration = Duration::from_secs(60);

/// A cache of one with capacity wait `wait`, and its load log.
fn cache_of_one(wait: Duration) -> (Cache, Arc<Mutex<Vec<String>>>) {
    let loads = Arc::new(Mutex::new(Vec::new()));
    let manager = ModelManager::new(Recording(Arc::clone(&loads)));
    let config = FixedSizeConfig::new(1).with_capacity_wait(wait);
    (Arc::new(FixedSizeCache::new(manager, config).unwrap()), loads)
}

fn add_in_background(cache: &Cache, id: &'static str) -> thread::JoinHandle<Result<Added, ManagerError>> {
    let cache = Arc::clone(cache);
    thread::spawn(move || cache.add_model(id, None))
}

/// Blocks until `n` adds stand in line for capacity.
fn until_waiting(cache: &Cache, n: usize) {
    while cache.waiting() < n {
        thread::yield_now();
    }
}

#[test]
fn the_last_lease_of_a_designated_victim_hands_it_to_the_waiting_add() {
    let (cache, _) = cache_of_one(LONG);
    cache.add_model("a", None).unwrap();
    let lease = cache.lease("a").unwrap();
    let waiter = add_in_background(&cache, "b");
    until_waiting(&cache, 1);
    drop(lease);
    // Started after the last lease ended while `b` waited: waits for the eviction, then finds
    // `a` gone (a stream of leases can no longer starve the add).
    let again = cache.lease("a");
    assert!(matches!(again, Err(ManagerError::NotFound { .. })), "{again:?}");
    assert_eq!(waiter.join().unwrap().unwrap(), Added::Loaded);
    assert_eq!(cache.queue(), [ModelId::new("b").unwrap()]);
    assert_eq!(cache.waiting(), 0);
}

#[test]
fn adds_waiting_for_capacity_are_served_in_arrival_order() {
    let (cache, loads) = cache_of_one(LONG);
    cache.add_model("a", None).unwrap();
    let lease = cache.lease("a").unwrap();
    let first = add_in_background(&cache, "b");
    until_waiting(&cache, 1);
    let second = add_in_background(&cache, "c");
    until_waiting(&cache, 2);
    drop(lease);
    assert_eq!(first.join().unwrap().unwrap(), Added::Loaded);
    assert_eq!(second.join().unwrap().unwrap(), Added::Loaded);
    assert_eq!(*loads.lock().unwrap(), ["a", "b", "c"]);
    assert_eq!(cache.waiting(), 0);
}

#[test]
fn a_pinned_victim_is_given_up_and_reopened() {
    // A capacity wait long enough for the main thread to see the add in line on a loaded
    // machine, short enough to end the test: the add gives up in the end, the pinned model stays.
    let (cache, _) = cache_of_one(Duration::from_secs(1));
    cache.add_model("a", None).unwrap();
    let lease = cache.lease("a").unwrap();
    let waiter = add_in_background(&cache, "b");
    until_waiting(&cache, 1);
    cache.pin("a").unwrap();
    drop(lease);
    let refused = waiter.join().unwrap();
    assert!(matches!(refused, Err(ManagerError::CapacityExhausted { .. })), "{refused:?}");
    // The designation went with the add: `a` serves again.
    drop(cache.lease("a").unwrap());
    assert_eq!(cache.queue(), [ModelId::new("a").unwrap()]);
}
