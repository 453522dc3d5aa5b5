//! Atomic replacement (SPEC 1.11; `S-R1`): a new version of a registered model is loaded beside
//! the old one and switched in one step; no lease ever sees `NotFound` or a version being
//! unloaded.

use std::time::Duration;

use resident::runtime::Arc;
use resident::{
    CallOptions, FixedSizeCache, FixedSizeConfig, Manager, ManagerError, ManagerExt, ModelId, Replaced,
};

use super::layers::{Depth, cache, finish};
use crate::ensure;
use crate::latch::Latch;
use crate::runtime::SimRuntime;
use crate::world::join;
use crate::world::manager::{ManagerWorld, Step};
use crate::world::traced;

/// S-R1: X (pinned) and Y are registered in a cache of three. T1 replaces X; T2 leases X twice
/// and serves from each lease (a version unloaded under it fails the execution, L1); then T3
/// removes X, racing the replace. Every lease succeeds, X stays pinned, and X ends registered
/// exactly when the replace came last.
pub(super) fn replace_races_leases_and_a_remove<R: SimRuntime, D: Depth>(rt: R) {
    let leased = Arc::new(Latch::new(&rt));
    let builder = ManagerWorld::builder(rt).model("X", &[], &[]).model("Y", &[], &[]);
    let world = cache::<R, D>(builder, 3, &["X", "Y"], &[]);
    world.manager.pin("X").expect("registered");
    let t1 = world.spawn("T1", |m, t| traced(t, "replace(X)", || m.replace("X", None)));
    let t2 = {
        let leased = Arc::clone(&leased);
        world.spawn("T2", move |m, t| {
            let served: Vec<_> =
                (0..2).map(|_| traced(t, "lease(X)", || m.lease("X").map(|lease| lease.serve(t)))).collect();
            leased.add(1);
            served
        })
    };
    let t3 = world.spawn("T3", move |m, t| {
        leased.wait_for(1);
        traced(t, "remove(X)", || m.remove("X"))
    });
    let replaced = join::<R, _>(t1);
    let served = join::<R, _>(t2);
    let removed = join::<R, _>(t3);
    ensure!(served.iter().all(Result::is_ok), "S-R1", "a lease of X during its replace failed: {served:?}");
    ensure!(removed.is_ok(), "contract", "remove(X) gave {removed:?}");
    let registered = world.manager.contains("X");
    match replaced {
        Ok(Replaced::Unloaded) => ensure!(!registered, "contract", "X replaced, then removed, is registered"),
        Ok(Replaced::Added) => {
            ensure!(registered, "contract", "X removed, then added by the replace, is gone")
        }
        other => ensure!(false, "contract", "replace(X) gave {other:?}"),
    }
    let pinned = world.manager.pinned().contains(&ModelId::new("X").expect("valid"));
    ensure!(pinned, "S-R1", "the replace or the remove lost X's pin: {:?}", world.manager.pinned());
    let refused = world.manager.replace_with(
        "Y",
        Some("X"),
        CallOptions::new().with_timeout(std::time::Duration::ZERO),
    );
    ensure!(
        !matches!(refused, Err(ManagerError::NotFound { .. })),
        "contract",
        "a replace never answers NotFound: {refused:?}"
    );
    finish(&world);
}

/// M-B1: A (30 bytes) and X (40 bytes; its next version 90) are registered in a cache of three
/// with `max_bytes` 100. T1 replaces X while T2 leases X. The replace that grew X evicts as a
/// cold add would: A, idle and least recently used, goes, and the layer holds at most 100
/// bytes again.
pub(super) fn replace_that_grows_enforces_max_bytes<R: SimRuntime, D: Depth>(rt: R) {
    let builder = ManagerWorld::builder(rt)
        .model("A", &[], &[])
        .model("X", &[], &[])
        .sizes("A", &[30])
        .sizes("X", &[40, 90]);
    let config = FixedSizeConfig::new(3).with_capacity_wait(Duration::from_millis(30)).with_max_bytes(100);
    let world =
        builder.preloaded(&["A", "X"], |base| FixedSizeCache::new(D::wrap(base), config).expect("valid"));
    let t1 = world.spawn("T1", |m, t| traced(t, "replace(X)", || m.replace("X", None)));
    let t2 = world.spawn("T2", |m, t| traced(t, "lease(X)", || m.lease("X").map(|lease| lease.serve(t))));
    let replaced = join::<R, _>(t1);
    let leased = join::<R, _>(t2);
    ensure!(matches!(replaced, Ok(Replaced::Unloaded)), "contract", "replace(X) gave {replaced:?}");
    ensure!(leased.is_ok(), "contract", "lease(X) gave {leased:?}");
    let (bytes, sizes) = super::eviction::registered_bytes(&world.manager);
    ensure!(bytes <= 100, "M-B1", "{bytes} bytes registered after the replace, max_bytes 100: {sizes:?}");
    finish(&world);
}

