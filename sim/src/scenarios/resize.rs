//! Runtime resizing (SPEC 1.12; `S-Z1`–`S-Z4`, `S-Z1c`, `S-Z2b`, `S-Z1d`, `W-17`, `W-18`, `W-19`): `max_size`,
//! the RAM cap and a device budget change while serving. Lowering one evicts idle models down to it and waits for the ones in
//! use; raising one wakes the calls that wait for room.

use resident::runtime::Arc;
use resident::{Added, CallOptions, Manager, ManagerError, ManagerExt};

use super::cache::{Cache, finish as finish_cache};
use super::layers::{Depth, cache, finish};
use super::placement::{admit, place};
use super::wakeups::{HEAD_START, give_way, no_deadline_passed};
use crate::runtime::SimRuntime;
use crate::world::cache::{Behaviour, CacheWorld, Script, Weights};
use crate::world::join;
use crate::world::manager::ManagerWorld;
use crate::world::traced;
use crate::{ensure, trace};

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
        give_way::<R>(HEAD_START);
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
        world.spawn("T1", move |_, _| {
            let lowered = traced("T1", "set_cap(50)", || group.set_cap(50, CallOptions::new()));
            // One read: bytes in use plus reserved.
            (lowered, group.budget().committed())
        })
    };
    let t2 = {
        let c0: Cache<R> = Arc::clone(&world.caches[0]);
        world.spawn("T2", move |_, _| {
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
    let loaded = change_while_a_load_waits_for_room(rt, |group| {
        let raised = traced("T2", "set_cap(200)", || group.set_cap(200, CallOptions::new()));
        ensure!(raised.is_ok(), "contract", "raising the cap gave {raised:?}");
    });
    ensure!(loaded.is_ok(), "contract", "T1's load of b gave {loaded:?}");
}

/// S-Z1d: `a` (40 device bytes) is placed and idle, `b` (40) placed and locked, under a device
/// budget of 100; T1 lowers the budget to 30 while T2 serves from `b` and unlocks it and T3
/// places `c` (20). The lowering offloads `a` at once and waits for `b`'s unlock: when it
/// returns, the device bytes counted are within the new budget.
pub(super) fn lowering_the_device_budget_while_serving<R: SimRuntime>(rt: R) {
    let world = CacheWorld::new(rt, 1000, 1);
    let script = world.with_device(100);
    for (key, bytes) in [("a", 40), ("b", 40), ("c", 20)] {
        admit(&world.caches[0], &script, key, bytes, Behaviour::default());
    }
    drop(place(&world.caches[0], "a", "main").expect("a fits the device"));
    let b = place(&world.caches[0], "b", "main").expect("b fits the device");
    let t1 = {
        let c0: Cache<R> = Arc::clone(&world.caches[0]);
        world.spawn("T1", move |_, _| {
            let lowered =
                traced("T1", "set_device_budget(30)", || c0.set_device_budget(Some(30), CallOptions::new()));
            (lowered, c0.device_bytes())
        })
    };
    let t2 = world.spawn("T2", move |_, _| {
        trace::record("T2", "serve from b's copy");
        traced("T2", "unlock b", || drop(b));
    });
    let t3 = {
        let c0: Cache<R> = Arc::clone(&world.caches[0]);
        world.spawn("T3", move |_, _| place(&c0, "c", "T3").map(drop))
    };
    let (lowered, used) = join::<R, _>(t1);
    join::<R, _>(t2);
    let placed = join::<R, _>(t3);
    ensure!(
        lowered.is_ok(),
        "contract",
        "lowering the device budget with every lock ending gave {lowered:?}"
    );
    ensure!(used <= 30, "S-Z1", "{used} device bytes counted when lowering the device budget to 30 returned");
    ensure!(
        placed.is_ok(),
        "contract",
        "T3's placement of c (20 bytes, within the new budget) gave {placed:?}"
    );
    let cap = world.caches[0].device_budget_cap();
    ensure!(cap == Some(30), "contract", "the device budget is {cap:?}");
    finish_cache(&world);
}

/// W-19: `a` (60 device bytes) is placed and locked by the main thread under a device budget of
/// 100; T1 places `b` (60) and waits for room; T2 raises the budget to 200. The raise must wake
/// T1, which places `b` beside `a`.
pub(super) fn raising_the_device_budget_wakes_the_locker<R: SimRuntime>(rt: R) {
    let world = CacheWorld::new(rt, 1000, 1);
    // The device the script checks every move against is the raised budget.
    let script = Script::new(&world.rt, 200);
    world.caches[0].set_device_budget(Some(100), CallOptions::new()).expect("a valid budget");
    for key in ["a", "b"] {
        admit(&world.caches[0], &script, key, 60, Behaviour::default());
    }
    let a = place(&world.caches[0], "a", "main").expect("a fits the device");
    let t1 = {
        let c0: Cache<R> = Arc::clone(&world.caches[0]);
        world.spawn("T1", move |_, _| place(&c0, "b", "T1").map(drop))
    };
    let t2 = {
        let c0: Cache<R> = Arc::clone(&world.caches[0]);
        world.spawn("T2", move |_, _| {
            give_way::<R>(HEAD_START);
            traced("T2", "set_device_budget(200)", || c0.set_device_budget(Some(200), CallOptions::new()))
        })
    };
    let placed = join::<R, _>(t1);
    let raised = join::<R, _>(t2);
    drop(a);
    ensure!(placed.is_ok(), "contract", "T1's placement of b gave {placed:?}");
    ensure!(raised.is_ok(), "contract", "raising the device budget gave {raised:?}");
    no_deadline_passed(&world.rt);
    finish_cache(&world);
}

/// The W-18 setup: `a` (60) fills a hard cap of 100 and stays locked by the main thread while
/// T1 loads `b` (60) and waits for room and T2 runs `change`; then T1's result.
fn change_while_a_load_waits_for_room<R: SimRuntime>(
    rt: R,
    change: impl FnOnce(&resident::cache::CacheGroup<Weights<R>, R>) + Send + 'static,
) -> Result<(), resident::CacheError> {
    let world = CacheWorld::hard(rt, 100, 1);
    let a =
        world.caches[0].get_or_put("a", 60, || Ok::<_, &str>(Weights::plain(60))).expect("setup load").lock();
    let t1 = {
        let c0: Cache<R> = Arc::clone(&world.caches[0]);
        world.spawn("T1", move |_, _| {
            traced("T1", "get_or_put(b)", || {
                c0.get_or_put("b", 60, || Ok::<_, &str>(Weights::plain(60))).map(drop)
            })
        })
    };
    let t2 = {
        let group = Arc::clone(&world.group);
        world.spawn("T2", move |_, _| {
            give_way::<R>(HEAD_START);
            change(&group);
        })
    };
    let loaded = join::<R, _>(t1);
    join::<R, _>(t2);
    drop(a);
    no_deadline_passed(&world.rt);
    finish_cache(&world);
    loaded
}

/// S-Z2: while T1's load of `b` (60) waits for room, T2 lowers the cap to 50: T1 is refused
/// at once with `TooLarge` (no deadline passes), not left to sleep out its room wait.
pub(super) fn lowering_the_cap_below_a_waiting_load<R: SimRuntime>(rt: R) {
    let loaded = change_while_a_load_waits_for_room(rt, |group| {
        trace::record("T2", "budget.set_cap(50)");
        let lowered = group.budget().set_cap(50);
        ensure!(lowered == Ok(true), "contract", "lowering the cap gave {lowered:?}");
    });
    let too_large = matches!(loaded, Err(resident::CacheError::TooLarge { bytes: 60, cap: 50, .. }));
    ensure!(too_large, "S-Z2", "T1's load of b (60) under a cap of 50 gave {loaded:?}");
}

/// S-G3: while T1's load of `b` (60) waits for room, T2 shuts the group down: T1 is refused
/// at once with `ShutDown` (no deadline passes), or at its start if the shutdown came first
/// (1.13, 3.11).
pub(super) fn shutdown_refuses_a_load_waiting_for_room<R: SimRuntime>(rt: R) {
    let loaded = change_while_a_load_waits_for_room(rt, |group| {
        trace::record("T2", "group.shutdown()");
        group.shutdown();
    });
    let refused = matches!(loaded, Err(resident::CacheError::ShutDown { .. }));
    ensure!(refused, "S-G3", "T1's load of b, waiting for room as its group shut down, gave {loaded:?}");
}

/// S-Z2b: `a` (60) is locked by the main thread under a hard cap of 100. T1 loads `b` (45) and
/// waits for room, first in line; T2 loads `c` (50) and waits behind it (or first, if it finds
/// nobody looking). The main thread lowers the cap to 48: T2's `c` no longer fits any room, and
/// T2 is refused at once with `TooLarge` (no deadline passes), though T1, still first and still
/// fitting, stays in line; then the main thread ends its lock and T1 is served.
pub(super) fn lowering_the_cap_below_a_load_behind_another<R: SimRuntime>(rt: R) {
    let world = CacheWorld::hard(rt, 100, 1);
    let a =
        world.caches[0].get_or_put("a", 60, || Ok::<_, &str>(Weights::plain(60))).expect("setup load").lock();
    let load = |name: &'static str, key: &'static str, bytes: u64| {
        let c0: Cache<R> = Arc::clone(&world.caches[0]);
        world.spawn(name, move |_, _| {
            if name == "T2" {
                give_way::<R>(HEAD_START);
            }
            traced(name, &format!("get_or_put({key})"), || {
                c0.get_or_put(key, bytes, || Ok::<_, &str>(Weights::plain(bytes))).map(drop)
            })
        })
    };
    let (t1, t2) = (load("T1", "b", 45), load("T2", "c", 50));
    // The main thread lowers the cap itself: a third spawned thread grows the space.
    give_way::<R>(2 * HEAD_START);
    let lowered = traced("main", "budget.set_cap(48)", || world.group.budget().set_cap(48));
    ensure!(lowered == Ok(true), "contract", "lowering the cap gave {lowered:?}");
    let second = join::<R, _>(t2);
    let too_large = matches!(second, Err(resident::CacheError::TooLarge { bytes: 50, cap: 48, .. }));
    ensure!(too_large, "S-Z2b", "T2's load of c (50) under a cap of 48 gave {second:?}");
    no_deadline_passed(&world.rt);
    trace::record("main", "drop(lock a)");
    drop(a);
    let first = join::<R, _>(t1);
    ensure!(first.is_ok(), "contract", "T1's load of b (45) under a cap of 48 gave {first:?}");
    finish_cache(&world);
}

/// S-Z3: while T1's load of `b` (60) waits for room, T2 switches the overflow policy on: T1
/// wakes and is admitted past the cap at once (no deadline passes).
pub(super) fn switching_overflow_on_while_a_load_waits<R: SimRuntime>(rt: R) {
    let loaded = change_while_a_load_waits_for_room(rt, |group| {
        trace::record("T2", "budget.set_overflow(true)");
        group.budget().set_overflow(true);
    });
    ensure!(loaded.is_ok(), "S-Z3", "T1's load of b under the overflow policy gave {loaded:?}");
}

/// S-Z4: `a` (60) is resident in cache 0 and locked by the main thread when the cap drops to
/// 50. T1's `get_or_put(a)` on cache 0 is a hit: served (or, after the group's shutdown, refused
/// with `ShutDown`), never `TooLarge`. T2 shuts the group down, then asks cache 1 for `a`: a
/// closed group says so first (`ShutDown`), whatever the size (SPEC 4, X-4).
pub(super) fn a_hit_after_the_cap_dropped_below_it<R: SimRuntime>(rt: R) {
    let world = CacheWorld::hard(rt, 100, 2);
    let a =
        world.caches[0].get_or_put("a", 60, || Ok::<_, &str>(Weights::plain(60))).expect("setup load").lock();
    trace::record("main", "budget.set_cap(50)");
    let lowered = world.group.budget().set_cap(50);
    ensure!(lowered == Ok(true), "contract", "lowering the cap gave {lowered:?}");
    let never = || -> Result<Weights<R>, &'static str> { Err("nothing may load") };
    let t1 = {
        let c0: Cache<R> = Arc::clone(&world.caches[0]);
        world.spawn("T1", move |_, t| traced(t, "get_or_put(a)", || c0.get_or_put("a", 60, never).map(drop)))
    };
    let t2 = {
        let (group, c1): (_, Cache<R>) = (Arc::clone(&world.group), Arc::clone(&world.caches[1]));
        world.spawn("T2", move |_, _| {
            traced("T2", "group.shutdown()", || group.shutdown());
            traced("T2", "get_or_put(a) on cuda:1", || c1.get_or_put("a", 60, never).map(drop))
        })
    };
    let hit = join::<R, _>(t1);
    let closed = join::<R, _>(t2);
    drop(a);
    let served = matches!(hit, Ok(()) | Err(resident::CacheError::ShutDown { .. }));
    ensure!(served, "S-Z4", "T1's get_or_put of the resident a under a cap of 50 gave {hit:?}");
    let refused = matches!(closed, Err(resident::CacheError::ShutDown { .. }));
    ensure!(refused, "S-Z4", "T2's get_or_put of a after the group's shutdown gave {closed:?}");
    finish_cache(&world);
}

/// S-Z1r: a cache (max 2) holds `a` and `s`; `s` is removed from the manager below, behind the
/// cache's back; then `max_size` is lowered to 1. One model is registered, which fits: the
/// lowering evicts nothing (no live model goes for a slot already free), and the queue holds
/// `a` alone.
pub(super) fn lowering_max_size_after_a_removal_below<R: SimRuntime>(rt: R) {
    let builder = ManagerWorld::builder(rt).model("a", &[], &[]).model("s", &[], &[]);
    let world = builder.preloaded(&["a", "s"], |base| {
        resident::FixedSizeCache::new(base, resident::FixedSizeConfig::new(2)).expect("valid")
    });
    let t1 = world.spawn("T1", |m, t| {
        let removed =
            traced(t, "manager remove(s), behind the cache's back", || m.manager.get_ref().remove("s"));
        ensure!(removed.is_ok(), "contract", "the manager's remove(s) gave {removed:?}");
        traced(t, "set_max_size(1)", || m.manager.set_max_size(1, CallOptions::new()))
    });
    let lowered = join::<R, _>(t1);
    ensure!(lowered.is_ok(), "contract", "set_max_size(1) gave {lowered:?}");
    ensure!(world.manager.contains("a"), "2.7", "a was evicted though the one model left fits max_size 1");
    crate::world::checks::check_queue(&world.manager);
    world.check_quiescent();
}
