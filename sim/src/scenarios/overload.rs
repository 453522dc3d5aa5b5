//! Overload scenarios (SPEC 2.14, `S-O1*`): more models in demand than slots. The first add
//! waiting for capacity designates its victim, whose last lease hands it over in the same step
//! as its count reaches zero; adds waiting for capacity, and loads waiting for RAM room, are
//! served in arrival order, and the first served wakes the next.

use std::time::Duration;

use resident::runtime::Arc;
use resident::{Added, CallOptions, Eviction, LifecycleGuard, Manager, ManagerError, ManagerExt};

use super::cache::{Cache, finish as finish_cache};
use super::layers::{Depth, Stack, cache, finish};
use super::wakeups::{HEAD_START, give_way, no_deadline_passed};
use crate::latch::Latch;
use crate::runtime::SimRuntime;
use crate::world::cache::{CacheWorld, Weights};
use crate::world::join;
use crate::world::manager::{Managed, ManagerWorld, SimModel, Step};
use crate::world::traced;
use crate::{ensure, trace};

/// Leases T2 ends and starts again on the victim.
const STREAM: usize = 2;

/// S-O1: A fills a cache of one and the main thread leases it. T1 adds B: nothing is
/// evictable, so it waits first in line and designates A. T2 is a stream of leases on A: it
/// ends the lease it holds and leases A again, twice. A lease T2 starts after ending one while
/// T1 was in line must not get A back (it waits for T1's eviction and finds A gone), and T1 is
/// served, woken by the lease's end, before any deadline.
pub(super) fn a_stream_of_leases_does_not_starve_a_waiting_add<R: SimRuntime, D: Depth>(rt: R) {
    let builder = ManagerWorld::builder(rt).model("A", &[], &[]).model("B", &[], &[]);
    let world = cache::<R, D>(builder, 1, &["A"], &[]);
    let first = world.manager.lease("A").expect("preloaded");
    let t1 = world.spawn("T1", |m, t| traced(t, "add(B)", || m.add_model("B", None)));
    let t2 = world.spawn("T2", move |m, t| {
        let mut held = Some(first);
        for _ in 0..STREAM {
            give_way::<R>(HEAD_START);
            // Read before the lease ends: T1 designated A in the step that put it in line.
            let in_line = m.manager.waiting() > 0;
            trace::record(t, format!("drop(lease A), T1 in line: {in_line}"));
            drop(held.take());
            match traced(t, "lease(A)", || m.lease("A")) {
                Ok(_) if in_line => return Err("a lease started after the designated A's last lease ended"),
                Ok(lease) => held = Some(lease),
                Err(ManagerError::NotFound { .. }) => return Ok(()),
                Err(_) => return Err("lease(A) failed other than NotFound"),
            }
        }
        Ok(())
    });
    let added = join::<R, _>(t1);
    let stream = join::<R, _>(t2);
    ensure!(
        stream.is_ok(),
        "S-O1",
        "{}: the add waiting for capacity lost A to a new lease",
        stream.unwrap_err()
    );
    ensure!(matches!(added, Ok(Added::Loaded)), "S-O1", "add(B) waiting for capacity gave {added:?}");
    no_deadline_passed(&world.rt);
    finish(&world);
}

