//! Manager scenarios: lifecycle generations, load failures and panics, leases.

use crate::unwinding::{catch, resume};

use resident::runtime::Arc;
use resident::{Added, Eviction, Manager, ManagerError, ManagerExt, ModelId, ModelManager};

use crate::ensure;
use crate::latch::Latch;
use crate::runtime::SimRuntime;
use crate::violation::{InjectedPanic, catching};
use crate::world::join;
use crate::world::manager::{Managed, ManagerWorld, SimLoader, Step};
use crate::world::traced;

/// M-S1 / M-S1b: X is registered; T1 removes it while T2 and T3 add it back.
pub(super) fn split_generation<R: SimRuntime>(rt: R) {
    let world = ManagerWorld::builder(rt).model("X", &[], &[]).build();
    world.manager.add_model("X", None).expect("setup load succeeds");
    let t1 = world.spawn("T1", |m, t| traced(t, "remove(X)", || m.remove("X")));
    let t2 = world.spawn("T2", |m, t| traced(t, "add(X)", || m.add_model("X", None)));
    let t3 = world.spawn("T3", |m, t| traced(t, "add(X)", || m.add_model("X", None)));
    let removed = join::<R, _>(t1);
    let added = [join::<R, _>(t2), join::<R, _>(t3)];
    ensure!(removed.is_ok(), "contract", "remove(X) of a registered, unleased X failed: {removed:?}");
    ensure!(added.iter().all(Result::is_ok), "contract", "add(X) failed without timeouts: {added:?}");
    world.check_quiescent();
}

/// M-S2 / M-S2t: X's first load fails while two more callers add X.
pub(super) fn load_failure<R: SimRuntime>(rt: R) {
    let world = ManagerWorld::builder(rt).model("X", &[Step::Fail], &[]).build();
    let handles =
        ["H", "W", "N"].map(|name| world.spawn(name, |m, t| traced(t, "add(X)", || m.add_model("X", None))));
    let results = handles.map(join::<R, _>);
    let failed = results.iter().filter(|r| matches!(r, Err(ManagerError::Load { .. }))).count();
    let unexpected: Vec<_> = results
        .iter()
        .filter(|r| !matches!(r, Ok(_) | Err(ManagerError::Load { .. } | ManagerError::LockTimeout { .. })))
        .collect();
    ensure!(unexpected.is_empty(), "contract", "unexpected add(X) outcomes: {unexpected:?}");
    one_failure(&results);
    let timeouts = results.iter().any(|r| matches!(r, Err(ManagerError::LockTimeout { .. })));
    ensure!(
        timeouts || failed >= 1,
        "contract",
        "without timeouts some caller runs the failing first load: {results:?}"
    );
    world.check_quiescent();
}

/// Callers that waited for the one scripted failing load share its one error (SPEC 1.9): no
/// caller ran that load twice.
pub(super) fn one_failure<T: std::fmt::Debug>(results: &[Result<T, ManagerError>]) {
    let mut sources = results.iter().filter_map(|r| match r {
        Err(ManagerError::Load { source, .. }) => Some(source),
        _ => None,
    });
    let first = sources.next();
    ensure!(
        sources.all(|s| Some(s) == first),
        "contract",
        "the one scripted load failure was seen twice: {results:?}"
    );
}

/// M-S2p: X's first load panics while two more callers add X.
pub(super) fn load_panic<R: SimRuntime>(rt: R) {
    let world = ManagerWorld::builder(rt).model("X", &[Step::Panic], &[]).build();
    let handles = ["H", "W", "N"].map(|name| {
        world.spawn(name, |m, t| {
            traced(t, "add(X)", || match catch(|| m.add_model("X", None)) {
                Ok(result) => result.map(|_| "ok"),
                Err(payload) if payload.is::<InjectedPanic>() => Ok("loader panicked"),
                Err(payload) => resume(payload),
            })
        })
    });
    let results = handles.map(join::<R, _>);
    let panicked = results.iter().filter(|r| matches!(r, Ok("loader panicked"))).count();
    ensure!(results.iter().all(Result::is_ok), "contract", "add(X) failed: {results:?}");
    ensure!(panicked == 1, "contract", "{panicked} callers saw the one scripted panic");
    ensure!(world.manager.contains("X"), "contract", "nobody loaded X after the panic");
    world.check_quiescent();
}

