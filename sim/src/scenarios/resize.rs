//! Runtime resizing (SPEC 1.12; `S-Z1`, `S-Z1c`, `W-17`, `W-18`): `max_size` and the RAM cap
//! change while serving. Lowering one evicts idle models down to it and waits for the ones in
//! use; raising one wakes the calls that wait for room.

use resident::runtime::Arc;
use resident::{Added, CallOptions, Manager, ManagerError};

use super::cache::{Cache, finish as finish_cache, join};
use super::layers::{Depth, cache, finish};
use super::wakeups::no_deadline_passed;
use crate::cache_world::{CacheWorld, Weights};
use crate::ensure;
use crate::manager_world::ManagerWorld;
use crate::runtime::SimRuntime;
use crate::world::traced;

/// Scheduling points W-17's and W-18's T2 pass before they raise the limit.
const RAISE_AFTER: usize = 64;

/// S-Z1: A, B and C fill a cache of three, A least recently used; T2 serves from leases on B
/// and C (taken by the main thread) and ends them; T1 lowers `max_size` to one; T3 leases A,
/// racing its eviction. When the lowering returns, at most one model is registered.
pub(super) fn lowering_max_size_while_serving<R: SimRuntime, D: Depth>(rt: R) {
    let builder =
        ManagerWorld::builder(rt).model("A", &[], &[]).model("B", &[], &[]).model("C", &[], &[]).capacity(3);
    let world = cache::<R, D>(builder, 3, &["A", "B", "C"], &["A", "B", "C"]);
    let leases = ["B", "C"].map(|id| world.manager.lease(id).expect("preloaded"));
    let t1 = world.spawn("T1", |m, t| {
        let lowered = traced(t, "set_max_size(1)", || m.manager.set_max_size(1, CallOptions::new()));
        // Nothing loads here: once the lowering returned, the count cannot grow again.
        (lowered, m.len())
    });
    let t2 = world.spawn("T2", move |_, t| {
        for lease in leases {
            lease.serve(t);
            traced(t, "end lease", || drop(lease));
        }
    });
    let t3 = world.spawn("T3", |m, t| traced(t, "lease(A)", || m.lease("A").map(|lease| lease.serve(t))));
    let (lowered, registered) = join::<R, _>(t1);
    join::<R, _>(t2);
    let leased = join::<R, _>(t3);
    ensure!(lowered.is_ok(), "contract", "lowering max_size with every lease ending gave {lowered:?}");
    ensure!(registered <= 1, "S-Z1", "{registered} models registered when lowering max_size to 1 returned");
    ensure!(
        matches!(leased, Ok(()) | Err(ManagerError::NotFound { .. })),
        "contract",
        "lease(A) racing its eviction gave {leased:?}"
    );
    ensure!(world.manager.max_size() == 1, "contract", "max_size is {}", world.manager.max_size());
    finish(&world);
}

/// W-17: A fills a cache of one and the main thread leases it; T1 adds B and waits for room; T2
/// raises `max_size` to two. The raise must wake T1, which then loads B without evicting.
pub(super) fn raising_max_size_wakes_the_add<R: SimRuntime, D: Depth>(rt: R) {
    let builder = ManagerWorld::builder(rt).model("A", &[], &[]).model("B", &[], &[]);
    let world = cache::<R, D>(builder, 1, &["A"], &[]);
    let lease = world.manager.lease("A").expect("preloaded");
    let t1 = world.spawn("T1", |m, t| traced(t, "add(B)", || m.add_model("B", None)));
    let t2 = world.spawn("T2", |m, t| {
        // Scheduling points, so that uniform random schedules often let T1 reach its wait
        // first (PCT and loom reach that order anyway); both orders are explored.
        for _ in 0..RAISE_AFTER {
            R::yield_now();
        }
        traced(t, "set_max_size(2)", || m.manager.set_max_size(2, CallOptions::new()))
    });
    let added = join::<R, _>(t1);
    let raised = join::<R, _>(t2);
    drop(lease);
    ensure!(matches!(added, Ok(Added::Loaded)), "contract", "add(B) gave {added:?}");
    ensure!(raised.is_ok(), "contract", "raising max_size gave {raised:?}");
    ensure!(world.manager.len() == 2, "contract", "{:?} registered", world.manager.ids());
    no_deadline_passed(&world.rt);
    finish(&world);
}

