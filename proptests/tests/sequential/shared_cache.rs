//! Random programs over two peer caches sharing one store and one budget. After every step the
//! budget's count equals what is actually alive — each distinct live canonical once plus each
//! cache's non-shared resident records (A1, zero drift) — and when every handle and cache is
//! gone nothing is left counted (A6). The budget is hard: it never exceeds its cap (A7).

use std::collections::BTreeMap;

use proptest::prelude::*;
use resident::CacheError;
use resident::cache::{CacheGroup, DeviceCache, PutOptions};
use resident::runtime::Arc;
use resident_proptests::CacheProgramOp;

const KEYS: &[&str] = &["a", "b", "c"];
const CAP: u64 = 100;

/// A handle kept alive by the program (a hold or a lock), dropped oldest first.
type Kept = Box<dyn std::any::Any>;

fn op() -> impl Strategy<Value = CacheProgramOp> {
    let (cache, key) = (0..2usize, 0..KEYS.len());
    prop_oneof![
        5 => (cache.clone(), key.clone(), 1..60u64, any::<bool>(), 0..3u8)
            .prop_map(|(cache, key, bytes, shared, keep)| CacheProgramOp::Put { cache, key, bytes, shared, keep }),
        3 => (cache.clone(), key.clone(), any::<bool>()).prop_map(|(cache, key, lock)| CacheProgramOp::Get { cache, key, lock }),
        1 => (cache.clone(), key.clone()).prop_map(|(cache, key)| CacheProgramOp::GetLocked { cache, key }),
        2 => (cache.clone(), key.clone(), 1..80u64, any::<bool>())
            .prop_map(|(cache, key, bytes, keep)| CacheProgramOp::GetOrPut { cache, key, bytes, keep }),
        4 => Just(CacheProgramOp::Release),
        1 => (cache.clone(), 1..80u64).prop_map(|(cache, bytes)| CacheProgramOp::MakeRoom { cache, bytes }),
        1 => (cache.clone(), key).prop_map(|(cache, key)| CacheProgramOp::DropModel { cache, key }),
        1 => cache.prop_map(|cache| CacheProgramOp::Shutdown { cache }),
    ]
}

/// What the budget must count (A1): each distinct live canonical once (every live canonical
/// belongs to a resident record: no path evicts a record that a handle still protects) plus
/// every cache's private records.
fn expected(caches: &[Arc<DeviceCache<u64>>]) -> u64 {
    let mut canonicals: BTreeMap<resident::cache::CanonicalId, u64> = BTreeMap::new();
    let mut private = 0;
    for record in caches.iter().flat_map(|c| c.resident()) {
        match record.canonical {
            Some(id) => {
                canonicals.insert(id, record.bytes);
            }
            None => private += record.bytes,
        }
    }
    canonicals.values().sum::<u64>() + private
}

proptest! {
    #![proptest_config(super::config("../fixtures/proptest-regressions/shared_cache.txt"))]

    #[test]
    fn the_budget_counts_exactly_what_is_alive(program in proptest::collection::vec(op(), 1..60)) {
        let group = CacheGroup::<u64>::new(CAP).unwrap();
        // One thread: nobody else can free room, so a put that does not fit is refused at once.
        group.budget().set_room_wait(std::time::Duration::ZERO);
        prop_assert_eq!(group.budget().room_wait(), std::time::Duration::ZERO);
        let caches = [group.cache("cuda:0"), group.cache("cuda:1")];
        let mut kept: Vec<Kept> = Vec::new();
        // What each cache's `get`s returned: its hit and miss counters must say the same.
        let mut gets = [(0u64, 0u64); 2];
        for (step, op) in program.iter().enumerate() {
            match *op {
                CacheProgramOp::Put { cache, key, bytes, shared, keep } => {
                    let how = PutOptions { shared, prefetch: false };
                    if let Ok(admission) = caches[cache].put(KEYS[key], bytes, bytes, how) {
                        match keep {
                            0 => drop(admission),
                            1 => kept.push(Box::new(admission.into_loaded())),
                            _ => kept.push(Box::new(admission.into_loaded().lock())),
                        }
                    }
                }
                CacheProgramOp::Get { cache, key, lock } => {
                    if let Some(loaded) = caches[cache].get(KEYS[key]) {
                        gets[cache].0 += 1;
                        kept.push(if lock { Box::new(loaded.lock()) } else { Box::new(loaded) });
                    } else {
                        gets[cache].1 += 1;
                    }
                }
                CacheProgramOp::GetLocked { cache, key } => match caches[cache].get_locked(KEYS[key]) {
                    Some(guard) => {
                        gets[cache].0 += 1;
                        kept.push(Box::new(guard));
                    }
                    None => gets[cache].1 += 1,
                },
                CacheProgramOp::GetOrPut { cache, key, bytes, keep } => {
                    // One call, one hit or one miss, however often it looks (a cold load
                    // looks again once it holds the group's claim to load).
                    let before = caches[cache].stats();
                    let loaded = caches[cache].get_or_put(KEYS[key], bytes, || Ok::<_, CacheError>(bytes));
                    let after = caches[cache].stats();
                    let (hits, misses) = (after.hits - before.hits, after.misses - before.misses);
                    prop_assert_eq!(hits + misses, 1, "get_or_put counted {} hits and {} misses", hits, misses);
                    (gets[cache].0, gets[cache].1) = (gets[cache].0 + hits, gets[cache].1 + misses);
                    if let (Ok(loaded), true) = (loaded, keep) {
                        kept.push(Box::new(loaded));
                    }
                }
                CacheProgramOp::Release => {
                    if !kept.is_empty() {
                        kept.remove(0);
                    }
                }
                CacheProgramOp::MakeRoom { cache, bytes } => {
                    caches[cache].make_room(bytes);
                }
                CacheProgramOp::DropModel { cache, key } => {
                    caches[cache].drop_model(KEYS[key]);
                }
                CacheProgramOp::Shutdown { cache } => {
                    caches[cache].shutdown();
                }
            }
            prop_assert_eq!(group.budget().in_use(), expected(&caches), "A1 drift after step {}: {:?}", step, op);
            // A7: the budget is a hard limit, and no reservation outlives its put.
            prop_assert!(group.budget().in_use() <= CAP, "A7 over the cap after step {}: {:?}", step, op);
            prop_assert_eq!(group.budget().reserved(), 0, "reservation left after step {}", step);
            for (cache, &(hits, misses)) in caches.iter().zip(&gets) {
                let stats = cache.stats();
                prop_assert_eq!((stats.hits, stats.misses), (hits, misses), "counters after step {}", step);
                let resident: u64 = cache.resident().iter().filter(|r| !r.detached).map(|r| r.bytes).sum();
                prop_assert_eq!(stats.bytes_resident, resident, "bytes resident after step {}", step);
                prop_assert!(stats.high_water >= resident, "high water below what is resident");
            }
        }
        drop(kept);
        let [c0, c1] = caches;
        drop(c0);
        drop(c1);
        prop_assert_eq!(group.budget().in_use(), 0, "A6: nothing left counted");
    }
}