/// M-L1: X is registered; T1 serves from a lease while T2 removes X and T3 tries a lease.
pub(super) fn remove_under_lease<R: SimRuntime>(rt: R) {
    let world = ManagerWorld::builder(rt).model("X", &[], &[]).build();
    world.manager.add_model("X", None).expect("setup load succeeds");
    let serve = |m: &Managed<R, ModelManager<SimLoader<R>, R>>, t: &'static str| {
        traced(t, "lease(X)", || m.lease("X").map(|lease| lease.serve(t)))
    };
    let t1 = world.spawn("T1", serve);
    let t2 = world.spawn("T2", |m, t| traced(t, "remove(X)", || m.remove("X")));
    let t3 = world.spawn("T3", serve);
    let served = join::<R, _>(t1);
    let removed = join::<R, _>(t2);
    let late = join::<R, _>(t3);
    ensure!(removed.is_ok(), "contract", "remove(X) failed without timeouts: {removed:?}");
    for (thread, lease) in [("T1", served), ("T3", late)] {
        ensure!(
            matches!(lease, Ok(()) | Err(ManagerError::NotFound { .. } | ManagerError::Removing { .. })),
            "contract",
            "{thread}'s lease ended with {lease:?}"
        );
    }
    ensure!(!world.manager.contains("X"), "contract", "X is still registered after remove");
    world.check_quiescent();
}

/// M-L3, the lease word's kernel: X is registered in a bare manager; T1 leases and serves X
/// twice, T2 evicts X (the non-blocking close: one compare-exchange on the slot's word) and T3
/// removes it (the draining close). A lease and a close never both win: no lease serves an
/// unloaded model, X is unloaded exactly once, the remove that finds X registered drains it
/// (no count left behind by a refused lease), and nothing is left alive or locked.
pub(super) fn lease_word<R: SimRuntime>(rt: R) {
    let world = ManagerWorld::builder(rt).model("X", &[], &[]).build();
    world.manager.add_model("X", None).expect("setup load succeeds");
    let t1 = world.spawn("T1", |m, t| {
        let lease = || traced(t, "lease(X)", || m.lease("X").map(|lease| lease.serve(t)));
        [lease(), lease()]
    });
    let t2 = world
        .spawn("T2", |m, t| traced(t, "evict(X)", || m.lock("X").and_then(|guard| m.evict_locked(&guard))));
    let t3 = world.spawn("T3", |m, t| traced(t, "remove(X)", || m.remove("X")));
    let served = join::<R, _>(t1);
    let evicted = join::<R, _>(t2);
    let removed = join::<R, _>(t3);
    for lease in &served {
        ensure!(
            matches!(lease, Ok(()) | Err(ManagerError::NotFound { .. } | ManagerError::Removing { .. })),
            "contract",
            "T1's lease ended with {lease:?}"
        );
    }
    let evicted = match evicted {
        Ok(Eviction::Evicted) => true,
        Ok(Eviction::InUse | Eviction::NotRegistered) => false,
        other => {
            ensure!(false, "contract", "evict(X) without timeouts gave {other:?}");
            false
        }
    };
    match (&removed, evicted) {
        (Ok(()), false) | (Err(ManagerError::NotFound { .. }), true) => {}
        _ => ensure!(false, "contract", "remove(X) gave {removed:?} with X evicted: {evicted}"),
    }
    ensure!(!world.manager.contains("X"), "contract", "X is still registered after its remove");
    world.check_quiescent();
}

/// Reservations of `id`'s current lifecycle generation.
fn reservations<R: SimRuntime>(world: &ManagerWorld<R>, id: &str) -> usize {
    world.manager.snapshot().lifecycle.iter().find(|e| e.id.as_str() == id).map_or(0, |e| e.reservations)
}

/// The main thread takes `x`'s lifecycle lock, then W1 and W2 add `x` (waiting for it); returns
/// once both have started and had a scheduling point to reserve it.
#[allow(clippy::type_complexity)]
fn two_waiters_behind_the_lock<R: SimRuntime>(
    world: &ManagerWorld<R>,
    x: &ModelId,
) -> (
    resident::LifecycleGuard<crate::world::manager::SimModel<R>, R>,
    [R::Handle<Result<Added, ManagerError>>; 2],
) {
    let started = Arc::new(Latch::new(&world.rt));
    let guard = world.manager.lock(x).expect("an uncontended lock");
    let waiters = ["W1", "W2"].map(|name| {
        let started = Arc::clone(&started);
        world.spawn(name, move |m, t| {
            started.add(1);
            traced(t, "add(X)", || m.add_model("X", None))
        })
    });
    started.wait_for(2);
    R::yield_now();
    (guard, waiters)
}

