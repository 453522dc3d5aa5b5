//! Device placement scenarios (SPEC 3.9, 3.10): the device budget holds at every step — checked
//! from inside every scripted move, where live copies plus moves in flight must fit — a copy used
//! through a detached record stays counted, panicking user code never strands a move, a wait for
//! another thread's move is bounded, and a replaced slot's copy is dropped outside every lock.

use std::time::Duration;

use resident::CacheError;
use resident::cache::{DeviceGuard, PutOptions};
use resident::runtime::Arc;

use super::cache::{Cache, finish};
use super::wakeups::{HEAD_START, give_way, no_deadline_passed};
use crate::ensure;
use crate::runtime::SimRuntime;
use crate::trace;
use crate::violation::catching;
use crate::world::cache::{Behaviour, CacheWorld, Script, Weights};
use crate::world::join;

type Placed<R> = DeviceGuard<Weights<R>, R>;

/// Leaves `key` (`bytes`, scripted with `behaviour`) resident and idle in `cache`.
pub(super) fn admit<R: SimRuntime>(
    cache: &Cache<R>,
    script: &Arc<Script<R>>,
    key: &str,
    bytes: u64,
    behaviour: Behaviour,
) {
    let weights = Weights::scripted(bytes, behaviour, script);
    drop(cache.put(key, weights, bytes, PutOptions::default()).expect("setup put"));
}

/// `get(key)` then `lock_on_device`, traced.
pub(super) fn place<R: SimRuntime>(
    cache: &Cache<R>,
    key: &str,
    thread: &str,
) -> Result<Placed<R>, CacheError> {
    trace::record(thread, format!("lock_on_device({key})"));
    let loaded = cache.get(key).expect("resident");
    let placed = loaded.lock_on_device();
    trace::record(thread, format!("lock_on_device({key}) -> {:?}", placed.as_ref().map(|_| ())));
    placed
}

fn full_or_ok<R: SimRuntime>(placed: &Result<Placed<R>, CacheError>) -> bool {
    matches!(placed, Ok(_) | Err(CacheError::DeviceFull { .. }))
}

/// C-P1: a device budget of 100; two first locks of two 60-byte records race. Each move checks
/// that live copies plus moves in flight fit; one lock gets `DeviceFull` or waits its turn.
pub(super) fn first_locks_race<R: SimRuntime>(rt: R) {
    let world = CacheWorld::new(rt, 1000, 1);
    let script = world.with_device(100);
    for key in ["a", "b"] {
        admit(&world.caches[0], &script, key, 60, Behaviour::default());
    }
    let handles = ["a", "b"].map(|key| {
        let c0 = Arc::clone(&world.caches[0]);
        let name = if key == "a" { "T1" } else { "T2" };
        world.spawn(name, move |_, _| {
            let placed = place(&c0, key, name);
            ensure!(full_or_ok(&placed), "contract", "{name}: lock_on_device({key}) gave {placed:?}");
        })
    });
    for handle in handles {
        join::<R, _>(handle);
    }
    let (used, cap) = (world.caches[0].device_bytes(), world.caches[0].device_budget_cap());
    ensure!(cap == Some(100) && used <= 100, "A7", "{used} device bytes counted, budget {cap:?}");
    finish(&world);
}

/// C-P2: T1 keeps m placed (60 of 100 device bytes) while T2 drops m, admits it again and places
/// the fresh record: T1's copy, now used through a detached record, still counts, so T2 waits
/// for it to be dropped (the drop's debit wakes it).
pub(super) fn detached_copy_counts<R: SimRuntime>(rt: R) {
    let world = CacheWorld::new(rt, 1000, 1);
    let script = world.with_device(100);
    admit(&world.caches[0], &script, "m", 60, Behaviour::default());
    let (placed, placing) = (world.signal(), world.signal());
    let (c0, p1, d1) = (Arc::clone(&world.caches[0]), Arc::clone(&placed), Arc::clone(&placing));
    let t1 = world.spawn("T1", move |_, _| {
        let guard = place(&c0, "m", "T1");
        ensure!(guard.is_ok(), "contract", "T1: lock_on_device(m) gave {guard:?}");
        p1.post(());
        // Until T2 is about to place the fresh record, which waits for this copy's room.
        d1.wait();
        drop(guard);
    });
    let (c0, s2, p2, d2) =
        (Arc::clone(&world.caches[0]), Arc::clone(&script), Arc::clone(&placed), Arc::clone(&placing));
    let t2 = world.spawn("T2", move |_, _| {
        p2.wait();
        trace::record("T2", "drop_model(m), put(m)");
        c0.drop_model("m");
        admit(&c0, &s2, "m", 60, Behaviour::default());
        d2.post(());
        let again = place(&c0, "m", "T2");
        ensure!(again.is_ok(), "contract", "T2: lock_on_device(m) gave {again:?}");
    });
    join::<R, _>(t1);
    join::<R, _>(t2);
    finish(&world);
}

