//! Graceful shutdown scenarios (SPEC 1.13; `S-G1`, `S-G2`, `W-16`): a manager stack shut down while adds,
//! leases, an eviction and an in-place replace run. A racing call completes before the shutdown (its model is
//! then unloaded by it) or gets `ShutDown`; what stays registered is exactly what the report says could not
//! be unloaded; afterwards adds and leases are refused.

use std::collections::BTreeSet;

use resident::{Manager, ManagerError, ManagerExt, ModelId, RemovalReport};

use super::layers::{Depth, cache, finish};
use super::wakeups::{HEAD_START, give_way, no_deadline_passed};
use crate::ensure;
use crate::runtime::SimRuntime;
use crate::world::join;
use crate::world::manager::{Managed, ManagerWorld, Probe, Step};
use crate::world::traced;

/// Shuts `m` down from `thread`: once the shutdown returns, no load of `ids` still runs unless
/// the report names that id (`invariant` otherwise): a shutdown settles every id in flight, so
/// that nothing it did not report outlives it (a load it did not wait for would be refused at
/// its registration, its model dropped, never unloaded).
fn shut_down_settling<R: SimRuntime, S: Manager>(
    m: &Managed<R, S>,
    thread: &'static str,
    ids: &[&str],
    invariant: &str,
) -> RemovalReport {
    let report = traced(thread, "shutdown()", || m.shutdown());
    for id in ids {
        let reported = report.failed.iter().any(|(failed, _)| failed.as_str() == *id);
        ensure!(
            reported || m.probe.loading(id) == 0,
            invariant,
            "the shutdown returned while a load of {id} runs, unreported: {report:?}"
        );
    }
    report
}

/// What stays registered is exactly what `report` says could not be unloaded (S-G1).
fn registered_as_reported<M: Manager>(manager: &M, report: &RemovalReport) {
    registered_as_reported_in("S-G1", manager, report);
}

/// [`registered_as_reported`], a violation of `invariant` if not.
fn registered_as_reported_in<M: Manager>(invariant: &str, manager: &M, report: &RemovalReport) {
    let registered: BTreeSet<ModelId> = manager.ids().into_iter().collect();
    let failed: BTreeSet<ModelId> = report.failed.iter().map(|(id, _)| id.clone()).collect();
    ensure!(
        registered == failed,
        invariant,
        "after shutdown {registered:?} are registered, but the report names {failed:?} as not unloaded: {report:?}"
    );
}

/// 1.13: every model of `id` was unloaded or is still registered; none was only dropped (a
/// shutdown unloads every model the manager loaded, one it refused at its registration too).
fn none_dropped_without_unload<R: SimRuntime>(probe: &Probe<R>, id: &str) {
    let dropped = probe.id(id).dropped();
    ensure!(dropped == 0, "1.13", "{dropped} model(s) of {id} dropped without their unload");
}

/// S-G1: A (whose unloads fail twice) and B fill a cache of two, B least recently used. T1 adds
/// C (evicting B), T2 leases A (the shutdown drains it), T3 shuts the stack down. T1 and T2 complete or are refused; A
/// stays registered, reported, and refuses leases; adds are refused; a second shutdown is
/// harmless.
pub(super) fn shutdown_races_adds_and_leases<R: SimRuntime, D: Depth>(rt: R) {
    let builder = ManagerWorld::builder(rt)
        .model("A", &[], &[Step::Fail, Step::Fail])
        .model("B", &[], &[])
        .model("C", &[], &[])
        // A long load: uniform random schedules then often start the shutdown inside it.
        .work(8);
    let world = cache::<R, D>(builder, 2, &["A", "B"], &["B", "A"]);
    let t1 = world.spawn("T1", |m, t| traced(t, "add(C)", || m.add_model("C", None)));
    let t2 = world.spawn("T2", |m, t| traced(t, "lease(A)", || m.lease("A").map(|lease| lease.serve(t))));
    let t3 = world.spawn("T3", |m, t| {
        // So that uniform random schedules often start the shutdown while T1 loads; every
        // order is explored.
        give_way::<R>(HEAD_START / 16);
        shut_down_settling(m, t, &["A", "B", "C"], "S-G1")
    });
    let added = join::<R, _>(t1);
    let leased = join::<R, _>(t2);
    let report = join::<R, _>(t3);
    ensure!(
        matches!(added, Ok(_) | Err(ManagerError::ShutDown { .. } | ManagerError::Unload { .. })),
        "contract",
        "add(C) racing a shutdown gave {added:?}"
    );
    ensure!(
        matches!(
            leased,
            Ok(())
                | Err(ManagerError::ShutDown { .. }
                    | ManagerError::NotFound { .. }
                    | ManagerError::Removing { .. })
        ),
        "contract",
        "lease(A) racing a shutdown gave {leased:?}"
    );
    registered_as_reported(&world.manager, &report);
    ensure!(world.manager.contains("A"), "contract", "A's failing unload unregistered it: {report:?}");
    for id in ["A", "C"] {
        let again = traced("main", "add(..) after shutdown", || world.manager.add_model(id, None));
        ensure!(
            matches!(again, Err(ManagerError::ShutDown { .. })),
            "S-G1",
            "add({id}) after shutdown gave {again:?}"
        );
    }
    let lease = traced("main", "lease(A) after shutdown", || world.manager.lease("A").map(drop));
    ensure!(
        matches!(lease, Err(ManagerError::ShutDown { .. })),
        "S-G1",
        "lease(A) after shutdown gave {lease:?}"
    );
    let second = traced("main", "shutdown() again", || world.manager.shutdown());
    registered_as_reported(&world.manager, &second);
    finish(&world);
}

