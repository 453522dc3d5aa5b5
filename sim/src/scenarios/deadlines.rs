//! Per-call deadline scenarios (SPEC 1.10; `S-D1*`): a call's deadline, shorter than every
//! configured timeout, bounds each kind of wait inside it — the lifecycle lock, a lease drain,
//! a cache's wait for capacity, a lease's wait for an eviction's outcome, room in the RAM
//! budget, another device's load — and the call fails with that wait's own error, whose
//! `waited` is the bound it had, leaving nothing behind.
//!
//! Deadlines fire only once every thread is blocked (`Time::Auto`): the clock then jumps to the
//! earliest one. A wait that ignores its call's deadline sleeps to its configured timeout
//! instead, and the call ends later than its deadline.

use std::time::Duration;

use resident::cache::PutOptions;
use resident::runtime::{Arc, Runtime};
use resident::{CacheError, CallOptions, Manager, ManagerError, ManagerExt, ModelId};

use super::cache::{Cache, finish as finish_cache};
use super::layers::{Depth, cache, finish};
use super::placement::{admit, place};
use crate::ensure;
use crate::latch::Latch;
use crate::runtime::SimRuntime;
use crate::world::cache::{Behaviour, CacheWorld, Weights};
use crate::world::join;
use crate::world::manager::ManagerWorld;
use crate::world::traced;

/// Every call's own bound: shorter than every configured timeout of the worlds here.
const WITHIN: Duration = Duration::from_millis(5);

fn within() -> CallOptions {
    CallOptions::new().with_timeout(WITHIN)
}

/// The call that started at `start` on `rt`'s clock ended by its deadline, and its error names
/// the bound it had (`waited`).
fn on_time<R: Runtime>(rt: &R, start: Duration, waited: Option<Duration>, what: &str) {
    let took = rt.now().saturating_sub(start);
    ensure!(took <= WITHIN, "S-D1", "{what} waited {took:?}, past its call's deadline of {WITHIN:?}");
    if let Some(waited) = waited {
        ensure!(
            waited <= WITHIN,
            "S-D1",
            "{what} says it waited up to {waited:?}, not its call's {WITHIN:?}"
        );
    }
}

/// S-D1: A and B fill a cache of two and the main thread leases both; it also holds X's
/// lifecycle lock. T1 adds X (a lock wait), T2 removes A (a drain), T3 adds C (a wait for
/// capacity), each with a deadline far shorter than the configured timeouts: each fails by its
/// deadline with its wait's own error, and nothing changes.
pub(super) fn manager_waits<R: SimRuntime, D: Depth>(rt: R) {
    let builder = ManagerWorld::builder(rt)
        .model("A", &[], &[])
        .model("B", &[], &[])
        .model("C", &[], &[])
        .model("X", &[], &[]);
    let world = cache::<R, D>(builder, 2, &["A", "B"], &["A", "B"]);
    let leases = ["A", "B"].map(|id| world.manager.lease(id).expect("preloaded"));
    let x = world.manager.lock(&ModelId::new("X").expect("valid")).expect("uncontended");
    let t1 = world.spawn("T1", |m, t| {
        let start = m.runtime().now();
        let got = traced(t, "add_with(X, 5ms)", || m.add_model_with("X", None, within()));
        (start, got)
    });
    let t2 = world.spawn("T2", |m, t| {
        let start = m.runtime().now();
        let got = traced(t, "remove_with(A, 5ms)", || m.remove_with("A", within()));
        (start, got)
    });
    let t3 = world.spawn("T3", |m, t| {
        let start = m.runtime().now();
        let got = traced(t, "add_with(C, 5ms)", || m.add_model_with("C", None, within()));
        (start, got)
    });
    let (start, added) = join::<R, _>(t1);
    let expired = |e: &ManagerError| e.is_wait_expiry();
    ensure!(added.as_ref().is_err_and(expired), "contract", "add(X)'s timeout is no wait expiry: {added:?}");
    match added {
        Err(ManagerError::LockTimeout { waited, .. }) => {
            on_time(&world.rt, start, Some(waited), "add(X)'s lock")
        }
        other => ensure!(false, "contract", "add(X) behind a held lock gave {other:?}"),
    }
    let (start, removed) = join::<R, _>(t2);
    ensure!(
        removed.as_ref().is_err_and(expired),
        "contract",
        "remove(A)'s drain is no wait expiry: {removed:?}"
    );
    match removed {
        Err(ManagerError::Busy { waited, .. }) => {
            on_time(&world.rt, start, Some(waited), "remove(A)'s drain")
        }
        other => ensure!(false, "contract", "remove(A) of a leased model gave {other:?}"),
    }
    let (start, added) = join::<R, _>(t3);
    match added {
        Err(ManagerError::CapacityExhausted { waited, .. }) => {
            on_time(&world.rt, start, Some(waited), "add(C)'s wait for capacity");
        }
        other => ensure!(false, "contract", "add(C) into a cache full of leased models gave {other:?}"),
    }
    drop((x, leases));
    ensure!(
        world.manager.contains("A") && !world.manager.contains("C"),
        "S-D1",
        "a call that ran out of time changed the registry: {:?}",
        world.manager.ids()
    );
    finish(&world);
}