/// S-O1f: A and B fill a cache of two, the main thread leases both (A the least recently
/// used), and lowering `max_size` to one fails at once: both are in use. T1 adds C, which needs
/// both slots (one of them owed to the lowering, SPEC 1.12). T2 ends its lease on A: if T1 was
/// waiting then, A was designated in the step that put T1 in line (the victim is owed, so its
/// close is not for nothing), and a lease T2 starts after must not get A back. T3 ends the
/// lease on B later. T1 is served, before any deadline.
pub(super) fn a_stream_of_leases_does_not_starve_an_add_over_a_lowered_limit<R: SimRuntime, D: Depth>(rt: R) {
    let builder = ManagerWorld::builder(rt).model("A", &[], &[]).model("B", &[], &[]).model("C", &[], &[]);
    let world = cache::<R, D>(builder, 2, &["A", "B"], &["A", "B"]);
    let (a, b) = (world.manager.lease("A").expect("preloaded"), world.manager.lease("B").expect("preloaded"));
    let lowered = world.manager.set_max_size(1, CallOptions::new().with_timeout(Duration::ZERO));
    ensure!(
        matches!(lowered, Err(ManagerError::OverLimit { max_size: 1, .. })),
        "contract",
        "lowering max_size to 1 with every model in use gave {lowered:?}"
    );
    let t1 = world.spawn("T1", |m, t| traced(t, "add(C)", || m.add_model("C", None)));
    let t2 = world.spawn("T2", move |m, t| {
        give_way::<R>(HEAD_START);
        // Read before the lease ends: T1 designated A in the step that put it in line.
        let in_line = m.manager.waiting() > 0;
        trace::record(t, format!("drop(lease A), T1 in line: {in_line}"));
        drop(a);
        if !in_line {
            return Ok(());
        }
        match traced(t, "lease(A)", || m.lease("A")) {
            Ok(_) => Err("a lease started after the designated A's last lease ended"),
            Err(ManagerError::NotFound { .. }) => Ok(()),
            Err(_) => Err("lease(A) failed other than NotFound"),
        }
    });
    let t3 = world.spawn("T3", move |_, t| {
        give_way::<R>(2 * HEAD_START);
        trace::record(t, "drop(lease B)");
        drop(b);
    });
    let added = join::<R, _>(t1);
    let stream = join::<R, _>(t2);
    join::<R, _>(t3);
    ensure!(
        stream.is_ok(),
        "S-O1f",
        "{}: the add waiting over the lowered limit lost A to a new lease",
        stream.unwrap_err()
    );
    ensure!(
        matches!(added, Ok(Added::Loaded)),
        "S-O1f",
        "add(C) waiting over the lowered limit gave {added:?}"
    );
    let registered = world.manager.snapshot().registered.len();
    ensure!(registered == 1, "S-O1f", "{registered} models registered under a max_size of 1");
    no_deadline_passed(&world.rt);
    finish(&world);
}

/// S-O1g: A and B fill a cache of two and the main thread leases both, A the least recently
/// used; B's unload waits for a gate. T1 adds C, waits first in line and designates A. T2 ends
/// the lease on B: T1 is then served by evicting B, and A, which it no longer needs, must be
/// reopened then, before B's unload. T3 ends the lease on A and leases A again, then opens the
/// gate: that lease must never wait for an eviction of A that no add needs (a lock timeout
/// there, with B's unload waiting on it), and the add is served.
pub(super) fn a_designation_not_needed_once_served_reopens_the_victim<R: SimRuntime, D: Depth>(rt: R) {
    let builder = ManagerWorld::builder(rt).model("A", &[], &[]).model("B", &[], &[]).model("C", &[], &[]);
    let world = cache::<R, D>(builder.gate_unloads(&["B"]), 2, &["A", "B"], &["A", "B"]);
    let (a, b) = (world.manager.lease("A").expect("preloaded"), world.manager.lease("B").expect("preloaded"));
    let t1 = world.spawn("T1", |m, t| traced(t, "add(C)", || m.add_model("C", None)));
    let t2 = world.spawn("T2", move |_, t| {
        give_way::<R>(HEAD_START);
        trace::record(t, "drop(lease B)");
        drop(b);
    });
    let t3 = world.spawn("T3", move |m, t| {
        give_way::<R>(2 * HEAD_START);
        trace::record(t, "drop(lease A)");
        drop(a);
        let leased = traced(t, "lease(A)", || m.lease("A").map(drop));
        m.probe.open_gate();
        leased
    });
    let (added, leased) = (join::<R, _>(t1), join::<R, _>(t3));
    join::<R, _>(t2);
    ensure!(
        matches!(leased, Ok(()) | Err(ManagerError::NotFound { .. })),
        "S-O1g",
        "lease(A), while the add that had designated A was served by B's eviction, gave {leased:?}"
    );
    ensure!(matches!(added, Ok(Added::Loaded)), "contract", "add(C) gave {added:?}");
    no_deadline_passed(&world.rt);
    finish(&world);
}

