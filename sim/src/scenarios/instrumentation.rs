//! The library's own `tracing` events and `metrics` calls are user code (SPEC 3.10, `C-P6`):
//! a subscriber or recorder that panics right after a claim (a lifecycle lock, a hold, a
//! lock of a record) strands nothing, because the claim's handle exists before anything is
//! reported. Every execution also checks that no report runs inside a monitor
//! ([`crate::instrumentation`]).

use std::time::Duration;

use resident::ManagerExt;
use resident::cache::PutOptions;
use resident::runtime::Arc;
use resident::{Manager, ModelId};

use super::cache::{finish as finish_cache, load, preload};
use super::layers::{Depth, cache, finish};
use crate::ensure;
use crate::instrumentation;
use crate::runtime::SimRuntime;
use crate::trace;
use crate::violation::catching;
use crate::world::cache::{Behaviour, CacheWorld, Weights};
use crate::world::join;
use crate::world::manager::ManagerWorld;
use crate::world::traced;

/// C-P6: T1 holds X's lifecycle lock for a moment while T2's warm add of X waits for it (or
/// the other way round); the metrics recorder panics when the wait is reported. The panic
/// reaches the waiter alone, and the lock it had taken is released: X can be locked again,
/// and nothing stays reserved (I3).
pub(super) fn recorder_panics_after_a_lock_wait<R: SimRuntime, D: Depth>(rt: R) {
    let builder = ManagerWorld::builder(rt).model("X", &[], &[]);
    let world = cache::<R, D>(builder, 2, &["X"], &["X"]);
    instrumentation::panic_at(&["resident_lock_wait_seconds"]);
    // Either thread may be the one that waits, and so the one that panics.
    let t1 = world.spawn("T1", |m, t| {
        traced(t, "lock(X), yield, release", || {
            catching(|| {
                m.lock("X").map(|guard| {
                    R::yield_now();
                    drop(guard);
                })
            })
        })
    });
    let t2 = world.spawn("T2", |m, t| traced(t, "add(X)", || catching(|| m.add_model("X", None))));
    let locked = join::<R, _>(t1);
    let _ = join::<R, _>(t2);
    instrumentation::disarm();
    ensure!(locked.as_ref().is_none_or(|l| l.is_ok()), "contract", "T1: lock(X) gave {locked:?}");
    let again = world.manager.try_lock(&ModelId::new("X").expect("a valid id"));
    ensure!(again.is_some(), "C-P6", "X's lifecycle lock stayed held after the recorder panicked");
    drop(again);
    finish(&world);
}

/// C-P6c: the `tracing` subscriber panics at a cache's `get` event (after the hold is counted),
/// at a `claim converted` event (an admission turned into a hold) and at a `claim released`
/// event (in a guard's `Drop`: T4's, whose `get_locked` reports nothing armed; every other
/// release here runs while its thread unwinds, when nothing is reported), while T3 drops the
/// model. Every hold and lock is released: after shutdown nothing stays resident or counted
/// (A6).
pub(super) fn subscriber_panics_after_cache_claims<R: SimRuntime>(rt: R) {
    let world = CacheWorld::new(rt, 100, 1);
    preload(&world.caches[0], "m", 30);
    instrumentation::panic_at(&["get", "claim converted", "claim released"]);
    let c0 = Arc::clone(&world.caches[0]);
    let t1 = world.spawn("T1", move |_, _| {
        trace::record("T1", "get(m) and lock");
        let _ = catching(|| c0.get("m").map(|loaded| drop(loaded.lock())));
    });
    let c0 = Arc::clone(&world.caches[0]);
    let t2 = world.spawn("T2", move |_, _| {
        let _ = catching(|| drop(load(&c0, "n", 30, "T2")));
    });
    let c0 = Arc::clone(&world.caches[0]);
    let t3 = world.spawn("T3", move |_, _| {
        trace::record("T3", "drop_model(m)");
        let _ = catching(|| c0.drop_model("m"));
    });
    let c0 = Arc::clone(&world.caches[0]);
    let t4 = world.spawn("T4", move |_, _| {
        trace::record("T4", "get_locked(m), then unlock");
        let _ = catching(|| c0.get_locked("m").map(drop));
    });
    join::<R, _>(t1);
    join::<R, _>(t2);
    join::<R, _>(t3);
    join::<R, _>(t4);
    instrumentation::disarm();
    finish_cache(&world);
}

