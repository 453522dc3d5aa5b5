//! The shared-weight cache on the production runtime: adoption across peers, truthful
//! accounting through shutdown, drop_model and cache drop, holds and stale release.

use std::time::Duration;

use resident::CacheError;
use resident::cache::{CacheGroup, PutOptions};
use resident::runtime::Arc;

type Weights = Vec<u8>;

fn weights(n: usize) -> Weights {
    vec![7; n]
}

#[test]
fn a_peer_adopts_the_live_canonical_instead_of_copying_it() {
    let group = CacheGroup::<Weights>::new(100).unwrap();
    let (gpu0, gpu1) = (group.cache("cuda:0"), group.cache("cuda:1"));
    let a = gpu0.put("m", weights(40), 40, PutOptions::default()).unwrap().into_loaded().lock();
    let b = gpu1.put("m", weights(40), 40, PutOptions::default()).unwrap().into_loaded().lock();
    assert!(a.shares_weights_with(&b));
    assert!(a.is_shared() && b.is_shared());
    assert_eq!((a.canonical_id(), a.canonical_id().is_some()), (b.canonical_id(), true));
    assert_eq!(group.budget().in_use(), 40, "one canonical, counted once");
    assert_eq!(group.store().live_keys(), ["m"]);
    drop((a, b));
    assert_eq!(group.budget().in_use(), 40, "resident, idle records keep it");
    gpu0.shutdown();
    assert_eq!(group.budget().in_use(), 40, "gpu1 still holds the canonical");
    gpu1.shutdown();
    assert_eq!(group.budget().in_use(), 0);
}

#[test]
fn shutdown_keeps_a_record_in_use_until_its_last_release() {
    // C-R1/C-R2/C-R5 in one line each: a shut-down record in use stays counted as shared, a peer
    // reload adopts it, and the last release evicts it with the bytes debited exactly once.
    let group = CacheGroup::<Weights>::new(100).unwrap();
    let (gpu0, gpu1) = (group.cache("cuda:0"), group.cache("cuda:1"));
    drop(gpu0.put("m", weights(30), 30, PutOptions::default()).unwrap());
    let held = gpu0.get("m").expect("resident");
    assert_eq!(gpu0.shutdown(), 0, "held: marked stale, not evicted");
    let peer = gpu1.put("m", weights(30), 30, PutOptions::default()).unwrap().into_loaded().lock();
    let mine = held.lock();
    assert!(mine.shares_weights_with(&peer));
    assert_eq!(group.budget().in_use(), 30);
    drop(mine);
    assert!(gpu0.keys().is_empty(), "the stale record went at its last release");
    assert_eq!(group.budget().in_use(), 30, "the peer still holds the canonical");
    drop(peer);
    gpu1.shutdown();
    assert_eq!(group.budget().in_use(), 0);
    assert_eq!(gpu0.stats().evictions, 1);
}

#[test]
fn admission_after_shutdown_is_stale_at_birth_and_prefetch_is_refused() {
    let group = CacheGroup::<Weights>::new(100).unwrap();
    let gpu = group.cache("cuda:0");
    gpu.shutdown();
    let prefetch = PutOptions { prefetch: true, ..PutOptions::default() };
    assert_eq!(gpu.put("p", weights(5), 5, prefetch).unwrap_err(), CacheError::ShutDown { key: "p".into() });
    let guard = gpu.put("m", weights(10), 10, PutOptions::default()).unwrap().into_loaded().lock();
    assert_eq!(guard.len(), 10);
    drop(guard);
    assert!(gpu.keys().is_empty() && group.budget().in_use() == 0);
    let cancelled = gpu.put("c", weights(10), 10, PutOptions::default()).unwrap();
    drop(cancelled); // C-R12: a loader cancelled between put and get still releases
    assert!(gpu.keys().is_empty() && group.budget().in_use() == 0);
}