/// S-O1h: an empty cache of one. T1 locks B and adds it under that lock; B's load fails. T2 adds
/// C, waiting for capacity while B's load holds the slot. T1 keeps B's lock until T2's add has
/// returned: the slot the failed load gave back must wake T2 then (served before any
/// deadline), not the end of T1's lock.
pub(super) fn a_failed_load_s_slot_wakes_the_add_waiting_for_it<R: SimRuntime, D: Depth>(rt: R) {
    let builder = ManagerWorld::builder(rt).model("B", &[Step::Fail], &[]).model("C", &[], &[]);
    a_slot_freed_under_a_held_lock::<R, D>(
        cache::<R, D>(builder, 1, &[], &[]),
        ("S-O1h", "B"),
        |m, guard| {
            let b = guard.id().clone();
            let added = m.add_locked(guard, &b);
            ensure!(added.is_err(), "contract", "B's scripted failing load gave {added:?}");
        },
    );
}

/// S-O1i: A fills a cache of one. T1 locks A and removes it under that lock. T2 adds C: with A
/// locked (not a victim) it waits for capacity; before, it evicts A. T1 keeps A's lock until T2's add has
/// returned: the slot A's removal freed must wake T2 then, not the end of T1's lock.
pub(super) fn a_removal_s_slot_wakes_the_add_waiting_for_it<R: SimRuntime, D: Depth>(rt: R) {
    let builder = ManagerWorld::builder(rt).model("A", &[], &[]).model("C", &[], &[]);
    a_slot_freed_under_a_held_lock::<R, D>(
        cache::<R, D>(builder, 1, &["A"], &[]),
        ("S-O1i", "A"),
        |m, guard| {
            // T2 may have evicted A before T1 locked it.
            let removed = m.remove_locked(guard);
            ensure!(
                matches!(removed, Ok(()) | Err(ManagerError::NotFound { .. })),
                "contract",
                "remove_locked(A) gave {removed:?}"
            );
        },
    );
}

/// S-O1j: A fills a cache of one. T1 locks A and evicts it under that lock (`evict_locked`).
/// T2 adds C: with A locked it waits for capacity; before, it evicts A. T1 keeps A's lock
/// until T2's add has returned: the slot A's eviction freed must wake T2 then.
pub(super) fn an_eviction_s_slot_wakes_the_add_waiting_for_it<R: SimRuntime, D: Depth>(rt: R) {
    let builder = ManagerWorld::builder(rt).model("A", &[], &[]).model("C", &[], &[]);
    a_slot_freed_under_a_held_lock::<R, D>(
        cache::<R, D>(builder, 1, &["A"], &[]),
        ("S-O1j", "A"),
        |m, guard| {
            // T2 may have evicted A before T1 locked it.
            let evicted = m.evict_locked(guard);
            ensure!(
                matches!(evicted, Ok(Eviction::Evicted | Eviction::NotRegistered)),
                "contract",
                "evict_locked(A) gave {evicted:?}"
            );
        },
    );
}

/// S-O1h, S-O1i and S-O1j: T1 locks `id` and runs `under_lock` (which frees a slot), then keeps the
/// lock until T2's add of C has returned; T2's add must be served, before any deadline.
fn a_slot_freed_under_a_held_lock<R: SimRuntime, D: Depth>(
    world: ManagerWorld<R, Stack<R, D>>,
    (verdict, id): (&'static str, &'static str),
    under_lock: impl FnOnce(&Stack<R, D>, &LifecycleGuard<SimModel<R>, R>) + Send + 'static,
) {
    let returned = world.signal();
    let told = Arc::clone(&returned);
    let t1 = world.spawn("T1", move |m, t| {
        let guard = traced(t, &format!("lock({id})"), || m.lock(id)).expect("an idle lock");
        under_lock(&m.manager, &guard);
        told.wait();
        trace::record(t, format!("drop(lock {id})"));
        drop(guard);
    });
    let t2 = world.spawn("T2", move |m, t| {
        let added = traced(t, "add(C)", || m.add_model("C", None));
        returned.post(());
        added
    });
    let added = join::<R, _>(t2);
    join::<R, _>(t1);
    ensure!(
        matches!(added, Ok(Added::Loaded)),
        verdict,
        "add(C), beside a slot freed under a lock held until it returned, gave {added:?}"
    );
    no_deadline_passed(&world.rt);
    finish(&world);
}