/// C-P6r (found by the generated cache programs): `m`'s weights panic when dropped, and the
/// main thread holds `m` locked. The `tracing` subscriber panics at a `claim released` event.
/// T1 drops `m` (marked stale: it is locked); T2 lets go of the lock. A release after the drop
/// evicts `m`, then its report panics: the guard's reference, now the record's last, is let go
/// under a catch in that unwind (the weights' panic is dropped), never plainly, which aborts.
pub(super) fn subscriber_panics_at_a_stale_record_s_last_release<R: SimRuntime>(rt: R) {
    let world = CacheWorld::new(rt, 100, 1);
    let script = world.script();
    let panicking = Weights::scripted(30, Behaviour { drop_panics: true, ..Behaviour::default() }, &script);
    let locked =
        world.caches[0].put("m", panicking, 30, PutOptions::default()).map(|a| a.into_loaded().lock());
    let Ok(guard) = locked else {
        return ensure!(false, "contract", "setup put(m) gave {locked:?}");
    };
    instrumentation::panic_at(&["claim released"]);
    let c0 = Arc::clone(&world.caches[0]);
    let t1 = world.spawn("T1", move |_, _| {
        trace::record("T1", "drop_model(m)");
        let _ = catching(|| c0.drop_model("m"));
    });
    let t2 = world.spawn("T2", move |_, _| {
        trace::record("T2", "unlock m");
        let _ = catching(|| drop(guard));
    });
    join::<R, _>(t1);
    join::<R, _>(t2);
    instrumentation::disarm();
    script.disarm();
    finish_cache(&world);
}

/// C-P6s: the `tracing` subscriber panics at a cache's shutdown report while T1 locks and lets
/// go of a record on the other cache. The group's shutdown still shuts every cache down: none
/// takes a keep-alive afterwards, and once T1 lets go nothing stays resident or counted.
pub(super) fn subscriber_panics_at_shutdown<R: SimRuntime>(rt: R) {
    let world = CacheWorld::new(rt, 100, 2);
    preload(&world.caches[0], "m", 30);
    preload(&world.caches[1], "n", 30);
    let c1 = Arc::clone(&world.caches[1]);
    let t1 = world.spawn("T1", move |_, _| {
        trace::record("T1", "get(n) on cuda:1 and lock, then unlock");
        let _ = catching(|| c1.get("n").map(|loaded| drop(loaded.lock())));
    });
    instrumentation::panic_at(&["shutdown"]);
    trace::record("main", "shuts the group down (the subscriber panics at each cache's report)");
    let _ = catching(|| world.group.shutdown());
    instrumentation::disarm();
    join::<R, _>(t1);
    for cache in &world.caches {
        let device = cache.device();
        ensure!(
            !cache.set_keep_alive(Some(Duration::from_secs(1))),
            "C-P6s",
            "{device} stayed open after the group's shutdown"
        );
        let keys = cache.keys();
        ensure!(
            keys.is_empty(),
            "C-P6s",
            "{device} keeps {keys:?} after the group's shutdown and every release"
        );
    }
    finish_cache(&world);
}

/// C-P6x: `m` (60) is idle under a cap of 100; the `tracing` subscriber panics at the report
/// of a RAM cap change. T1 lowers the cap to 50: the panic reaches T1, and the cap is met
/// anyway — the report comes once the evictions are done (A7, SPEC 1.12).
pub(super) fn subscriber_panics_at_a_cap_change<R: SimRuntime>(rt: R) {
    let world = CacheWorld::hard(rt, 100, 1);
    preload(&world.caches[0], "m", 60);
    instrumentation::panic_at(&["RAM cap changed"]);
    let group = Arc::clone(&world.group);
    let t1 = world.spawn("T1", move |_, _| {
        trace::record("T1", "set_cap(50)");
        let lowered = catching(|| group.set_cap(50, resident::CallOptions::new()));
        ensure!(lowered.is_none(), "contract", "set_cap(50) gave {lowered:?} past a panicking subscriber");
    });
    join::<R, _>(t1);
    instrumentation::disarm();
    let budget = world.group.budget();
    let (in_use, cap) = (budget.committed(), budget.cap());
    ensure!(
        in_use <= cap,
        "A7",
        "{in_use} bytes in use over the lowered cap of {cap} after its report panicked"
    );
    finish_cache(&world);
}

/// C-P6v: `d` (40 device bytes) is placed and unlocked under a device budget of 100; the
/// `tracing` subscriber panics at the report of a device budget change. T1 lowers the budget
/// to 30: the panic reaches T1, and the budget is met anyway — the report comes once the
/// offloads are done (SPEC 1.12).
pub(super) fn subscriber_panics_at_a_device_budget_change<R: SimRuntime>(rt: R) {
    let world = CacheWorld::new(rt, 1000, 1);
    let script = world.with_device(100);
    super::placement::admit(&world.caches[0], &script, "d", 40, Behaviour::default());
    drop(super::placement::place(&world.caches[0], "d", "main").expect("d fits the device"));
    instrumentation::panic_at(&["device budget changed"]);
    let device = Arc::clone(&world.caches[0]);
    let t1 = world.spawn("T1", move |_, _| {
        trace::record("T1", "set_device_budget(30)");
        let lowered = catching(|| device.set_device_budget(Some(30), resident::CallOptions::new()));
        ensure!(
            lowered.is_none(),
            "contract",
            "set_device_budget(30) gave {lowered:?} past a panicking subscriber"
        );
    });
    join::<R, _>(t1);
    instrumentation::disarm();
    let used = world.caches[0].device_bytes();
    ensure!(
        used <= 30,
        "S-Z1",
        "{used} device bytes over the lowered budget of 30 after its report panicked"
    );
    finish_cache(&world);
}