#[test]
fn make_room_skips_locked_held_and_admitting_records() {
    let group = CacheGroup::<Weights>::new(100).unwrap();
    let gpu = group.cache("cuda:0");
    let locked = gpu.put("locked", weights(30), 30, PutOptions::default()).unwrap().into_loaded().lock();
    let held = gpu.put("held", weights(30), 30, PutOptions::default()).unwrap().into_loaded();
    let admitting = gpu.put("admitting", weights(30), 30, PutOptions::default()).unwrap();
    drop(gpu.put("idle", weights(10), 10, PutOptions::default()).unwrap());
    assert_eq!(gpu.make_room(50), 1, "only the idle record can go");
    assert_eq!(gpu.keys(), ["admitting", "held", "locked"]);
    drop((locked, held, admitting));
    assert_eq!(group.budget().in_use(), 90);
}

#[test]
fn drop_model_invalidates_so_a_rebuild_never_adopts_the_old_weights() {
    let group = CacheGroup::<Weights>::new(100).unwrap();
    let (gpu0, gpu1) = (group.cache("cuda:0"), group.cache("cuda:1"));
    let old = gpu0.put("m", vec![1; 10], 10, PutOptions::default()).unwrap().into_loaded().lock();
    assert_eq!(gpu0.drop_model("m"), 0, "locked: marked stale");
    let new = gpu1.put("m", vec![2; 10], 10, PutOptions::default()).unwrap().into_loaded().lock();
    assert!(!old.shares_weights_with(&new));
    assert_eq!((old[0], new[0]), (1, 2));
    assert_eq!(group.budget().in_use(), 20, "the old bytes stay counted until their holder lets go");
    drop(old);
    assert_eq!(group.budget().in_use(), 10);
    assert!(gpu0.keys().is_empty());
    drop(new);
}

#[test]
fn a_model_larger_than_the_budget_is_refused_before_admission() {
    let group = CacheGroup::<Weights>::new(10).unwrap();
    let gpu = group.cache("cuda:0");
    let err = gpu.put("huge", weights(1), 11, PutOptions::default()).unwrap_err();
    assert_eq!(err, CacheError::TooLarge { key: "huge".into(), bytes: 11, cap: 10 });
    assert!(gpu.keys().is_empty());
}

#[test]
fn non_shared_records_are_charged_per_cache_and_a_dropped_cache_releases_everything() {
    let group = CacheGroup::<Weights>::new(100).unwrap();
    let (gpu0, gpu1) = (group.cache("cuda:0"), group.cache("cuda:1"));
    let private = PutOptions { shared: false, ..PutOptions::default() };
    drop(gpu0.put("m", weights(20), 20, private).unwrap());
    let copy = gpu1.put("m", weights(20), 20, private).unwrap().into_loaded().lock();
    assert!(!copy.is_shared() && copy.canonical_id().is_none(), "a private copy");
    drop(copy);
    assert_eq!((gpu0.non_shared_bytes(), gpu1.non_shared_bytes(), group.budget().in_use()), (20, 20, 40));
    drop(gpu0); // C-R26: no shutdown
    assert_eq!(group.budget().in_use(), 20);
    drop(gpu1);
    assert_eq!(group.budget().in_use(), 0);
}

#[test]
fn a_peer_over_budget_is_reconciled_when_the_admitting_cache_needs_room() {
    let group = CacheGroup::<Weights>::new(50).unwrap();
    let (gpu0, gpu1) = (group.cache("cuda:0"), group.cache("cuda:1"));
    drop(gpu0.put("a", weights(30), 30, PutOptions::default()).unwrap());
    let b = gpu1.put("b", weights(30), 30, PutOptions::default()).unwrap().into_loaded().lock();
    assert!(gpu0.keys().is_empty(), "gpu1's make_room asked gpu0 to evict its idle record");
    assert_eq!(group.budget().in_use(), 30);
    let evicted = Arc::new(std::sync::Mutex::new(Vec::new()));
    let seen = Arc::clone(&evicted);
    gpu1.on_evict(move |key, bytes| seen.lock().unwrap().push((key.to_owned(), bytes)));
    drop(b);
    gpu1.drop_model("b");
    assert_eq!(*evicted.lock().unwrap(), [("b".to_owned(), 30)]);
}