/// C-P3: a device budget of 60; a's copy is resident and unlocked, and its `Drop` panics. T1 and
/// T2 place b, which offloads a's copy: whoever offloads it panics, and the move it claimed must
/// be settled — at quiescence b can be placed.
pub(super) fn panic_during_move<R: SimRuntime>(rt: R) {
    let world = CacheWorld::new(rt, 1000, 1);
    let script = world.with_device(60);
    admit(&world.caches[0], &script, "a", 60, Behaviour { copy_drop_panics: true, ..Behaviour::default() });
    admit(&world.caches[0], &script, "b", 60, Behaviour::default());
    drop(place(&world.caches[0], "a", "main").expect("a fits the device"));
    let handles = ["T1", "T2"].map(|name| {
        let c0 = Arc::clone(&world.caches[0]);
        world.spawn(name, move |_, _| {
            // None: this locker dropped the panicking copy.
            let placed = catching(|| place(&c0, "b", name).map(drop));
            ensure!(
                matches!(placed, None | Some(Ok(()) | Err(CacheError::DeviceFull { .. }))),
                "contract",
                "{name}: lock_on_device(b) gave {placed:?}"
            );
        })
    });
    for handle in handles {
        join::<R, _>(handle);
    }
    script.disarm();
    let again = place(&world.caches[0], "b", "main");
    ensure!(again.is_ok(), "C-P3", "b cannot be placed at quiescence: {again:?}");
    drop(again);
    finish(&world);
}

/// C-P3w: T1's move of b hangs (its `to_device` waits for a gate); T2 locks b meanwhile and must
/// give up with `DeviceMoveTimeout`, after which it opens the gate.
pub(super) fn hung_move_wait_is_bounded<R: SimRuntime>(rt: R) {
    let world = CacheWorld::new(rt, 1000, 1);
    let script = world.with_device(100);
    admit(&world.caches[0], &script, "b", 60, Behaviour { gated_move: true, ..Behaviour::default() });
    let wait = Duration::from_millis(5);
    world.caches[0].set_move_wait(wait).expect("a valid wait");
    ensure!(world.caches[0].move_wait() == wait, "contract", "the move wait did not take");
    let c0 = Arc::clone(&world.caches[0]);
    let t1 = world.spawn("T1", move |_, _| {
        let placed = place(&c0, "b", "T1");
        ensure!(placed.is_ok(), "contract", "T1: lock_on_device(b) gave {placed:?}");
    });
    let (c0, s2) = (Arc::clone(&world.caches[0]), Arc::clone(&script));
    let t2 = world.spawn("T2", move |_, _| {
        s2.wait_for_moves(1);
        let placed = place(&c0, "b", "T2");
        s2.gate.add(1);
        ensure!(
            matches!(placed, Err(CacheError::DeviceMoveTimeout { .. })),
            "C-P3",
            "T2 waited on a hung move and got {placed:?}"
        );
    });
    join::<R, _>(t1);
    join::<R, _>(t2);
    finish(&world);
}

/// C-P4: m's copy is resident while T1 holds m unlocked; T2 drops m and admits it again, which
/// replaces the stale slot: the old slot's copy (its last reference) is dropped outside every
/// lock (the copy's `Drop` checks).
pub(super) fn replaced_copy_dropped_outside<R: SimRuntime>(rt: R) {
    let world = CacheWorld::new(rt, 1000, 1);
    let script = world.with_device(100);
    admit(&world.caches[0], &script, "m", 60, Behaviour::default());
    drop(place(&world.caches[0], "m", "main").expect("m fits the device"));
    let (held, done) = (world.signal(), world.signal());
    let (c0, h1, d1) = (Arc::clone(&world.caches[0]), Arc::clone(&held), Arc::clone(&done));
    let t1 = world.spawn("T1", move |_, _| {
        let hold = c0.get("m");
        ensure!(hold.is_some(), "contract", "T1: get(m) missed");
        h1.post(());
        d1.wait();
        drop(hold);
    });
    let (c0, s2, h2, d2) =
        (Arc::clone(&world.caches[0]), Arc::clone(&script), Arc::clone(&held), Arc::clone(&done));
    let t2 = world.spawn("T2", move |_, _| {
        h2.wait();
        trace::record("T2", "drop_model(m), put(m)");
        c0.drop_model("m");
        admit(&c0, &s2, "m", 60, Behaviour::default());
        d2.post(());
    });
    join::<R, _>(t1);
    join::<R, _>(t2);
    finish(&world);
}

