//! Atomic replacement on the production runtime (SPEC 1.11): replaces under concurrent infers
//! never show `NotFound`, each thread sees the versions in order, a failed load leaves the old
//! version serving, and through a cache the id keeps its queue position and its pin. The
//! interleavings are explored by the sim's `S-R1`.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use resident::runtime::Arc;
use resident::{
    BoxError, CallOptions, FixedSizeCache, FixedSizeConfig, Loader, Manager, ManagerError, ManagerExt, Model,
    ModelId, ModelManager, Replaced,
};

/// One loaded version; counts its unloads.
struct Version {
    number: usize,
    unloads: Arc<AtomicUsize>,
}

impl Model for Version {
    fn size_bytes(&self) -> u64 {
        1
    }

    fn unload(&self) -> Result<(), BoxError> {
        self.unloads.fetch_add(1, Ordering::SeqCst);
        Ok(())
    }
}

/// Numbers its loads; fails while `broken`.
#[derive(Default)]
struct Versions {
    loads: AtomicUsize,
    unloads: Arc<AtomicUsize>,
    broken: AtomicBool,
}

struct Handle(Arc<Versions>);

impl Loader for Handle {
    type Model = Version;

    fn load(&self, _: &ModelId) -> Result<Version, BoxError> {
        if self.0.broken.load(Ordering::SeqCst) {
            return Err("corrupt file".into());
        }
        let number = self.0.loads.fetch_add(1, Ordering::SeqCst);
        Ok(Version { number, unloads: Arc::clone(&self.0.unloads) })
    }
}

fn id(s: &str) -> ModelId {
    ModelId::new(s).expect("valid")
}

#[test]
fn replaces_under_concurrent_infers_show_no_not_found() {
    const REPLACES: usize = 50;
    let versions = Arc::new(Versions::default());
    let manager = Arc::new(ModelManager::new(Handle(Arc::clone(&versions))));
    manager.add_model("m", None).expect("loads");
    let done = Arc::new(AtomicBool::new(false));
    let readers: Vec<_> = (0..4)
        .map(|_| {
            let (manager, done) = (Arc::clone(&manager), Arc::clone(&done));
            std::thread::spawn(move || {
                let (mut seen, mut not_found, mut last) = (0usize, 0usize, 0usize);
                // Every reader keeps reading until the last replace is done, then once more.
                loop {
                    let finished = done.load(Ordering::SeqCst);
                    match manager.infer("m", |v| v.number) {
                        Ok(number) => {
                            assert!(number >= last, "versions went back: {number} after {last}");
                            last = number;
                            seen += 1;
                        }
                        Err(ManagerError::NotFound { .. }) => not_found += 1,
                        Err(other) => panic!("an infer failed: {other}"),
                    }
                    if finished {
                        return (seen, not_found, last);
                    }
                }
            })
        })
        .collect();
    for _ in 0..REPLACES {
        let replaced = manager.replace("m", None).expect("replaces");
        assert!(matches!(replaced, Replaced::Unloaded), "{replaced:?}");
    }
    done.store(true, Ordering::SeqCst);
    for reader in readers {
        let (seen, not_found, last) = reader.join().expect("no panic");
        assert_eq!(not_found, 0, "a request saw NotFound during a replace");
        assert!(seen > 0);
        assert_eq!(last, REPLACES, "the last read saw the last version");
    }
    assert_eq!(versions.unloads.load(Ordering::SeqCst), REPLACES, "every old version unloaded once");
}

#[test]
fn a_failed_load_leaves_the_old_version_serving() {
    let versions = Arc::new(Versions::default());
    let manager = ModelManager::new(Handle(Arc::clone(&versions)));
    manager.add_model("m", None).expect("loads");
    versions.broken.store(true, Ordering::SeqCst);
    let failed = manager.replace("m", None);
    assert!(matches!(failed, Err(ManagerError::Load { .. })), "{failed:?}");
    assert_eq!(manager.infer("m", |v| v.number).expect("still serving"), 0);
    assert_eq!(versions.unloads.load(Ordering::SeqCst), 0);
}