#[test]
fn a_reconcile_evicts_only_the_least_recently_used_records_it_needs() {
    let group = CacheGroup::<Weights>::new(50).unwrap();
    let (gpu0, gpu1) = (group.cache("cuda:0"), group.cache("cuda:1"));
    for key in ["old", "new"] {
        drop(gpu1.put(key, weights(20), 20, PutOptions::default()).unwrap());
    }
    let a = gpu0.put("a", weights(20), 20, PutOptions::default()).unwrap().into_loaded().lock();
    assert_eq!(gpu1.keys(), ["new"], "one eviction was enough: the least recently used went");
    assert_eq!(group.budget().in_use(), 40);
    assert_eq!(gpu1.stats().evictions, 1);
    drop(a);
}

#[test]
fn adopting_a_live_canonical_evicts_nothing() {
    let group = CacheGroup::<Weights>::new(50).unwrap();
    let (gpu0, gpu1) = (group.cache("cuda:0"), group.cache("cuda:1"));
    let m = gpu0.put("m", weights(30), 30, PutOptions::default()).unwrap().into_loaded().lock();
    drop(gpu1.put("x", weights(20), 20, PutOptions::default()).unwrap());
    let adopted = gpu1.put("m", weights(30), 30, PutOptions::default()).unwrap().into_loaded().lock();
    assert!(adopted.shares_weights_with(&m));
    assert_eq!(gpu1.keys(), ["m", "x"], "no room was needed: x stays");
    assert_eq!(group.budget().in_use(), 50);
    drop((m, adopted));
}

#[test]
fn eviction_prefers_records_that_give_bytes_back() {
    let group = CacheGroup::<Weights>::new(50).unwrap();
    let (gpu0, gpu1) = (group.cache("cuda:0"), group.cache("cuda:1"));
    let shared = gpu1.put("s", weights(20), 20, PutOptions::default()).unwrap().into_loaded().lock();
    drop(gpu0.put("s", weights(20), 20, PutOptions::default()).unwrap()); // adopts: least recently used
    drop(gpu0.put("p", weights(20), 20, PutOptions::default()).unwrap());
    let n = gpu0.put("n", weights(20), 20, PutOptions::default()).unwrap();
    assert_eq!(gpu0.keys(), ["n", "s"], "evicting s would free nothing (cuda:1 holds it): p went");
    assert_eq!(group.budget().in_use(), 40);
    drop((n, shared));
}

#[test]
fn keep_alive_expires_idle_records_only_and_shutdown_cancels_it() {
    let group = CacheGroup::<Weights>::new(100).unwrap();
    let gpu = group.cache("cuda:0");
    assert!(gpu.set_keep_alive(Some(std::time::Duration::ZERO)));
    drop(gpu.put("idle", weights(10), 10, PutOptions::default()).unwrap());
    let held = gpu.put("held", weights(10), 10, PutOptions::default()).unwrap().into_loaded();
    assert_eq!(gpu.keys(), ["held"], "the next operation ran the expiry: idle went");
    assert_eq!(gpu.expire_idle(), 0, "a held record never expires");
    assert_eq!(gpu.stats().evictions, 1);
    drop(held.lock());
    gpu.shutdown();
    assert_eq!(gpu.keep_alive(), None);
    assert!(!gpu.set_keep_alive(Some(std::time::Duration::ZERO)), "never re-armed after shutdown");
}