/// S-G2: B is registered; T1 replaces it in place (the old version unloaded and unregistered,
/// then the new one loaded and registered, all under B's lifecycle lock) while T2 shuts the
/// stack down. The shutdown must settle B whichever step of the replace it meets: it returns
/// only once no reload of B runs, and once both return, B is not registered (or is reported as
/// not unloaded).
pub(super) fn shutdown_races_a_replace_in_place<R: SimRuntime, D: Depth>(rt: R) {
    let builder = ManagerWorld::builder(rt).model("B", &[], &[]).work(4);
    let world = cache::<R, D>(builder, 2, &["B"], &[]);
    let t1 = world.spawn("T1", |m, t| traced(t, "replace_in_place(B)", || m.replace_in_place("B", None)));
    let t2 = world.spawn("T2", |m, t| {
        // So that uniform random schedules often start the shutdown inside the replace.
        give_way::<R>(HEAD_START / 16);
        shut_down_settling(m, t, &["B"], "S-G2")
    });
    let replaced = join::<R, _>(t1);
    let report = join::<R, _>(t2);
    ensure!(
        matches!(replaced, Ok(_) | Err(ManagerError::ShutDown { .. })),
        "contract",
        "replace_in_place(B) racing a shutdown gave {replaced:?}"
    );
    registered_as_reported_in("S-G2", &world.manager, &report);
    // The new version a shutdown refused at its registration too.
    none_dropped_without_unload(&world.probe, "B");
    finish(&world);
}

/// W-16: A fills a cache of one and the main thread leases it; T1 adds B and waits for room;
/// T2 shuts the stack down. The shutdown's start must wake T1, refused with `ShutDown`; then the
/// main thread lets A go and the shutdown unloads it.
pub(super) fn shutdown_wakes_the_add_waiting_for_room<R: SimRuntime, D: Depth>(rt: R) {
    let builder = ManagerWorld::builder(rt).model("A", &[], &[]).model("B", &[], &[]);
    let world = cache::<R, D>(builder, 1, &["A"], &[]);
    let lease = world.manager.lease("A").expect("preloaded");
    let t1 = world.spawn("T1", |m, t| traced(t, "add(B)", || m.add_model("B", None)));
    let t2 = world.spawn("T2", |m, t| {
        give_way::<R>(HEAD_START);
        traced(t, "shutdown()", || m.shutdown())
    });
    let added = join::<R, _>(t1);
    ensure!(matches!(added, Err(ManagerError::ShutDown { .. })), "contract", "add(B) gave {added:?}");
    drop(lease);
    let report = join::<R, _>(t2);
    ensure!(
        report.is_complete() && report.removed == [ModelId::new("A").expect("valid")],
        "contract",
        "the shutdown gave {report:?}"
    );
    no_deadline_passed(&world.rt);
    finish(&world);
}

/// S-G1r: S-G1l for a replace. X is registered; T1 replaces it, and its load of the new version
/// waits for the world's gate; the main thread shuts the manager down meanwhile (its wait for
/// X's lifecycle lock runs out while the replace holds it), and only then opens the gate. The
/// shutdown began before the new version could register: the replace gets `ShutDown`, the old
/// version stays registered as the report says, and the new version is unloaded, not just
/// dropped (1.13).
pub(super) fn reload_outlasting_a_shutdown_is_refused<R: SimRuntime>(rt: R) {
    let builder = ManagerWorld::builder(rt).model("X", &[], &[]).gate_reloads(&["X"]);
    let world = builder.preloaded(&["X"], |base| base);
    let t1 = world.spawn("T1", |m, t| traced(t, "replace(X)", || m.replace("X", None)));
    let report = traced("main", "shutdown()", || world.manager.shutdown());
    world.probe.open_gate();
    let replaced = join::<R, _>(t1);
    ensure!(
        matches!(replaced, Err(ManagerError::ShutDown { .. })),
        "S-G1",
        "replace(X), whose load ended after the shutdown returned, gave {replaced:?} (report: {report:?})"
    );
    registered_as_reported_in("S-G1", &world.manager, &report);
    none_dropped_without_unload(&world.probe, "X");
    world.check_quiescent();
}

/// S-G1l: T1 adds X, whose load waits for the world's gate; the main thread shuts the manager
/// down meanwhile (its wait for X's lifecycle lock runs out while the load holds it), and only
/// then opens the gate. The shutdown began before X could register: the add must get
/// `ShutDown` and leave nothing registered after the shutdown (1.13) — whatever the report
/// says it could not reach — and the model it loaded unloaded, not just dropped.
pub(super) fn load_outlasting_a_shutdown_is_refused<R: SimRuntime>(rt: R) {
    let builder = ManagerWorld::builder(rt).model("X", &[], &[]).gate_loads(&["X"]);
    let world = builder.preloaded(&[], |base| base);
    let t1 = world.spawn("T1", |m, t| traced(t, "add(X)", || m.add_model("X", None)));
    let report = traced("main", "shutdown()", || world.manager.shutdown());
    world.probe.open_gate();
    let added = join::<R, _>(t1);
    ensure!(
        matches!(added, Err(ManagerError::ShutDown { .. })),
        "S-G1",
        "add(X), whose load ended after the shutdown returned, gave {added:?} (report: {report:?})"
    );
    let registered = world.manager.ids();
    ensure!(registered.is_empty(), "S-G1", "after shutdown {registered:?} are registered: {report:?}");
    // The model the refused add loaded was unloaded too, as every model a shutdown meets is.
    none_dropped_without_unload(&world.probe, "X");
    world.check_quiescent();
}