/// S-R2: X fills a cache of one, and in a second stack of two, X is beside P, which is pinned.
/// T1 replaces X in each while T2 leases X from the first: each replace is refused at once
/// with `NoSlotBeside` (no capacity wait passes), the old version serves on, nothing changes.
pub(super) fn replace_with_no_slot_beside<R: SimRuntime, D: Depth>(rt: R) {
    let alone = cache::<R, D>(ManagerWorld::builder(rt.clone()).model("X", &[], &[]), 1, &["X"], &["X"]);
    let beside_a_pin = cache::<R, D>(
        ManagerWorld::builder(rt.clone()).model("X", &[], &[]).model("P", &[], &[]),
        2,
        &["P", "X"],
        &[],
    );
    beside_a_pin.manager.pin("P").expect("registered");
    let t1 = alone.spawn("T1", |m, t| traced(t, "replace(X) in a cache of one", || m.replace("X", None)));
    let t2 = alone.spawn("T2", |m, t| traced(t, "lease(X)", || m.lease("X").map(|lease| lease.serve(t))));
    let pinned = traced("main", "replace(X) beside pinned P", || beside_a_pin.manager.replace("X", None));
    let replaced = join::<R, _>(t1);
    let leased = join::<R, _>(t2);
    for (what, result) in [("a cache of one", &replaced), ("beside a pinned model", &pinned)] {
        ensure!(
            matches!(result, Err(ManagerError::NoSlotBeside { .. })),
            "S-R2",
            "a replace of X in {what} gave {result:?}, not a refusal at once"
        );
    }
    ensure!(leased.is_ok(), "contract", "lease(X) during a refused replace gave {leased:?}");
    super::wakeups::no_deadline_passed(&rt);
    finish(&alone);
    finish(&beside_a_pin);
}

/// S-R2i: X fills a cache of one, one model alive at most (the world fails the execution when a
/// load finds another model alive). T1 replaces X in place while T2 leases X twice and serves
/// from each lease: the old version's leases drain first (a version unloaded under a lease fails
/// the execution, L1), a lease that arrives during the swap waits for the new version (never
/// `NotFound`), and v2 serves. Then, in a second cache of one, Y's new version fails to load:
/// the call returns the load's error and Y ends unregistered, out of the queue.
pub(super) fn replace_in_place_through_a_cache_of_one<R: SimRuntime, D: Depth>(rt: R) {
    let builder = ManagerWorld::builder(rt.clone()).model("X", &[], &[]).capacity(1);
    let world = cache::<R, D>(builder, 1, &["X"], &["X"]);
    let t1 = world.spawn("T1", |m, t| traced(t, "replace_in_place(X)", || m.replace_in_place("X", None)));
    let t2 = world.spawn("T2", |m, t| {
        (0..2).map(|_| traced(t, "lease(X)", || m.lease("X").map(|lease| lease.serve(t)))).collect::<Vec<_>>()
    });
    let replaced = join::<R, _>(t1);
    let served = join::<R, _>(t2);
    ensure!(matches!(replaced, Ok(Replaced::Unloaded)), "S-R2i", "replace_in_place(X) gave {replaced:?}");
    ensure!(served.iter().all(Result::is_ok), "S-R2i", "a lease of X during its swap failed: {served:?}");
    let x = world.probe.id("X");
    ensure!(world.probe.load_calls("X") == 2, "contract", "X loaded {} times", world.probe.load_calls("X"));
    ensure!(
        x.alive() == 1 && x.dropped() == 0,
        "S-R2i",
        "X: {} alive, {} dropped unloaded",
        x.alive(),
        x.dropped()
    );
    finish(&world);

    let failing = cache::<R, D>(
        ManagerWorld::builder(rt).model("Y", &[Step::Ok, Step::Fail], &[]).capacity(1),
        1,
        &["Y"],
        &["Y"],
    );
    let swapped = failing.manager.replace_in_place("Y", None);
    ensure!(
        matches!(swapped, Err(ManagerError::Load { .. })),
        "S-R2i",
        "a failed swap of Y gave {swapped:?}"
    );
    ensure!(
        !failing.manager.contains("Y"),
        "S-R2i",
        "Y stays registered after its new version failed to load"
    );
    finish(&failing);
}

/// M-R3n: an outer cache (max 4) over an inner one (max 4), both holding M, N and O in that
/// order (M least recently used; room for a new version beside the old). T1 replaces M through the outer cache while T2 leases N. A
/// replace keeps its model's place in every layer's order (SPEC 1.11): the outer cache reads
/// the new version's size through a look that is no use of it, so M stays the inner cache's
/// least recently used too, and both layers agree on their order.
pub(super) fn replace_through_nested_caches_keeps_every_order<R: SimRuntime>(rt: R) {
    let builder = ManagerWorld::builder(rt).model("M", &[], &[]).model("N", &[], &[]).model("O", &[], &[]);
    let cfg = FixedSizeConfig::new(4).with_capacity_wait(Duration::from_millis(30));
    let world = builder.preloaded(&["M", "N", "O"], |base| {
        let inner = FixedSizeCache::new(base, cfg).expect("valid");
        FixedSizeCache::new(inner, cfg).expect("valid")
    });
    let t1 = world.spawn("T1", |m, t| traced(t, "replace(M)", || m.replace("M", None)));
    let t2 = world.spawn("T2", |m, t| traced(t, "lease(N)", || m.lease("N").map(|lease| lease.serve(t))));
    let replaced = join::<R, _>(t1);
    let leased = join::<R, _>(t2);
    ensure!(matches!(replaced, Ok(Replaced::Unloaded)), "contract", "replace(M) gave {replaced:?}");
    ensure!(leased.is_ok(), "contract", "lease(N) gave {leased:?}");
    let (outer, inner) = (world.manager.queue(), world.manager.get_ref().queue());
    ensure!(outer == inner, "1.11", "the layers' orders disagree: outer {outer:?}, inner {inner:?}");
    ensure!(outer.first().is_some_and(|id| id.as_str() == "M"), "1.11", "M lost its place: {outer:?}");
    finish(&world);
}