#[test]
fn through_a_cache_the_id_keeps_its_place_and_its_pin() {
    let versions = Arc::new(Versions::default());
    let cache =
        FixedSizeCache::new(ModelManager::new(Handle(Arc::clone(&versions))), FixedSizeConfig::new(3))
            .expect("valid");
    for m in ["a", "b", "c"] {
        cache.add_model(m, None).expect("loads");
    }
    cache.pin("a").expect("registered");
    // A full cache makes room for the new version beside the old one: the least recently used
    // unpinned id other than `a` goes.
    assert!(matches!(cache.replace("a", None), Ok(Replaced::Unloaded)));
    assert_eq!(cache.queue(), [id("a"), id("c")], "a kept its place; b made room");
    assert_eq!(cache.pinned(), [id("a")]);
    assert_eq!(cache.infer("a", |v| v.number).expect("served"), 3);
    // A replace of an id that is not registered adds it.
    assert!(matches!(cache.replace("d", None), Ok(Replaced::Added)));
    assert_eq!(cache.queue(), [id("c"), id("a"), id("d")], "the infer made a the most recently used");
}

/// A cache of one (one model per device): every replace in place drains, unloads, then loads,
/// and readers racing it wait for the new version, never finding the id gone.
#[test]
fn in_place_replaces_through_a_cache_of_one_show_no_not_found() {
    const REPLACES: usize = 30;
    let versions = Arc::new(Versions::default());
    let cache =
        FixedSizeCache::new(ModelManager::new(Handle(Arc::clone(&versions))), FixedSizeConfig::new(1))
            .expect("valid");
    let cache = Arc::new(cache);
    cache.add_model("m", None).expect("loads");
    let done = Arc::new(AtomicBool::new(false));
    let readers: Vec<_> = (0..3)
        .map(|_| {
            let (cache, done) = (Arc::clone(&cache), Arc::clone(&done));
            std::thread::spawn(move || {
                let mut last = 0;
                loop {
                    let finished = done.load(Ordering::SeqCst);
                    let number = cache.infer("m", |v| v.number).expect("served during every swap");
                    assert!(number >= last, "versions went back: {number} after {last}");
                    last = number;
                    if finished {
                        return last;
                    }
                }
            })
        })
        .collect();
    for _ in 0..REPLACES {
        let beside = cache.replace("m", None);
        assert!(matches!(beside, Err(ManagerError::NoSlotBeside { .. })), "{beside:?}");
        let swapped = cache.replace_in_place("m", None).expect("swaps");
        assert!(matches!(swapped, Replaced::Unloaded), "{swapped:?}");
    }
    done.store(true, Ordering::SeqCst);
    for reader in readers {
        assert_eq!(reader.join().expect("no panic"), REPLACES, "the last read saw the last version");
    }
    assert_eq!(versions.unloads.load(Ordering::SeqCst), REPLACES, "every old version unloaded once");
    assert_eq!(cache.queue(), [id("m")]);
}

#[test]
fn in_place_is_refused_while_a_lease_outlives_the_drain() {
    let versions = Arc::new(Versions::default());
    let manager = ModelManager::new(Handle(Arc::clone(&versions)));
    manager.add_model("m", None).expect("loads");
    let serving = manager.lease("m").expect("registered");
    let within = CallOptions::new().with_timeout(std::time::Duration::from_millis(10));
    let refused = manager.replace_in_place_with("m", None, within);
    assert!(matches!(refused, Err(ManagerError::Busy { leases: 1, .. })), "{refused:?}");
    // Nothing changed: the old version serves on, to new leases too.
    assert_eq!(manager.infer("m", |v| v.number).expect("still serving"), 0);
    assert_eq!(versions.unloads.load(Ordering::SeqCst), 0);
    drop(serving);
    assert!(matches!(manager.replace_in_place("m", None), Ok(Replaced::Unloaded)));
    assert_eq!(manager.infer("m", |v| v.number).expect("v1 serves"), 1);
}

#[test]
fn in_place_a_failed_load_leaves_the_id_unregistered() {
    let versions = Arc::new(Versions::default());
    let cache =
        FixedSizeCache::new(ModelManager::new(Handle(Arc::clone(&versions))), FixedSizeConfig::new(2))
            .expect("valid");
    cache.add_model("m", None).expect("loads");
    cache.pin("m").expect("registered");
    versions.broken.store(true, Ordering::SeqCst);
    let failed = cache.replace_in_place("m", None);
    assert!(matches!(failed, Err(ManagerError::Load { .. })), "{failed:?}");
    // The old version was unloaded before the load: it cannot come back.
    assert_eq!(versions.unloads.load(Ordering::SeqCst), 1);
    assert!(!cache.contains("m"));
    assert!(matches!(cache.lease("m"), Err(ManagerError::NotFound { .. })));
    assert!(cache.queue().is_empty(), "{:?}", cache.queue());
    assert_eq!(cache.pinned(), [id("m")], "the pin stays, as after a remove");
    // Not registered: a replace in place adds.
    versions.broken.store(false, Ordering::SeqCst);
    assert!(matches!(cache.replace_in_place("m", None), Ok(Replaced::Added)));
}
