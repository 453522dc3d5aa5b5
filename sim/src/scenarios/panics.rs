//! Panicking user code in the manager stack (SPEC 2.13): `size_bytes` after a successful load,
//! and a model's `Drop` after a successful remove. A model is either registered and queued, or
//! neither, whatever panics.

use resident::runtime::Arc;
use resident::{Manager, ManagerError, ManagerExt, ModelId, RemovalReport, Replaced, UserPanic};

use super::layers::{Depth, Stack, cache, finish};
use crate::ensure;
use crate::runtime::SimRuntime;
use crate::trace;
use crate::violation::{InjectedPanic, catching};
use crate::world::join;
use crate::world::manager::{ManagerWorld, Step};
use crate::world::traced;

/// M-P1: X loads, then its `size_bytes` panics inside the cache's add, while Y is added.
pub(super) fn size_panics_after_load<R: SimRuntime, D: Depth>(rt: R) {
    let builder = ManagerWorld::builder(rt).model("X", &[], &[]).model("Y", &[], &[]).size_panics("X");
    let world = cache::<R, D>(builder, 4, &[], &[]);
    let tx = world.spawn("T1", |m, t| traced(t, "add(X)", || catching(|| m.add_model("X", None))));
    let ty = world.spawn("T2", |m, t| traced(t, "add(Y)", || m.add_model("Y", None)));
    let x = join::<R, _>(tx);
    let y = join::<R, _>(ty);
    ensure!(x.is_none(), "contract", "add(X) did not panic: {x:?}");
    ensure!(y.is_ok(), "contract", "add(Y) gave {y:?}");
    ensure!(world.manager.contains("X"), "contract", "X loaded but is not registered");
    finish(&world);
}

/// M-P2: X is removed and its `Drop` panics after the unload succeeded, while Y is leased.
pub(super) fn drop_panics_after_remove<R: SimRuntime, D: Depth>(rt: R) {
    let builder = ManagerWorld::builder(rt).model("X", &[], &[]).model("Y", &[], &[]).drop_panics("X");
    let world = cache::<R, D>(builder, 4, &["X", "Y"], &[]);
    let tx = world.spawn("T1", |m, t| traced(t, "remove(X)", || catching(|| m.remove("X"))));
    let ty = world.spawn("T2", |m, t| traced(t, "lease(Y)", || m.lease("Y").map(drop)));
    let x = join::<R, _>(tx);
    let y = join::<R, _>(ty);
    ensure!(x.is_none(), "contract", "remove(X) did not panic: {x:?}");
    ensure!(y.is_ok(), "contract", "lease(Y) gave {y:?}");
    ensure!(!world.manager.contains("X"), "contract", "X stayed registered after its unload");
    finish(&world);
}

/// M-P2r: X's `Drop` panics once unloaded, and the subscriber panics at every report of a
/// finished unload: T1 removes X, T2 removes Y. Each model is dropped before its report, so no
/// `Drop` runs in the unwind of a panicking report (production aborts there). Both removes
/// panic out of their calls, and neither id stays registered (2.13, 3.10).
pub(super) fn drop_before_unloaded_report<R: SimRuntime, D: Depth>(rt: R) {
    let builder = ManagerWorld::builder(rt).model("X", &[], &[]).model("Y", &[], &[]).drop_panics("X");
    let world = cache::<R, D>(builder, 4, &["X", "Y"], &[]);
    crate::instrumentation::panic_at(&["remove: unloaded"]);
    let tx = world.spawn("T1", |m, t| traced(t, "remove(X)", || catching(|| m.remove("X"))));
    let ty = world.spawn("T2", |m, t| traced(t, "remove(Y)", || catching(|| m.remove("Y"))));
    let (x, y) = (join::<R, _>(tx), join::<R, _>(ty));
    crate::instrumentation::disarm();
    ensure!(x.is_none() && y.is_none(), "contract", "remove(X) gave {x:?}, remove(Y) {y:?}: both panic");
    for id in ["X", "Y"] {
        ensure!(!world.manager.contains(id), "contract", "{id} stayed registered after its unload");
    }
    finish(&world);
}