/// A record released while no keep-alive was in force is idle from when the expiry first looks
/// at it (no claim read the clock), and a `get` expires nothing itself: only the timer, a
/// `put` or `expire_idle` do.
#[test]
fn a_record_released_untimed_counts_as_idle_from_the_first_expiry_pass() {
    // No timer thread: every expiry pass is the test's own.
    let clock = crate::manual_clock::ManualClock::without_background();
    let group = CacheGroup::<Weights, _>::with_runtime(100, clock.clone()).unwrap();
    let gpu = group.cache("cuda:0");
    drop(gpu.put("a", weights(10), 10, PutOptions::default()).unwrap().into_loaded().lock());
    clock.advance(Duration::from_secs(100));
    assert!(gpu.set_keep_alive(Some(Duration::from_secs(10))));
    gpu.expire_idle();
    assert_eq!(gpu.keys(), ["a"], "idle for 100 s before the keep-alive, but untimed: it starts now");
    clock.advance(Duration::from_secs(9));
    gpu.expire_idle();
    assert_eq!(gpu.keys(), ["a"], "9 s of 10");
    clock.advance(Duration::from_secs(1));
    gpu.expire_idle();
    assert!(gpu.keys().is_empty(), "10 s since the first pass timed it");
    // Timed from its release now: a get of a record past its keep-alive is still a hit.
    drop(gpu.put("b", weights(10), 10, PutOptions::default()).unwrap().into_loaded().lock());
    clock.advance(Duration::from_secs(60));
    let hit = gpu.get("b").expect("past its keep-alive, but no pass ran: a hit");
    drop(hit.lock());
    assert_eq!(gpu.stats().evictions, 1, "get itself expired nothing");
    gpu.expire_idle();
    assert_eq!(gpu.keys(), ["b"], "the get's lock made it recent again");
    gpu.shutdown();
}

#[test]
fn re_admitting_a_dropped_key_detaches_the_old_record_by_identity() {
    // C-R4: the old record's last release must not touch the key's new occupant.
    let group = CacheGroup::<Weights>::new(100).unwrap();
    let gpu = group.cache("cuda:0");
    let old = gpu.put("m", vec![1; 10], 10, PutOptions::default()).unwrap().into_loaded().lock();
    gpu.drop_model("m");
    let new = gpu.put("m", vec![2; 10], 10, PutOptions::default()).unwrap().into_loaded().lock();
    assert!(!old.shares_weights_with(&new));
    assert_eq!(gpu.resident().iter().filter(|r| r.detached).count(), 1);
    drop(old);
    assert_eq!(gpu.keys(), ["m"], "the new occupant stays");
    assert_eq!(group.budget().in_use(), 10);
    drop(new);
    assert_eq!(gpu.make_room(100), 1);
    assert_eq!(group.budget().in_use(), 0);
}

/// `DeviceCache::get_or_put` on the production runtime: a hit, a peer's canonical adopted
/// without loading, a failed load admitting nothing, bad input refused before any load.
/// (Its concurrent single flight is checked by the sim's X-1.)
mod get_or_put {
    use std::cell::Cell;
    use std::time::Duration;

    use resident::cache::CacheGroup;
    use resident::{CacheError, InvalidConfig};

    type Weights = Vec<u8>;

    #[derive(Debug, thiserror::Error)]
    #[error("the file is gone")]
    struct Gone;

    #[test]
    fn a_key_is_loaded_once_for_the_whole_group() {
        let group = CacheGroup::<Weights>::new(100).unwrap();
        let (gpu0, gpu1) = (group.cache("cuda:0"), group.cache("cuda:1"));
        let loads = Cell::new(0);
        let load = || {
            loads.set(loads.get() + 1);
            Ok::<_, Gone>(vec![1; 40])
        };
        let a = gpu0.get_or_put("m", 40, load).unwrap().lock();
        let again = gpu0.get_or_put("m", 40, load).unwrap().lock();
        let b = gpu1.get_or_put("m", 40, load).unwrap().lock();
        assert_eq!(loads.get(), 1, "a hit and an adoption load nothing");
        assert!(a.shares_weights_with(&b) && a.shares_weights_with(&again));
        assert_eq!(group.budget().in_use(), 40, "one canonical, counted once, at its declared size");
    }