/// S-O1b: A fills a cache of one and the main thread leases it. T1 adds B and waits first in
/// line; T2 adds C, and finds T1 in line or not; T3 ends the lease. An add that found another
/// waiting before it is served after it: when T2's add returns, B was loaded first.
pub(super) fn waiting_adds_are_served_in_arrival_order<R: SimRuntime, D: Depth>(rt: R) {
    let builder = ManagerWorld::builder(rt).model("A", &[], &[]).model("B", &[], &[]).model("C", &[], &[]);
    let world = cache::<R, D>(builder, 1, &["A"], &[]);
    let lease = world.manager.lease("A").expect("preloaded");
    let t1 = world.spawn("T1", |m, t| traced(t, "add(B)", || m.add_model("B", None)));
    let t2 = world.spawn("T2", |m, t| {
        give_way::<R>(HEAD_START);
        let behind = m.manager.waiting() > 0;
        trace::record(t, format!("T1 in line: {behind}"));
        let added = traced(t, "add(C)", || m.add_model("C", None));
        (behind, added, m.probe.load_calls("B"))
    });
    let t3 = world.spawn("T3", move |_, _| {
        give_way::<R>(2 * HEAD_START);
        drop(lease);
    });
    let first = join::<R, _>(t1);
    let (behind, second, b_loads) = join::<R, _>(t2);
    join::<R, _>(t3);
    ensure!(matches!(first, Ok(Added::Loaded)), "contract", "add(B) gave {first:?}");
    ensure!(matches!(second, Ok(Added::Loaded)), "contract", "add(C) gave {second:?}");
    ensure!(
        !behind || b_loads == 1,
        "S-O1b",
        "add(C) found add(B) waiting for capacity, yet was served before B was loaded"
    );
    finish(&world);
}

/// S-O1c: A fills a cache of one and the main thread leases it for good. T1 adds B (its load
/// waits for the world's gate) and T2 adds C; both wait for capacity, T1 first if T2 finds it
/// in line. T3 raises `max_size` to three: T1 is served first and leaves the line, which must
/// wake T2 — served too, while B still loads (the main thread opens the gate only once T2 is
/// done).
pub(super) fn the_first_waiter_served_wakes_the_next<R: SimRuntime, D: Depth>(rt: R) {
    let builder = ManagerWorld::builder(rt)
        .model("A", &[], &[])
        .model("B", &[], &[])
        .model("C", &[], &[])
        .gate_loads(&["B"]);
    let world = cache::<R, D>(builder, 1, &["A"], &[]);
    let lease = world.manager.lease("A").expect("preloaded");
    let t1 = world.spawn("T1", |m, t| traced(t, "add(B)", || m.add_model("B", None)));
    let t2 = world.spawn("T2", |m, t| {
        give_way::<R>(HEAD_START);
        traced(t, "add(C)", || m.add_model("C", None))
    });
    let t3 = world.spawn("T3", |m, t| {
        give_way::<R>(2 * HEAD_START);
        traced(t, "set_max_size(3)", || m.manager.set_max_size(3, CallOptions::new()))
    });
    let second = join::<R, _>(t2);
    world.probe.open_gate();
    let first = join::<R, _>(t1);
    let raised = join::<R, _>(t3);
    drop(lease);
    ensure!(
        matches!(second, Ok(Added::Loaded)),
        "S-O1c",
        "add(C), next in line while B loads, gave {second:?}"
    );
    ensure!(matches!(first, Ok(Added::Loaded)), "contract", "add(B) gave {first:?}");
    ensure!(raised.is_ok(), "contract", "raising max_size gave {raised:?}");
    no_deadline_passed(&world.rt);
    finish(&world);
}

/// What [`race_on_a_designated_victim`] returns.
type Race<R, D, T> = (ManagerWorld<R, Stack<R, D>>, Result<Added, ManagerError>, Result<(), ManagerError>, T);