/// S-F1: the main thread holds X's lifecycle lock and runs X's failing load under it while W1
/// and W2 add X. A waiter that reserved X before the failure gets that very error (its source
/// shared) without loading; one that reserved after it loads afresh. Once the failure was
/// delivered, a new add loads afresh.
pub(super) fn shared_failure<R: SimRuntime>(rt: R) {
    let world = ManagerWorld::builder(rt).model("X", &[Step::Fail], &[]).build();
    let x = ModelId::new("X").expect("valid id");
    let (guard, waiters) = two_waiters_behind_the_lock(&world, &x);
    // Waiters that reserved X by now reserved it before its load failed: they must share it.
    let early = reservations(&world, "X") - 1;
    let failed = traced("main", "add_locked(X)", || world.manager.add_locked(&guard, &x));
    drop(guard);
    let results = waiters.map(join::<R, _>);
    let Err(ManagerError::Load { source, .. }) = &failed else {
        return ensure!(false, "contract", "the scripted failing load returned {failed:?}");
    };
    let shared = results
        .iter()
        .filter(|r| matches!(r, Err(ManagerError::Load { source: s, .. }) if s == source))
        .count();
    ensure!(
        shared >= early,
        "S-F1",
        "{early} caller(s) reserved X before its load failed, but {shared} got its error: {results:?}"
    );
    let fresh = results.iter().filter(|r| matches!(r, Ok(Added::Loaded))).count();
    ensure!(
        results
            .iter()
            .all(|r| r.is_ok() || matches!(r, Err(ManagerError::Load { source: s, .. }) if s == source)),
        "contract",
        "a waiter neither shared the failure nor loaded afresh: {results:?}"
    );
    let calls = world.probe.load_calls("X");
    ensure!(calls == 1 + fresh, "S-F1", "{calls} loads of X for one failure and {fresh} fresh load(s)");
    let again = traced("main", "add(X)", || world.manager.add_model("X", None));
    ensure!(again.is_ok(), "S-F1", "an add after the failure was delivered did not load afresh: {again:?}");
    world.check_quiescent();
}

/// S-F1n: with the negative cache on, X's load fails once; then T1 and T2 add X at the same
/// time. Both get that failure without loading (the clock never reaches the cache's end).
pub(super) fn negative_cache<R: SimRuntime>(rt: R) {
    let world = ManagerWorld::builder(rt)
        .model("X", &[Step::Fail], &[])
        .failure_cache(std::time::Duration::from_secs(5))
        .build();
    let first = traced("main", "add(X)", || world.manager.add_model("X", None));
    let Err(ManagerError::Load { source, .. }) = &first else {
        return ensure!(false, "contract", "the scripted failing load returned {first:?}");
    };
    let handles =
        ["T1", "T2"].map(|name| world.spawn(name, |m, t| traced(t, "add(X)", || m.add_model("X", None))));
    let results = handles.map(join::<R, _>);
    for result in &results {
        ensure!(
            matches!(result, Err(ManagerError::Load { source: s, .. }) if s == source),
            "S-F1",
            "an add within the negative cache's time gave {result:?}, not the remembered failure"
        );
    }
    let calls = world.probe.load_calls("X");
    ensure!(calls == 1, "S-F1", "{calls} loads of X while its failure was remembered");
    world.check_quiescent();
}

/// S-F2: the main thread holds X's lifecycle lock while W1 and W2 reserve X and wait; its own
/// load of X then returns the expiry of a bounded wait (its deadline passed inside the loader),
/// which is its error alone: each waiter loads afresh or finds X loaded. With the negative
/// cache on, an expired add of Y is not remembered either: T3's add of Y loads.
pub(super) fn expiry_is_the_callers_own<R: SimRuntime>(rt: R) {
    let world = ManagerWorld::builder(rt)
        .model("X", &[Step::Expire], &[])
        .model("Y", &[Step::Expire], &[])
        .failure_cache(std::time::Duration::from_secs(5))
        .build();
    let x = ModelId::new("X").expect("valid id");
    let (guard, waiters) = two_waiters_behind_the_lock(&world, &x);
    let expired = traced("main", "add_locked(X)", || world.manager.add_locked(&guard, &x));
    drop(guard);
    let results = waiters.map(join::<R, _>);
    ensure!(expired.is_err(), "contract", "the scripted expiring load returned {expired:?}");
    ensure!(
        results.iter().all(Result::is_ok),
        "S-F2",
        "the expiry of the main thread's wait reached the callers waiting behind it: {results:?}"
    );
    let first = traced("main", "add(Y)", || world.manager.add_model("Y", None));
    ensure!(first.is_err(), "contract", "the scripted expiring load of Y returned {first:?}");
    let t3 = world.spawn("T3", |m, t| traced(t, "add(Y)", || m.add_model("Y", None)));
    let again = join::<R, _>(t3);
    ensure!(
        matches!(again, Ok(Added::Loaded)),
        "S-F2",
        "an add of Y after an expired one gave {again:?}: the negative cache remembered an expiry"
    );
    world.check_quiescent();
}