/// S-D1l: A's eviction (for an add of N into a cache of one) is held inside A's unload; T2
/// leases A with a deadline and waits for the eviction's outcome: by its deadline it gets
/// `LockTimeout`. The unload then fails, and A stays.
pub(super) fn lease_wait<R: SimRuntime, D: Depth>(rt: R) {
    let (world, t1) = super::eviction::failing_held_eviction::<R, D>(rt);
    let probe = std::sync::Arc::clone(&world.probe);
    let t2 = world.spawn("T2", move |m, t| {
        probe.wait_for_gated_unload();
        let start = m.runtime().now();
        let got = traced(t, "lease_with(A, 5ms)", || m.lease_with("A", within()).map(drop));
        (start, got)
    });
    let (start, leased) = join::<R, _>(t2);
    match leased {
        Err(ManagerError::LockTimeout { waited, .. }) => {
            on_time(&world.rt, start, Some(waited), "lease(A)'s wait for the eviction");
        }
        other => ensure!(false, "contract", "a lease racing a held eviction gave {other:?}"),
    }
    world.probe.open_gate();
    let added = join::<R, _>(t1);
    ensure!(
        matches!(added, Err(ManagerError::Unload { .. })),
        "contract",
        "add(N) whose only victim fails to unload gave {added:?}"
    );
    finish(&world);
}