/// T3's call on the victim in [`race_on_a_designated_victim`].
type OnVictim<R, D, T> = fn(&Managed<R, Stack<R, D>>, &'static str) -> T;

/// The race on a designated victim (S-O1d, S-O1e): A fills a cache of one and the main thread
/// leases it. T1 adds B and designates A while it waits; T2 ends the lease (which closes A for
/// T1, once T1 is in line) and leases A again, waiting for the eviction's outcome; T3 runs
/// `third` on A. The world, T1's add, T2's lease and T3's outcome.
fn race_on_a_designated_victim<R: SimRuntime, D: Depth, T: Send + 'static>(
    rt: R,
    third: OnVictim<R, D, T>,
) -> Race<R, D, T> {
    let builder = ManagerWorld::builder(rt).model("A", &[], &[]).model("B", &[], &[]);
    let world = cache::<R, D>(builder, 1, &["A"], &[]);
    let lease = world.manager.lease("A").expect("preloaded");
    let t1 = world.spawn("T1", |m, t| traced(t, "add(B)", || m.add_model("B", None)));
    let t2 = world.spawn("T2", move |m, t| {
        give_way::<R>(HEAD_START);
        trace::record(t, "drop(lease A)");
        drop(lease);
        traced(t, "lease(A)", || m.lease("A").map(drop))
    });
    let t3 = world.spawn("T3", move |m, t| {
        give_way::<R>(HEAD_START);
        third(m, t)
    });
    let (added, leased, third) = (join::<R, _>(t1), join::<R, _>(t2), join::<R, _>(t3));
    (world, added, leased, third)
}

/// S-O1d: A fills a cache of one and the main thread leases it. T1 adds B and designates A
/// while it waits; T2 ends the lease (which closes A for T1, once T1 is in line) and leases A
/// again, waiting for the eviction's outcome; T3 pins A. A pin that lands before the eviction
/// makes T1 give its designation up, which reopens A: T2's lease must then go ahead (never a
/// lock timeout), and A stays.
pub(super) fn a_designation_given_up_reopens_the_victim<R: SimRuntime, D: Depth>(rt: R) {
    let (world, added, leased, pinned) =
        race_on_a_designated_victim::<R, D, _>(rt, |m, t| traced(t, "pin(A)", || m.pin("A")));
    ensure!(pinned.is_ok(), "contract", "pin(A) gave {pinned:?}");
    // A pin of an unregistered id is allowed: whether A stayed says which came first.
    if world.manager.contains("A") {
        ensure!(
            leased.is_ok(),
            "S-O1d",
            "lease(A) of a pinned A whose designation was given up gave {leased:?}"
        );
        ensure!(
            matches!(added, Err(ManagerError::CapacityExhausted { .. })),
            "contract",
            "add(B) beside a pinned A in a cache of one gave {added:?}"
        );
    } else {
        ensure!(
            matches!(leased, Ok(()) | Err(ManagerError::NotFound { .. })),
            "contract",
            "lease(A) racing its eviction gave {leased:?}"
        );
        ensure!(matches!(added, Ok(Added::Loaded)), "contract", "add(B) gave {added:?}");
    }
    let unpinned = world.manager.unpin("A");
    ensure!(unpinned.is_ok(), "contract", "unpin(A) gave {unpinned:?}");
    finish(&world);
}

/// S-O1e: A fills a cache of one and the main thread leases it. T1 adds B and designates A
/// while it waits; T2 ends the lease (which closes A for T1, once T1 is in line) and leases A
/// again, waiting for the eviction's outcome; T3 removes A. A remove that takes A over before
/// T1 evicts it must wake the lease waiting on the designated close: it finds A removing or
/// gone at once, never sleeping out its timeout.
pub(super) fn a_designated_victim_removed_wakes_its_leases<R: SimRuntime, D: Depth>(rt: R) {
    let (world, added, leased, removed) =
        race_on_a_designated_victim::<R, D, _>(rt, |m, t| traced(t, "remove(A)", || m.remove("A")));
    ensure!(matches!(added, Ok(Added::Loaded)), "contract", "add(B) gave {added:?}");
    ensure!(
        matches!(leased, Ok(()) | Err(ManagerError::Removing { .. } | ManagerError::NotFound { .. })),
        "contract",
        "lease(A) racing its removal and eviction gave {leased:?}"
    );
    ensure!(
        matches!(removed, Ok(_) | Err(ManagerError::NotFound { .. })),
        "contract",
        "remove(A) racing its eviction gave {removed:?}"
    );
    no_deadline_passed(&world.rt);
    finish(&world);
}

/// T1 of S-O1r and S-O1s: loads `b` (60) into cache 0, running `inside` in its load.
fn load_b_in_t1<R: SimRuntime>(
    world: &CacheWorld<R>,
    inside: impl FnOnce() + Send + 'static,
) -> R::Handle<Result<(), resident::CacheError>> {
    let c0: Cache<R> = Arc::clone(&world.caches[0]);
    world.spawn("T1", move |_, _| {
        traced("T1", "get_or_put(b)", || {
            c0.get_or_put("b", 60, || {
                inside();
                Ok::<_, &str>(Weights::plain(60))
            })
            .map(drop)
        })
    })
}