/// W-13: T1 keeps a placed (60 of 100 device bytes); T2 places b (60), which fits once a's copy
/// can go. T1's unlock must wake T2 (no deadline passes).
pub(super) fn unlock_wakes_the_device_waiter<R: SimRuntime>(rt: R) {
    let world = CacheWorld::new(rt, 1000, 1);
    let script = world.with_device(100);
    for key in ["a", "b"] {
        admit(&world.caches[0], &script, key, 60, Behaviour::default());
    }
    let guard = place(&world.caches[0], "a", "main").expect("a fits the device");
    let c0 = Arc::clone(&world.caches[0]);
    let t1 = world.spawn("T1", move |_, _| {
        give_way::<R>(HEAD_START);
        trace::record("T1", "unlock a");
        drop(guard);
    });
    let c0b = Arc::clone(&c0);
    let t2 = world.spawn("T2", move |_, _| {
        let placed = place(&c0b, "b", "T2");
        ensure!(placed.is_ok(), "contract", "T2: lock_on_device(b) gave {placed:?}");
    });
    join::<R, _>(t1);
    join::<R, _>(t2);
    drop(c0);
    no_deadline_passed(&world.rt);
    finish(&world);
}

/// W-14: T1's move of a fails (its charge of 60 of 100 device bytes is released); T2 places b
/// (60) meanwhile. The release of the failed move's charge must wake T2 (no deadline passes).
pub(super) fn failed_move_wakes_the_device_waiter<R: SimRuntime>(rt: R) {
    let world = CacheWorld::new(rt, 1000, 1);
    let script = world.with_device(100);
    admit(&world.caches[0], &script, "a", 60, Behaviour { move_fails: true, ..Behaviour::default() });
    admit(&world.caches[0], &script, "b", 60, Behaviour::default());
    let c0 = Arc::clone(&world.caches[0]);
    let t1 = world.spawn("T1", move |_, _| {
        let placed = place(&c0, "a", "T1");
        ensure!(
            matches!(placed, Err(CacheError::DeviceMove { .. })),
            "contract",
            "T1: lock_on_device(a) gave {placed:?}"
        );
    });
    let c0 = Arc::clone(&world.caches[0]);
    let t2 = world.spawn("T2", move |_, _| {
        let placed = place(&c0, "b", "T2");
        ensure!(placed.is_ok(), "contract", "T2: lock_on_device(b) gave {placed:?}");
    });
    join::<R, _>(t1);
    join::<R, _>(t2);
    script.disarm();
    no_deadline_passed(&world.rt);
    finish(&world);
}

/// C-B4m: under a hard RAM cap of 100, `a` (40) is idle and `x` (40) resident on cuda:1, where
/// T2's move of x hangs (its `to_device` waits for a gate). T3 locks x meanwhile and waits for
/// T2's move; T1 loads `b` (60) on cuda:0, which needs `a`'s room and asks cuda:1 for it. A
/// request whose try found cuda:1's lock held by T3's decision is honoured when T3 lets the
/// lock go to wait: `a` goes and T1 loads without sleeping out its room wait (3.2, 3.11). The
/// main thread opens the gate only once T1 is done.
pub(super) fn room_request_beside_a_move_wait<R: SimRuntime>(rt: R) {
    const SMALL: u64 = 40;
    let world = CacheWorld::hard(rt, 100, 2);
    let script = world.with_device(1000);
    let c1 = Arc::clone(&world.caches[1]);
    admit(&c1, &script, "a", SMALL, Behaviour::default());
    admit(&c1, &script, "x", SMALL, Behaviour { gated_move: true, ..Behaviour::default() });
    let mover = Arc::clone(&c1);
    let t2 = world.spawn("T2", move |_, _| place(&mover, "x", "T2").map(drop));
    let (waiter, s3) = (Arc::clone(&c1), Arc::clone(&script));
    let t3 = world.spawn("T3", move |_, _| {
        s3.wait_for_moves(1);
        place(&waiter, "x", "T3").map(drop)
    });
    let c0 = Arc::clone(&world.caches[0]);
    let t1 = world.spawn("T1", move |_, _| {
        trace::record("T1", "get_or_put(b) on cuda:0");
        c0.get_or_put("b", 60, || Ok::<_, &str>(Weights::plain(60))).map(drop)
    });
    let loaded = join::<R, _>(t1);
    no_deadline_passed(&world.rt);
    script.gate.add(1);
    let (moved, waited) = (join::<R, _>(t2), join::<R, _>(t3));
    ensure!(loaded.is_ok(), "contract", "T1's load of b gave {loaded:?}");
    ensure!(moved.is_ok() && waited.is_ok(), "contract", "the locks of x gave {moved:?} and {waited:?}");
    finish(&world);
}