/// S-D1c: `a` fills most of a hard budget, locked by the main thread; T1 loads `b`, which
/// needs room (a wait for room); T2's load of `k` on the other device is held inside its
/// loader, and T3 loads `k` on this one (a wait for another device's load). T1 and T3 have a
/// deadline far shorter than the group's waits: each fails by it, with nothing reserved or
/// claimed after.
pub(super) fn cache_waits<R: SimRuntime>(rt: R) {
    let world = CacheWorld::hard(rt, 100, 2);
    let a =
        world.caches[0].get_or_put("a", 60, || Ok::<_, &str>(Weights::plain(60))).expect("setup load").lock();
    let (loading, gate) = (Arc::new(Latch::new(&world.rt)), Arc::new(Latch::new(&world.rt)));
    let t1 = {
        let (c0, rt): (Cache<R>, _) = (Arc::clone(&world.caches[0]), world.rt.clone());
        world.spawn("T1", move |_, _| {
            let start = rt.now();
            let got = traced("T1", "get_or_put_with(b, 5ms)", || {
                c0.get_or_put_with("b", 60, || Ok::<_, &str>(Weights::plain(60)), within()).map(drop)
            });
            (start, got)
        })
    };
    let t2 = {
        let (c1, loading, gate): (Cache<R>, _, _) =
            (Arc::clone(&world.caches[1]), Arc::clone(&loading), Arc::clone(&gate));
        world.spawn("T2", move |_, _| {
            traced("T2", "get_or_put(k)", || {
                c1.get_or_put("k", 10, || {
                    loading.add(1);
                    gate.wait_for(1);
                    Ok::<_, &str>(Weights::plain(10))
                })
                .map(drop)
            })
        })
    };
    let t3 = {
        let (c0, loading, rt): (Cache<R>, _, _) =
            (Arc::clone(&world.caches[0]), Arc::clone(&loading), world.rt.clone());
        world.spawn("T3", move |_, _| {
            loading.wait_for(1);
            let start = rt.now();
            let got = traced("T3", "get_or_put_with(k, 5ms)", || {
                c0.get_or_put_with("k", 10, || Ok::<_, &str>(Weights::plain(10)), within()).map(drop)
            });
            (start, got)
        })
    };
    let (start, got) = join::<R, _>(t1);
    ensure!(
        got.as_ref().is_err_and(CacheError::is_wait_expiry),
        "contract",
        "no room is no wait expiry: {got:?}"
    );
    match got {
        Err(CacheError::NoRoom { waited, .. }) => {
            on_time(&world.rt, start, Some(waited), "get_or_put(b)'s wait for room")
        }
        other => ensure!(false, "contract", "a load with no room gave {other:?}"),
    }
    let (start, got) = join::<R, _>(t3);
    let expiry = got.as_ref().is_err_and(CacheError::is_wait_expiry);
    ensure!(expiry, "contract", "a load-wait timeout is no wait expiry: {got:?}");
    match got {
        Err(CacheError::LoadWaitTimeout { waited, .. }) => {
            on_time(&world.rt, start, Some(waited), "get_or_put(k)'s wait for the other device's load");
        }
        other => ensure!(false, "contract", "a load behind another device's held load gave {other:?}"),
    }
    gate.add(1);
    let got = join::<R, _>(t2);
    ensure!(got.is_ok(), "contract", "T2's load of k gave {got:?}");
    drop(a);
    let reserved = world.group.budget().reserved();
    ensure!(reserved == 0, "A3", "{reserved} bytes still reserved after every call returned");
    finish_cache(&world);
}

/// S-D1v: `a` (60 device bytes) is placed and locked by the main thread under a device budget
/// of 100; T1 lowers the budget to 30 with a deadline far shorter than the cache's move wait.
/// The lowering offloads nothing (the only copy is locked) and fails by its deadline with
/// `DeviceOverBudget` naming `a`; the new budget stays.
pub(super) fn device_budget_wait<R: SimRuntime>(rt: R) {
    let world = CacheWorld::new(rt, 1000, 1);
    let script = world.with_device(100);
    admit(&world.caches[0], &script, "a", 60, Behaviour::default());
    let a = place(&world.caches[0], "a", "main").expect("a fits the device");
    let t1 = {
        let (c0, rt): (Cache<R>, _) = (Arc::clone(&world.caches[0]), world.rt.clone());
        world.spawn("T1", move |_, _| {
            let start = rt.now();
            let lowered =
                traced("T1", "set_device_budget(30, 5ms)", || c0.set_device_budget(Some(30), within()));
            (start, lowered)
        })
    };
    let (start, lowered) = join::<R, _>(t1);
    match lowered {
        Err(CacheError::DeviceOverBudget { waited, used, locked, .. }) => {
            on_time(&world.rt, start, Some(waited), "set_device_budget's wait for locked copies");
            ensure!(
                used == 60 && locked == ["a"],
                "contract",
                "the lowering reports {used} bytes over, locked {locked:?}; a (60) is the one held"
            );
        }
        other => ensure!(false, "contract", "lowering under a locked copy gave {other:?}"),
    }
    drop(a);
    let cap = world.caches[0].device_budget_cap();
    ensure!(cap == Some(30), "contract", "the device budget is {cap:?} after the lowering timed out");
    finish_cache(&world);
}