/// S-Z1c: `a` (40 bytes) is idle on one device and `b` (40) locked by the main thread on the
/// other, under a hard cap of 100; T1 lowers the cap to 50 while T2 loads `c` (10). When the
/// lowering returns, bytes in use plus reserved are within the new cap (`a` was evicted, `b`
/// kept); `c` loads either way.
pub(super) fn lowering_the_ram_cap_while_loading<R: SimRuntime>(rt: R) {
    let world = CacheWorld::hard(rt, 100, 2);
    drop(world.caches[0].get_or_put("a", 40, || Ok::<_, &str>(Weights::plain(40))).expect("setup load"));
    let b =
        world.caches[1].get_or_put("b", 40, || Ok::<_, &str>(Weights::plain(40))).expect("setup load").lock();
    let t1 = {
        let group = Arc::clone(&world.group);
        world.rt.spawn("T1", move || {
            let lowered = traced("T1", "set_cap(50)", || group.set_cap(50, CallOptions::new()));
            // One read: bytes in use plus reserved.
            (lowered, group.budget().committed())
        })
    };
    let t2 = {
        let c0: Cache<R> = Arc::clone(&world.caches[0]);
        world.rt.spawn("T2", move || {
            traced("T2", "get_or_put(c)", || {
                c0.get_or_put("c", 10, || Ok::<_, &str>(Weights::plain(10))).map(drop)
            })
        })
    };
    let (lowered, committed) = join::<R, _>(t1);
    let loaded = join::<R, _>(t2);
    ensure!(lowered.is_ok(), "contract", "lowering the cap with an idle record to evict gave {lowered:?}");
    ensure!(
        committed <= 50,
        "S-Z1",
        "{committed} bytes in use or reserved when lowering the cap to 50 returned"
    );
    ensure!(loaded.is_ok(), "contract", "T2's load of c gave {loaded:?}");
    ensure!(world.caches[1].keys() == ["b"], "A5", "the locked b was evicted: {:?}", world.caches[1].keys());
    drop(b);
    finish_cache(&world);
}

/// W-18: `a` (60) fills a hard cap of 100 and the main thread holds it locked; T1 loads `b`
/// (60) and waits for room; T2 raises the cap to 200. The raise must wake T1, which loads.
pub(super) fn raising_the_ram_cap_wakes_the_load<R: SimRuntime>(rt: R) {
    let world = CacheWorld::hard(rt, 100, 1);
    let a =
        world.caches[0].get_or_put("a", 60, || Ok::<_, &str>(Weights::plain(60))).expect("setup load").lock();
    let t1 = {
        let c0: Cache<R> = Arc::clone(&world.caches[0]);
        world.rt.spawn("T1", move || {
            traced("T1", "get_or_put(b)", || {
                c0.get_or_put("b", 60, || Ok::<_, &str>(Weights::plain(60))).map(drop)
            })
        })
    };
    let t2 = {
        let group = Arc::clone(&world.group);
        world.rt.spawn("T2", move || {
            for _ in 0..RAISE_AFTER {
                R::yield_now();
            }
            traced("T2", "set_cap(200)", || group.set_cap(200, CallOptions::new()))
        })
    };
    let loaded = join::<R, _>(t1);
    let raised = join::<R, _>(t2);
    drop(a);
    ensure!(loaded.is_ok(), "contract", "T1's load of b gave {loaded:?}");
    ensure!(raised.is_ok(), "contract", "raising the cap gave {raised:?}");
    no_deadline_passed(&world.rt);
    finish_cache(&world);
}