/// M-P2s: M-P2r for replaces. The old version of X panics in its `Drop` once unloaded, and the
/// subscriber panics at every report of an old version unloaded: T1 replaces X, T2 replaces Y.
/// Each old version is dropped before its report, never in a panicking report's unwind. Both
/// replaces panic out of their calls, and both ids serve their new versions (1.11, 2.13, 3.10).
pub(super) fn drop_before_replaced_report<R: SimRuntime, D: Depth>(rt: R) {
    let builder = ManagerWorld::builder(rt).model("X", &[], &[]).model("Y", &[], &[]).drop_panics("X");
    let world = cache::<R, D>(builder, 4, &["X", "Y"], &[]);
    crate::instrumentation::panic_at(&["replace: old version unloaded"]);
    let tx = world.spawn("T1", |m, t| traced(t, "replace(X)", || catching(|| m.replace("X", None))));
    let ty = world.spawn("T2", |m, t| traced(t, "replace(Y)", || catching(|| m.replace("Y", None))));
    let (x, y) = (join::<R, _>(tx), join::<R, _>(ty));
    crate::instrumentation::disarm();
    ensure!(x.is_none() && y.is_none(), "contract", "replace(X) gave {x:?}, replace(Y) {y:?}: both panic");
    for id in ["X", "Y"] {
        let leased = world.manager.lease(id).map(drop);
        ensure!(leased.is_ok(), "contract", "{id} does not serve its new version: {leased:?}");
    }
    finish(&world);
}

/// M-P2v: X's `unload` panics once, and the `Drop` of its models panics: T1 replaces X. Once
/// its leases drained, the replace holds the last reference to the old version across its
/// unload; in that unwind, its slot lets go of the model under a catch, never plainly: no
/// abort. The replace panics out of its call, and X serves its new version (1.11, 3.10).
pub(super) fn replaced_version_whose_unload_panics<R: SimRuntime, D: Depth>(rt: R) {
    let world = x_whose_drop_panics::<R, D>(rt, &[Step::Panic]);
    let tx = world.spawn("T1", |m, t| traced(t, "replace(X)", || catching(|| m.replace("X", None))));
    let x = join::<R, _>(tx);
    ensure!(x.is_none(), "contract", "replace(X) gave {x:?}: its old version's unload panicked");
    serves_then_finish::<R, D>(&world, "X");
}

/// M-P2w: T1 holds a lease of X while the main thread replaces X: the lease outlives the
/// drain (the world's drain timeout), so the replace detaches the old version, and T1's lease
/// holds its last reference. T1 then panics holding the lease, and the `Drop` of X's models
/// panics: the slot lets go of it under a catch in that unwind, no abort (1.11, 3.10).
pub(super) fn detached_version_let_go_in_an_unwind<R: SimRuntime, D: Depth>(rt: R) {
    let world = x_whose_drop_panics::<R, D>(rt, &[]);
    let (leased, detached) = (world.signal(), world.signal());
    let (l1, d1) = (Arc::clone(&leased), Arc::clone(&detached));
    let t1 = world.spawn("T1", move |m, t| {
        let lease = traced(t, "lease(X)", || m.lease("X"));
        l1.post(());
        d1.wait();
        trace::record(t, "panics holding X's detached version");
        let unwound = catching(move || {
            let _lease = lease;
            std::panic::panic_any(InjectedPanic);
        });
        ensure!(unwound.is_none(), "contract", "T1's panic did not reach it");
    });
    leased.wait();
    let replaced = traced("main-thread", "replace(X)", || world.manager.replace("X", None));
    let busy = matches!(replaced, Ok(Replaced::Detached(ManagerError::Busy { .. })));
    ensure!(busy, "contract", "replace(X) under a lease that outlives the drain gave {replaced:?}");
    detached.post(());
    join::<R, _>(t1);
    serves_then_finish::<R, D>(&world, "X");
}

/// M-P2x: X is registered, and the `Drop` of X's models panics; T1 registers another model of X,
/// which the stack refuses (`AlreadyRegistered`) while the subscriber panics at the `Traced`
/// layer's report of that refusal. The model handed back is held across the report and let go
/// under a catch in its unwind, no abort; X keeps serving its first model (2.13, 3.10).
pub(super) fn refused_register_whose_report_panics<R: SimRuntime, D: Depth>(rt: R) {
    let world = x_whose_drop_panics::<R, D>(rt, &[]);
    let prebuilt = world.probe.prebuilt("X");
    crate::instrumentation::panic_at(&["register done"]);
    let t1 = world.spawn("T1", move |m, t| {
        traced(t, "register(X)", || catching(|| m.register("X", prebuilt).map_err(|refused| refused.error)))
    });
    let registered = join::<R, _>(t1);
    crate::instrumentation::disarm();
    ensure!(registered.is_none(), "contract", "register(X) gave {registered:?}: its report panicked");
    serves_then_finish::<R, D>(&world, "X");
}

/// A cache of four holding X, whose models' `Drop` panics (once unloaded, and in any unwind) and
/// whose unloads do `unloads` (M-P2v, M-P2w, M-P2x).
fn x_whose_drop_panics<R: SimRuntime, D: Depth>(rt: R, unloads: &[Step]) -> ManagerWorld<R, Stack<R, D>> {
    let builder = ManagerWorld::builder(rt).model("X", &[], unloads).drop_panics("X");
    cache::<R, D>(builder, 4, &["X"], &[])
}