/// C-P6m: a cache (max 3) holds three idle models; the `tracing` subscriber panics at the
/// report of a `max_size` change. T1 lowers it to 1: the panic reaches T1, and the cache fits
/// the lowered limit anyway — the report comes once the evictions are done (SPEC 1.12).
pub(super) fn subscriber_panics_at_a_max_size_change<R: SimRuntime>(rt: R) {
    let builder = ManagerWorld::builder(rt).model("a", &[], &[]).model("b", &[], &[]).model("c", &[], &[]);
    let world = builder.preloaded(&["a", "b", "c"], |base| {
        resident::FixedSizeCache::new(base, resident::FixedSizeConfig::new(3)).expect("valid")
    });
    instrumentation::panic_at(&["max_size changed"]);
    let t1 = world.spawn("T1", |m, t| {
        traced(t, "set_max_size(1)", || catching(|| m.manager.set_max_size(1, resident::CallOptions::new())))
    });
    let lowered = join::<R, _>(t1);
    instrumentation::disarm();
    ensure!(lowered.is_none(), "contract", "set_max_size(1) gave {lowered:?} past a panicking subscriber");
    let registered = world.manager.len();
    ensure!(
        registered <= 1,
        "1.12",
        "{registered} models registered over the lowered max_size of 1 after its report panicked"
    );
    crate::world::checks::check_queue(&world.manager);
    world.check_quiescent();
}

/// C-P6z: two caches (max 3, `max_bytes` 100) over their bases; the metrics recorder panics
/// at the report of a load, which comes after the model is registered. In the first, A (60
/// bytes) is registered and T1 adds X (60 bytes); in the second, B (60) and Y (10, its next
/// version 60) are, and T2 replaces Y. Each panic reaches its thread, and the model it
/// registered stays registered (under its lock). Each cache sizes that model and enforces its
/// byte budget as for a return: A and B go, at most 100 bytes stay registered in each.
pub(super) fn recorder_panics_after_a_registered_load<R: SimRuntime>(rt: R) {
    let stack = |rt: R, models: &[(&'static str, &'static [u64])], preload: &[&str]| {
        let mut builder = ManagerWorld::builder(rt);
        for &(id, sizes) in models {
            builder = builder.model(id, &[], &[]).sizes(id, sizes);
        }
        let config = resident::FixedSizeConfig::new(3).with_max_bytes(100);
        builder.preloaded(preload, |base| resident::FixedSizeCache::new(base, config).expect("valid"))
    };
    let added = stack(rt.clone(), &[("A", &[60]), ("X", &[60])], &["A"]);
    let replaced = stack(rt, &[("B", &[60]), ("Y", &[10, 60])], &["B", "Y"]);
    instrumentation::panic_at(&["resident_model_loads_total"]);
    let t1 = added.spawn("T1", |m, t| traced(t, "add(X)", || catching(|| m.add_model("X", None))));
    let t2 = replaced.spawn("T2", |m, t| traced(t, "replace(Y)", || catching(|| m.replace("Y", None))));
    let (add, replace) = (join::<R, _>(t1), join::<R, _>(t2));
    instrumentation::disarm();
    ensure!(add.is_none(), "contract", "add(X) gave {add:?} past a panicking recorder");
    ensure!(replace.is_none(), "contract", "replace(Y) gave {replace:?} past a panicking recorder");
    for (world, id) in [(&added, "X"), (&replaced, "Y")] {
        ensure!(world.manager.contains(id), "contract", "{id}, registered before the report, is gone");
        let (bytes, sizes) = super::eviction::registered_bytes(&world.manager);
        ensure!(
            bytes <= 100,
            "C-P6z",
            "{bytes} bytes registered after {id}'s load, max_bytes 100: {sizes:?}"
        );
        crate::world::checks::check_queue(&world.manager);
        world.check_quiescent();
    }
}

/// C-P6w: under a cap of 100, cuda:0 holds `a` (40) and cuda:1 `b` (40), both idle; cuda:0's
/// eviction callback panics. T1 lowers the cap to 30: cuda:0's evictions panic, and cuda:1
/// still makes its room in the same pass before the panic reaches T1 — the budget fits the
/// lowered cap (A7, SPEC 1.12).
pub(super) fn eviction_callback_panics_while_the_cap_is_lowered<R: SimRuntime>(rt: R) {
    let world = CacheWorld::hard(rt, 100, 2);
    preload(&world.caches[0], "a", 40);
    preload(&world.caches[1], "b", 40);
    world.caches[0].on_evict(|_, _| std::panic::panic_any(crate::violation::InjectedPanic));
    let group = Arc::clone(&world.group);
    let t1 = world.spawn("T1", move |_, _| {
        trace::record("T1", "set_cap(30)");
        let lowered = catching(|| group.set_cap(30, resident::CallOptions::new()));
        ensure!(lowered.is_none(), "contract", "set_cap(30) gave {lowered:?} past a panicking callback");
    });
    join::<R, _>(t1);
    let budget = world.group.budget();
    let (in_use, cap) = (budget.committed(), budget.cap());
    ensure!(
        in_use <= cap,
        "A7",
        "{in_use} bytes in use over the lowered cap of {cap} after a callback panicked"
    );
    finish_cache(&world);
}