    #[test]
    fn a_failed_load_is_a_typed_error_and_admits_nothing() {
        let group = CacheGroup::<Weights>::new(100).unwrap();
        let gpu0 = group.cache("cuda:0");
        let failed = gpu0.get_or_put("m", 40, || Err::<Weights, _>(Gone)).unwrap_err();
        match &failed {
            CacheError::Load { key, source } => {
                assert_eq!(key, "m");
                assert!(source.downcast_ref::<Gone>().is_some(), "the loader's error is kept");
            }
            other => panic!("expected a load error, got {other:?}"),
        }
        assert!(gpu0.get("m").is_none());
        assert_eq!(group.budget().in_use(), 0);
        assert!(gpu0.get_or_put("m", 40, || Ok::<_, Gone>(vec![1; 40])).is_ok(), "the next call loads");
    }

    #[test]
    fn bad_input_is_refused_before_any_load() {
        let group = CacheGroup::<Weights>::new(100).unwrap();
        let gpu0 = group.cache("cuda:0");
        let loaded = Cell::new(false);
        let bad = gpu0.get_or_put("../m", 40, || {
            loaded.set(true);
            Ok::<_, Gone>(vec![1; 40])
        });
        assert!(matches!(bad, Err(CacheError::InvalidKey { .. })), "{bad:?}");
        assert!(!loaded.get());
        let too_large = gpu0.get_or_put("m", 101, || {
            loaded.set(true);
            Ok::<_, Gone>(vec![1; 101])
        });
        assert!(matches!(too_large, Err(CacheError::TooLarge { bytes: 101, cap: 100, .. })), "{too_large:?}");
        assert!(!loaded.get(), "a declared size over the budget is refused before loading");
        assert_eq!(group.budget().in_use(), 0);
        assert!(matches!(group.set_load_wait(Duration::ZERO), Err(InvalidConfig { field: "load_wait", .. })));
        assert_eq!(group.load_wait(), Duration::from_secs(60));
    }

    #[test]
    fn a_shut_down_group_refuses_new_loads_and_keeps_nothing_once_released() {
        let group = CacheGroup::<Weights>::new(100).unwrap();
        let gpu0 = group.cache("cuda:0");
        let held = gpu0.get_or_put("m", 40, || Ok::<_, Gone>(vec![1; 40])).unwrap().lock();
        let idle = gpu0.get_or_put("n", 40, || Ok::<_, Gone>(vec![2; 40])).unwrap();
        drop(idle);
        assert_eq!(group.shutdown(), 1, "the idle record goes now");
        assert!(group.is_shut_down() && gpu0.is_shut_down());
        assert_eq!(group.shutdown(), 0, "idempotent");
        assert_eq!(held[0], 1, "a record in use stays usable");
        let loaded = Cell::new(false);
        let refused = gpu0.get_or_put("m", 40, || {
            loaded.set(true);
            Ok::<_, Gone>(vec![1; 40])
        });
        assert!(matches!(&refused, Err(CacheError::ShutDown { key }) if key == "m"), "{refused:?}");
        assert!(!loaded.get(), "nothing loads, nothing is adopted after shutdown");
        let late = group.cache("cuda:1");
        assert!(late.is_shut_down(), "a cache made after the group's shutdown starts shut down");
        drop(held);
        assert!(gpu0.keys().is_empty());
        assert_eq!(group.budget().in_use(), 0);
    }

    /// Weights whose `Drop` panics when asked to.
    struct Boom(bool);

    impl Drop for Boom {
        fn drop(&mut self) {
            if self.0 && !std::thread::panicking() {
                panic!("weights' Drop panicked");
            }
        }
    }