/// Ends a scenario whose panic left `id` served: a lease of it, then the world's checks.
fn serves_then_finish<R: SimRuntime, D: Depth>(world: &ManagerWorld<R, Stack<R, D>>, id: &str) {
    let leased = world.manager.lease(id).map(drop);
    ensure!(leased.is_ok(), "contract", "{id} does not serve after the panic: {leased:?}");
    finish(world);
}

/// M-P2t: max_size 1 with A registered, whose unload waits for the gate and whose `Drop` panics
/// once unloaded; T1 adds N (evicting A) while T2 leases A during the unload, and the recorder
/// panics at every report of a lease's wait. Once the eviction takes A out, T2's lease may hold
/// A's last reference: it drops it before it reports the wait, so A's `Drop` never runs in that
/// report's unwind (production aborts there). A ends unregistered (2.10, 2.13, 3.10).
pub(super) fn drop_before_lease_wait_report<R: SimRuntime, D: Depth>(rt: R) {
    let builder = ManagerWorld::builder(rt).model("A", &[], &[]).model("N", &[], &[]);
    let world = cache::<R, D>(builder.gate_unloads(&["A"]).drop_panics("A"), 1, &["A"], &[]);
    crate::instrumentation::panic_at(&["resident_lease_wait_seconds"]);
    let t1 = world.spawn("T1", |m, t| traced(t, "add(N)", || catching(|| m.add_model("N", None))));
    let probe = std::sync::Arc::clone(&world.probe);
    let t2 = world.spawn("T2", move |m, t| {
        probe.wait_for_gated_unload();
        traced(t, "lease(A)", || catching(|| m.lease("A").map(drop)))
    });
    let opener = super::eviction::open_gate_after_unload::<R, D>(&world);
    let (added, leased) = (join::<R, _>(t1), join::<R, _>(t2));
    join::<R, _>(opener);
    crate::instrumentation::disarm();
    ensure!(!world.manager.contains("A"), "contract", "A stayed registered after its eviction: {added:?}");
    let refused = matches!(leased, None | Some(Err(ManagerError::NotFound { .. })));
    ensure!(refused, "contract", "lease(A), evicted, gave {leased:?}");
    finish(&world);
}

/// M-P2u: X's loader panics, and the subscriber panics at every exit of an `add_model` span
/// (the stack's `Traced` layer enters one around each add's load): T1 adds X, T2 adds Y. The
/// layer leaves its span once X's panic is caught, outside the unwind, so the subscriber's
/// panic there is an ordinary one, where production would abort. Both adds panic out of their
/// calls; X ends unregistered, Y registered and queued (2.13, 3.10).
pub(super) fn span_left_outside_the_unwind<R: SimRuntime, D: Depth>(rt: R) {
    let builder = ManagerWorld::builder(rt).model("X", &[Step::Panic], &[]).model("Y", &[], &[]);
    let world = cache::<R, D>(builder, 4, &[], &[]);
    crate::instrumentation::panic_at(&["span exit: add_model"]);
    let tx = world.spawn("T1", |m, t| traced(t, "add(X)", || catching(|| m.add_model("X", None))));
    let ty = world.spawn("T2", |m, t| traced(t, "add(Y)", || catching(|| m.add_model("Y", None))));
    let (x, y) = (join::<R, _>(tx), join::<R, _>(ty));
    crate::instrumentation::disarm();
    ensure!(x.is_none() && y.is_none(), "contract", "add(X) gave {x:?}, add(Y) {y:?}: both panic");
    ensure!(!world.manager.contains("X"), "contract", "X is registered, though its loader panicked");
    ensure!(world.manager.contains("Y"), "contract", "Y loaded but is not registered");
    finish(&world);
}

/// M-P3: A, B and C fill a cache; B's `unload` panics on every call. T1 clears the stack while
/// T2 leases C; then the stack is shut down. Neither call lets the panic out: each returns its
/// report with B failed (an `Unload` whose source is the panic), every other id is removed, and
/// B alone stays registered and queued.
pub(super) fn panicking_unload_inside_clear_and_shutdown<R: SimRuntime, D: Depth>(rt: R) {
    let builder = ManagerWorld::builder(rt)
        .model("A", &[], &[])
        .model("B", &[], &[Step::Panic, Step::Panic])
        .model("C", &[], &[]);
    let world = cache::<R, D>(builder, 3, &["A", "B", "C"], &["A", "B", "C"]);
    let t1 = world.spawn("T1", |m, t| traced(t, "clear()", || catching(|| m.clear())));
    let t2 = world.spawn("T2", |m, t| traced(t, "lease(C)", || m.lease("C").map(|lease| lease.serve(t))));
    let cleared = join::<R, _>(t1);
    let _ = join::<R, _>(t2);
    let Some(cleared) = cleared else {
        crate::violation::Violation::raise("M-P3", "B's panicking unload escaped clear()".to_owned())
    };
    panicked_b_only(&world, "clear", &cleared);
    let shut = catching(|| world.manager.shutdown());
    let Some(shut) = shut else {
        crate::violation::Violation::raise("M-P3", "B's panicking unload escaped shutdown()".to_owned())
    };
    panicked_b_only(&world, "shutdown", &shut);
    finish(&world);
}