/// S-O1r: `a` (60) is locked by the main thread under a hard cap of 100. T1 loads `b` (60) and
/// waits for room, first in line; T2 loads `c` (60), and finds T1 looking for room or not; the
/// main thread then ends its lock on `a`. A load that found another looking for room before it
/// is served after it: when T2's load returns, `b` was loaded first.
pub(super) fn loads_waiting_for_room_are_served_in_arrival_order<R: SimRuntime>(rt: R) {
    let world = CacheWorld::hard(rt, 100, 1);
    let a =
        world.caches[0].get_or_put("a", 60, || Ok::<_, &str>(Weights::plain(60))).expect("setup load").lock();
    let b_loaded = Arc::new(Latch::new(&world.rt));
    let t1 = {
        let b_loaded = Arc::clone(&b_loaded);
        load_b_in_t1(&world, move || b_loaded.add(1))
    };
    let t2 = {
        let (group, c0, b_loaded): (_, Cache<R>, _) =
            (Arc::clone(&world.group), Arc::clone(&world.caches[0]), Arc::clone(&b_loaded));
        world.spawn("T2", move |_, _| {
            give_way::<R>(HEAD_START);
            let behind = group.budget().waiting() > 0;
            trace::record("T2", format!("T1 in line: {behind}"));
            let loaded = traced("T2", "get_or_put(c)", || {
                c0.get_or_put("c", 60, || Ok::<_, &str>(Weights::plain(60))).map(drop)
            });
            (behind, loaded, b_loaded.get())
        })
    };
    // The main thread ends the lock itself: a third spawned thread grows loom's space past
    // what a bound of one explores in minutes.
    give_way::<R>(2 * HEAD_START);
    trace::record("main", "drop(lock a)");
    drop(a);
    let first = join::<R, _>(t1);
    let (behind, second, b_loads) = join::<R, _>(t2);
    ensure!(first.is_ok(), "contract", "T1's load of b gave {first:?}");
    ensure!(second.is_ok(), "contract", "T2's load of c gave {second:?}");
    ensure!(
        !behind || b_loads == 1,
        "S-O1r",
        "the load of c found b's looking for room, yet was served first"
    );
    finish_cache(&world);
}

/// S-O1s: `a` (60) is locked by the main thread under a hard cap of 100. T1 loads `b` (60, its
/// load waits for the main thread's gate) and T2 loads `c` (60): both wait for room, T1 first
/// if T2 finds it looking. The main thread raises the cap to 200: T1 reserves first and leaves the line,
/// which must wake T2 — served too, while `b` still loads (the gate opens once T2 is done).
pub(super) fn the_first_load_served_wakes_the_next<R: SimRuntime>(rt: R) {
    let world = CacheWorld::hard(rt, 100, 1);
    let a =
        world.caches[0].get_or_put("a", 60, || Ok::<_, &str>(Weights::plain(60))).expect("setup load").lock();
    let gate = Arc::new(Latch::new(&world.rt));
    let t1 = {
        let gate = Arc::clone(&gate);
        load_b_in_t1(&world, move || gate.wait_for(1))
    };
    let t2 = {
        let c0: Cache<R> = Arc::clone(&world.caches[0]);
        world.spawn("T2", move |_, _| {
            give_way::<R>(HEAD_START);
            traced("T2", "get_or_put(c)", || {
                c0.get_or_put("c", 60, || Ok::<_, &str>(Weights::plain(60))).map(drop)
            })
        })
    };
    // The main thread raises the cap itself: a third spawned thread grows loom's space past
    // what a bound of one explores in minutes.
    give_way::<R>(2 * HEAD_START);
    let raised = traced("main", "budget.set_cap(200)", || world.group.budget().set_cap(200));
    let second = join::<R, _>(t2);
    gate.add(1);
    let first = join::<R, _>(t1);
    drop(a);
    ensure!(second.is_ok(), "S-O1s", "T2's load of c, next in line while b loads, gave {second:?}");
    ensure!(first.is_ok(), "contract", "T1's load of b gave {first:?}");
    ensure!(raised.is_ok(), "contract", "raising the cap gave {raised:?}");
    no_deadline_passed(&world.rt);
    finish_cache(&world);
}