/// S-D2: under a hard RAM cap of 130 and a device budget of 100, `a` (60) is placed and locked
/// by the main thread and `c` (50) is held (got, not locked) by it too. T1 puts `b` (60), which waits
/// for RAM room; T2 places `c` on the device, which waits for device room: each with a
/// deadline far shorter than the room wait and the move wait, each fails by it with its
/// wait's own error, and nothing stays claimed.
pub(super) fn put_and_device_waits<R: SimRuntime>(rt: R) {
    let world = CacheWorld::hard(rt, 130, 1);
    let script = world.with_device(100);
    admit(&world.caches[0], &script, "a", 60, Behaviour::default());
    admit(&world.caches[0], &script, "c", 50, Behaviour::default());
    let a = place(&world.caches[0], "a", "main").expect("a fits the device");
    // Held by the main thread throughout, so that no room is made by evicting it.
    let kept = world.caches[0].get("c").expect("resident");
    let c = world.caches[0].get("c").expect("resident");
    let t1 = {
        let (c0, rt, script): (Cache<R>, _, _) =
            (Arc::clone(&world.caches[0]), world.rt.clone(), Arc::clone(&script));
        world.spawn("T1", move |_, _| {
            let start = rt.now();
            let weights = Weights::scripted(60, Behaviour::default(), &script);
            let put = traced("T1", "put_with(b, 5ms)", || {
                c0.put_with("b", weights, 60, PutOptions::default(), within()).map(drop)
            });
            (start, put)
        })
    };
    let t2 = {
        let rt = world.rt.clone();
        world.spawn("T2", move |_, _| {
            let start = rt.now();
            let placed =
                traced("T2", "lock_on_device_with(c, 5ms)", || c.lock_on_device_with(within()).map(drop));
            (start, placed)
        })
    };
    let (start, put) = join::<R, _>(t1);
    match put {
        Err(CacheError::NoRoom { waited, .. }) => {
            on_time(&world.rt, start, Some(waited), "put(b)'s wait for room")
        }
        other => ensure!(false, "contract", "a put with no room gave {other:?}"),
    }
    let (start, placed) = join::<R, _>(t2);
    match placed {
        Err(CacheError::DeviceFull { .. }) => {
            on_time(&world.rt, start, None, "placing c's wait for device room")
        }
        other => ensure!(false, "contract", "placing c with no device room gave {other:?}"),
    }
    drop((a, kept));
    finish_cache(&world);
}

/// S-D2p: the main thread holds X's lifecycle lock while T1 pins X with a deadline far shorter
/// than the lock timeout: the pin fails by it with `LockTimeout`, and X is not pinned.
pub(super) fn pin_wait<R: SimRuntime, D: Depth>(rt: R) {
    let builder = ManagerWorld::builder(rt).model("X", &[], &[]);
    let world = cache::<R, D>(builder, 2, &["X"], &["X"]);
    let x = world.manager.lock(&ModelId::new("X").expect("valid")).expect("uncontended");
    let t1 = world.spawn("T1", |m, t| {
        let start = m.runtime().now();
        (start, traced(t, "pin_with(X, 5ms)", || m.pin_with("X", within())))
    });
    let (start, pinned) = join::<R, _>(t1);
    drop(x);
    match pinned {
        Err(ManagerError::LockTimeout { waited, .. }) => {
            on_time(&world.rt, start, Some(waited), "pin(X)'s wait for the lifecycle lock")
        }
        other => ensure!(false, "contract", "a pin behind a held lock gave {other:?}"),
    }
    ensure!(!world.manager.is_pinned("X"), "contract", "a pin that timed out pinned X");
    finish(&world);
}