/// M-P3r: A and B fill a cache; A's `unload` fails on every call, and the `tracing`
/// subscriber panics at the report of an id left registered. T1 shuts the stack down: the
/// subscriber's panic reaches T1, but only once every id is settled — B is unloaded and
/// unregistered, A alone stays registered (1.13, 3.10).
pub(super) fn subscriber_panics_at_a_shutdown_failure<R: SimRuntime, D: Depth>(rt: R) {
    let builder = ManagerWorld::builder(rt).model("A", &[], &[Step::Fail, Step::Fail]).model("B", &[], &[]);
    let world = cache::<R, D>(builder, 2, &["A", "B"], &["A", "B"]);
    crate::instrumentation::panic_at(&["still registered"]);
    let t1 = world.spawn("T1", |m, t| traced(t, "shutdown()", || catching(|| m.shutdown())));
    let shut = join::<R, _>(t1);
    crate::instrumentation::disarm();
    ensure!(shut.is_none(), "contract", "shutdown() gave {shut:?} past a panicking subscriber");
    let ids = world.manager.ids();
    ensure!(
        ids.iter().map(ModelId::as_str).eq(["A"]),
        "1.13",
        "{ids:?} registered after a shutdown whose report of A's failure panicked: B was never attempted"
    );
    finish(&world);
}

/// The report of a removal where only B's unload panicked: B failed with the panic as the
/// source of its `Unload` error, and B is the one id still registered.
fn panicked_b_only<R: SimRuntime, M: Manager<Model = crate::world::manager::SimModel<R>, Runtime = R>>(
    world: &ManagerWorld<R, resident::FixedSizeCache<M>>,
    call: &str,
    report: &RemovalReport,
) {
    let failed: Vec<&str> = report.failed.iter().map(|(id, _)| id.as_str()).collect();
    ensure!(failed == ["B"], "M-P3", "{call}() reported {report:?}; only B's unload panics");
    let panicked = report.failed.iter().all(|(_, error)| match error {
        ManagerError::Unload { source, .. } => source.downcast_ref::<UserPanic>().is_some(),
        _ => false,
    });
    ensure!(panicked, "M-P3", "{call}() reported B's panic as {report:?}");
    let ids = world.manager.ids();
    ensure!(ids.iter().map(|id| id.as_str()).eq(["B"]), "M-P3", "after {call}() registered: {ids:?}");
}

/// M-P4: T1 adds X (its load yields a few times) while T2 shuts the stack down with the
/// recorder panicking at every lock-wait report, and deadlines firing at any point: T2 may list
/// X while T1 loads it, time out waiting for X's lock, and panic in the report of that wait.
/// That panic removed nothing: whenever X ends registered, the shutdown's report names it
/// failed (SPEC 1.13: what stays registered is reported).
pub(super) fn panicking_report_while_shutdown_waits<R: SimRuntime, D: Depth>(rt: R) {
    let builder = ManagerWorld::builder(rt).model("X", &[], &[]).work(3);
    let world = cache::<R, D>(builder, 2, &[], &[]);
    crate::instrumentation::panic_at(&["resident_lock_wait_seconds"]);
    let t1 = world.spawn("T1", |m, t| traced(t, "add(X)", || catching(|| m.add_model("X", None))));
    let t2 = world.spawn("T2", |m, t| traced(t, "shutdown()", || catching(|| m.shutdown())));
    let _ = join::<R, _>(t1);
    let shut = join::<R, _>(t2);
    crate::instrumentation::disarm();
    let Some(shut) = shut else {
        crate::violation::Violation::raise("M-P4", "a panicking report escaped shutdown()".to_owned())
    };
    let failed: Vec<&str> = shut.failed.iter().map(|(id, _)| id.as_str()).collect();
    let registered = world.manager.contains("X");
    ensure!(
        !registered || failed == ["X"],
        "M-P4",
        "X is registered after a shutdown that reported {shut:?}"
    );
    // Removed means unloaded by it (an add that the shutdown overtook drops its model).
    let removed = shut.removed.iter().any(|id| id.as_str() == "X");
    let unloaded = world.probe.id("X").unloaded();
    ensure!(!removed || unloaded > 0, "M-P4", "the shutdown reported X removed, but unloaded none: {shut:?}");
    finish(&world);
}