/// S-F1d: the main thread's load of X fails under its lock, and it drops the error; T1, which
/// reserved X meanwhile or later, loads again and fails again, and T2 loads it after that (a
/// success). The manager lets go of the first error (replaced by the second) and of the second
/// (forgotten by the success): each is a loader's error, whose `Drop` is user code, dropped
/// outside the table's monitor.
pub(super) fn failures_let_go_outside_the_monitor<R: SimRuntime>(rt: R) {
    let world = ManagerWorld::builder(rt).model("X", &[Step::Fail, Step::Fail], &[]).build();
    let x = ModelId::new("X").expect("valid id");
    let guard = world.manager.lock(&x).expect("an uncontended lock");
    let failed = traced("main", "add_locked(X)", || world.manager.add_locked(&guard, &x));
    ensure!(failed.is_err(), "contract", "the scripted failing load returned {failed:?}");
    drop(failed);
    let t1 = world.spawn("T1", |m, t| traced(t, "add(X)", || m.add_model("X", None).map(drop)));
    R::yield_now();
    drop(guard);
    let again = join::<R, _>(t1);
    drop(again);
    let t2 = world.spawn("T2", |m, t| traced(t, "add(X)", || m.add_model("X", None)));
    let loaded = join::<R, _>(t2);
    ensure!(matches!(loaded, Ok(Added::Loaded)), "contract", "the third load of X gave {loaded:?}");
    world.check_quiescent();
}

/// S-F1u: the library's reports of a user's error panic, one after another: the metrics
/// recorder at the count of a failed load (a replace of X, then an add of Y), the `tracing`
/// subscriber at the report of a failed unload (a remove of Z), at a layer's report of a failed
/// call (a replace of X, a remove of Z), at a replace's report of an old version whose unload
/// failed (W), at a lowered `max_size`'s report of an eviction whose unload failed (V, the
/// least recently used), then at a shutdown's report, with V and Z failed. Each panic reaches
/// its caller, and every loader's or unload's error (user code, whose `Drop` may panic) is
/// dropped under a catch in that unwind, never plainly; X keeps its old version (1.11, 3.10).
pub(super) fn reports_of_user_errors_panic<R: SimRuntime>(rt: R) {
    let builder = ManagerWorld::builder(rt)
        .model("V", &[], &[Step::Fail, Step::Fail])
        .model("W", &[], &[Step::Fail])
        .model("X", &[Step::Ok, Step::Fail, Step::Fail], &[])
        .model("Y", &[Step::Fail], &[])
        .model("Z", &[], &[Step::Fail, Step::Fail, Step::Fail])
        .model("U", &[Step::Fail], &[]);
    let preload = ["V", "W", "X", "Z"];
    let world = super::layers::cache::<R, super::layers::ThreeDeep>(builder, 5, &preload, &preload);
    let calls: [(&'static [&'static str], &str, &str); 8] = [
        (&["resident_model_load_failures_total"], "replace", "X"),
        (&["resident_model_load_failures_total"], "add", "Y"),
        // Reported as the add lets go of its lock, its error on the way to the caller.
        (&["lifecycle entry retired"], "add", "U"),
        (&["replace done"], "replace", "X"),
        (&["remove: unload failed"], "remove", "Z"),
        (&["remove done"], "remove", "Z"),
        (&["replace: the old version's unload failed; dropped"], "replace", "W"),
        (&["max_size changed"], "set_max_size(3)", "V"),
    ];
    // One thread makes every call (each panics in turn): a checker needs a thread of its own.
    let t1 = world.spawn("T1", move |m, t| {
        for (armed, call, id) in calls {
            crate::instrumentation::panic_at(armed);
            let done = traced(t, &format!("{call} ({id})"), || {
                catching(|| match call {
                    "add" => m.add_model(id, None).map(drop),
                    "remove" => m.remove(id),
                    "replace" => m.replace(id, None).map(drop),
                    _ => m.manager.set_max_size(3, resident::CallOptions::new()),
                })
            });
            crate::instrumentation::disarm();
            ensure!(done.is_none(), "contract", "{call} ({id}) gave {done:?} past a panicking report");
        }
    });
    join::<R, _>(t1);
    let served = world.manager.lease("X").map(|lease| lease.serve("main"));
    ensure!(served.is_ok(), "1.11", "X after its failed replaces: {served:?}");
    crate::instrumentation::panic_at(&["shut down"]);
    let shut = traced("main", "shutdown()", || catching(|| world.manager.shutdown()));
    crate::instrumentation::disarm();
    ensure!(shut.is_none(), "contract", "shutdown() gave {shut:?} past a panicking report");
    super::layers::finish(&world);
}