    #[test]
    fn a_panic_in_one_cache_leaves_no_cache_of_the_group_open() {
        let group = CacheGroup::<Boom>::new(100).unwrap();
        let (gpu0, gpu1) = (group.cache("cuda:0"), group.cache("cuda:1"));
        drop(gpu0.get_or_put("m", 40, || Ok::<_, Gone>(Boom(true))).unwrap());
        drop(gpu1.get_or_put("n", 40, || Ok::<_, Gone>(Boom(false))).unwrap());
        let shutdown = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| group.shutdown()));
        assert!(shutdown.is_err(), "the weights' panic reaches the caller");
        for cache in [&gpu0, &gpu1] {
            assert!(cache.is_shut_down(), "{} stayed open", cache.device());
            assert!(cache.keys().is_empty(), "{} kept {:?}", cache.device(), cache.keys());
        }
        assert_eq!(group.budget().in_use(), 0);
    }
}

#[test]
fn a_get_makes_its_record_the_most_recently_used() {
    let group = CacheGroup::<Weights>::new(100).unwrap();
    let gpu = group.cache("cuda:0");
    for key in ["a", "b"] {
        drop(gpu.put(key, weights(40), 40, PutOptions::default()).unwrap());
    }
    drop(gpu.get("a").expect("resident"));
    drop(gpu.put("c", weights(40), 40, PutOptions::default()).unwrap());
    assert_eq!(gpu.keys(), ["a", "c"], "b, the least recently used, made room for c");
    assert_eq!(gpu.stats().evictions, 1);
    assert!(!gpu.is_shut_down());
    gpu.shutdown();
    assert!(gpu.is_shut_down() && gpu.keys().is_empty());
}

#[test]
fn locking_a_held_record_makes_it_the_most_recently_used() {
    let group = CacheGroup::<Weights>::new(100).unwrap();
    let gpu = group.cache("cuda:0");
    let a = gpu.put("a", weights(40), 40, PutOptions::default()).unwrap();
    assert_eq!(a.key(), "a");
    drop(gpu.put("b", weights(40), 40, PutOptions::default()).unwrap());
    let loaded = a.into_loaded();
    assert_eq!(loaded.key(), "a");
    drop(loaded.lock()); // admission -> hold -> lock: a is now newer than b
    drop(gpu.put("c", weights(40), 40, PutOptions::default()).unwrap());
    assert_eq!(gpu.keys(), ["a", "c"], "b, the least recently used, made room for c");
}

#[test]
fn the_store_registers_one_canonical_per_key_and_adopts_it() {
    let group = CacheGroup::<Weights>::new(100).unwrap();
    let store = group.store();
    let (first, adopted) = store.insert("k", weights(30), 30).unwrap();
    assert!(!adopted);
    assert_eq!((first.key(), first.bytes(), first.len()), ("k", 30, 30));
    let (again, adopted) = store.insert("k", weights(30), 30).unwrap();
    assert!(adopted && std::sync::Arc::ptr_eq(&first, &again), "the live canonical is adopted");
    assert!(store.adopt("k").is_some_and(|c| c.key() == "k"));
    assert_eq!(group.budget().in_use(), 30, "counted once");
    drop((first, again));
    assert!(store.adopt("k").is_none(), "gone with its last holder");
    assert_eq!(group.budget().in_use(), 0);
}

#[test]
fn stats_count_every_hit_and_miss() {
    let group = CacheGroup::<Weights>::new(100).unwrap();
    let gpu = group.cache("cuda:0");
    drop(gpu.put("a", weights(10), 10, PutOptions::default()).unwrap());
    for _ in 0..3 {
        drop(gpu.get("a").expect("resident"));
    }
    for _ in 0..2 {
        assert!(gpu.get("b").is_none());
    }
    let stats = gpu.stats();
    assert_eq!((stats.hits, stats.misses), (3, 2), "{stats:?}");
}
