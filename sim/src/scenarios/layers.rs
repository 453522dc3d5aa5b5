//! Layer scenarios: `FixedSizeCache` over a tracing passthrough over the base (a three-deep
//! stack), and nested caches. Each checks I4 (queue = registered ids, once each) at the end, on
//! top of the manager's quiescence checks.

use std::time::Duration;

use resident::{Added, FixedSizeCache, FixedSizeConfig, Manager, ManagerError, ManagerExt, ModelId, Traced};

use crate::ensure;
use crate::runtime::SimRuntime;
use crate::world::checks::check_queue;
use crate::world::join;
use crate::world::manager::{Base, ManagerWorld, SimModel, Step, WorldBuilder};
use crate::world::traced;

/// What sits under the cache in a scenario's stack.
pub trait Depth: 'static {
    /// The stack under the cache.
    type Inner<R: SimRuntime>: Manager<Model = SimModel<R>, Runtime = R> + crate::bypass::Calls;
    /// Wraps the base.
    fn wrap<R: SimRuntime>(base: Base<R>) -> Self::Inner<R>;
}

/// cache → base.
#[derive(Debug)]
pub struct OneDeep;

impl Depth for OneDeep {
    type Inner<R: SimRuntime> = Base<R>;
    fn wrap<R: SimRuntime>(base: Base<R>) -> Base<R> {
        base
    }
}

/// cache → tracing passthrough → base: the catalogue's stack.
#[derive(Debug)]
pub struct ThreeDeep;

impl Depth for ThreeDeep {
    type Inner<R: SimRuntime> = Traced<Base<R>>;
    fn wrap<R: SimRuntime>(base: Base<R>) -> Traced<Base<R>> {
        Traced::new(base)
    }
}

pub(super) type Stack<R, D> = FixedSizeCache<<D as Depth>::Inner<R>>;

/// The stack with capacity `max_size`, over a base that already holds `preload` (queued in id
/// order; `order` re-touches ids to set the LRU order, least recent first).
pub(super) fn cache<R: SimRuntime, D: Depth>(
    builder: WorldBuilder<R>,
    max_size: usize,
    preload: &[&str],
    order: &[&str],
) -> ManagerWorld<R, Stack<R, D>> {
    let config = FixedSizeConfig::new(max_size).with_capacity_wait(Duration::from_millis(30));
    let world =
        builder.preloaded(preload, |base| FixedSizeCache::new(D::wrap(base), config).expect("valid config"));
    for id in order {
        drop(world.manager.lease(id).expect("preloaded"));
    }
    world
}

pub(super) fn queue<M: Manager>(cache: &FixedSizeCache<M>) -> Vec<String> {
    cache.queue().iter().map(ModelId::to_string).collect()
}

pub(super) fn finish<R: SimRuntime, M: Manager<Model = SimModel<R>, Runtime = R>>(
    world: &ManagerWorld<R, FixedSizeCache<M>>,
) {
    check_queue(&world.manager);
    world.check_quiescent();
}

/// M-S3: T1 removes X and blocks inside its unload; T2 adds X meanwhile. T2 must not be told
/// "warm" about a model whose removal already started.
pub(super) fn warm_path_vs_remove<R: SimRuntime, D: Depth>(rt: R) {
    let builder = ManagerWorld::builder(rt).model("X", &[], &[]).gate_unloads(&["X"]);
    let world = cache::<R, D>(builder, 4, &["X"], &[]);
    let t1 = world.spawn("T1", |m, t| traced(t, "remove(X)", || m.remove("X")));
    let probe = std::sync::Arc::clone(&world.probe);
    let t2 = world.spawn("T2", move |m, t| {
        probe.wait_for_gated_unload();
        let added = traced(t, "add(X)", || m.add_model("X", None));
        probe.open_gate();
        added
    });
    let removed = join::<R, _>(t1);
    let added = join::<R, _>(t2);
    ensure!(removed.is_ok(), "contract", "remove(X) failed: {removed:?}");
    ensure!(added.is_err(), "I7", "add(X) returned {added:?} while X was being removed");
    finish(&world);
}

/// M-S4: queue [A, X, B]; removing X fails in its unload. The queue keeps its exact order.
pub(super) fn failed_remove_keeps_order<R: SimRuntime, D: Depth>(rt: R) {
    let builder =
        ManagerWorld::builder(rt).model("A", &[], &[]).model("X", &[], &[Step::Fail]).model("B", &[], &[]);
    let world = cache::<R, D>(builder, 4, &["A", "B", "X"], &["A", "X", "B"]);
    let t1 = world.spawn("T1", |m, t| traced(t, "remove(X)", || m.remove("X")));
    let t2 = world.spawn("T2", |m, t| traced(t, "add(B)", || m.add_model("B", None)));
    let removed = join::<R, _>(t1);
    let added = join::<R, _>(t2);
    ensure!(matches!(removed, Err(ManagerError::Unload { .. })), "contract", "remove(X) gave {removed:?}");
    ensure!(matches!(added, Ok(Added::Warm)), "contract", "add(B) gave {added:?}");
    let q = queue(&world.manager);
    ensure!(q == ["A", "X", "B"], "I5", "failed remove changed the queue to {q:?}");
    finish(&world);
}

/// M-S5: queue [P1, P2, A, B], P1 and P2 pinned, full; adding N must evict A, whose unload
/// fails. Pins and the failed victim keep their places; N is nowhere.
pub(super) fn failed_eviction_restores<R: SimRuntime, D: Depth>(rt: R) {
    let builder = ManagerWorld::builder(rt)
        .model("P1", &[], &[])
        .model("P2", &[], &[])
        .model("A", &[], &[Step::Fail])
        .model("B", &[], &[])
        .model("N", &[], &[]);
    let world = cache::<R, D>(builder, 4, &["A", "B", "P1", "P2"], &["P1", "P2", "A", "B"]);
    world.manager.pin("P1").expect("pin");
    world.manager.pin("P2").expect("pin");
    let t1 = world.spawn("T1", |m, t| traced(t, "add(N)", || m.add_model("N", None)));
    let t2 = world.spawn("T2", |m, t| traced(t, "lease(B)", || m.lease("B").map(drop)));
    let added = join::<R, _>(t1);
    let leased = join::<R, _>(t2);
    ensure!(matches!(added, Err(ManagerError::Unload { .. })), "contract", "add(N) gave {added:?}");
    ensure!(leased.is_ok(), "contract", "lease(B) gave {leased:?}");
    let q = queue(&world.manager);
    ensure!(q == ["P1", "P2", "A", "B"], "I6", "failed eviction left the queue {q:?}");
    ensure!(!world.manager.contains("N"), "I6", "N registered after a failed add");
    finish(&world);
}

/// M-S6: two concurrent cold adds of X: one load, X queued once.
pub(super) fn concurrent_cold_adds<R: SimRuntime, D: Depth>(rt: R) {
    let builder = ManagerWorld::builder(rt).model("X", &[], &[]);
    let world = cache::<R, D>(builder, 4, &[], &[]);
    let handles = ["T1", "T2"].map(|n| world.spawn(n, |m, t| traced(t, "add(X)", || m.add_model("X", None))));
    let results = handles.map(join::<R, _>);
    ensure!(results.iter().all(Result::is_ok), "contract", "add(X) failed: {results:?}");
    finish(&world);
}

/// The one scripted load failure happened, and the callers that waited for it shared it
/// (SPEC 1.9); every other add succeeded.
fn scripted_failure_shared(results: &[Result<Added, ManagerError>]) {
    let failed = results.iter().filter(|r| r.is_err()).count();
    ensure!(failed >= 1, "contract", "expected the scripted failure: {results:?}");
    ensure!(
        results.iter().all(|r| matches!(r, Ok(_) | Err(ManagerError::Load { .. }))),
        "contract",
        "expected the scripted failure, or success: {results:?}"
    );
    super::manager::one_failure(results);
}

/// M-S6b: X's first load fails while a second add of X waits; the failure's rollback must not
/// drop the entry the second add makes.
pub(super) fn rollback_keeps_peer_entry<R: SimRuntime, D: Depth>(rt: R) {
    let builder = ManagerWorld::builder(rt).model("X", &[Step::Fail], &[]).work(0);
    let world = cache::<R, D>(builder, 4, &[], &[]);
    let handles = ["T1", "T2"].map(|n| world.spawn(n, |m, t| traced(t, "add(X)", || m.add_model("X", None))));
    let results = handles.map(join::<R, _>);
    scripted_failure_shared(&results);
    finish(&world);
}

/// M-S6c: max_size 2 with A registered; cold adds of X and Y at once must not make 3 models.
pub(super) fn capacity_under_concurrent_loads<R: SimRuntime, D: Depth>(rt: R) {
    let builder =
        ManagerWorld::builder(rt).model("A", &[], &[]).model("X", &[], &[]).model("Y", &[], &[]).capacity(2);
    let world = cache::<R, D>(builder, 2, &["A"], &[]);
    let tx = world.spawn("T1", |m, t| traced(t, "add(X)", || m.add_model("X", None)));
    let ty = world.spawn("T2", |m, t| traced(t, "add(Y)", || m.add_model("Y", None)));
    let results = [join::<R, _>(tx), join::<R, _>(ty)];
    let exhausted =
        |r: &Result<Added, ManagerError>| matches!(r, Err(ManagerError::CapacityExhausted { .. }));
    ensure!(results.iter().all(|r| r.is_ok() || exhausted(r)), "contract", "cold adds gave {results:?}");
    ensure!(world.manager.len() <= 2, "capacity", "{} registered, max_size 2", world.manager.len());
    finish(&world);
}

/// M-S7: X is registered; adding X under the alias Y must load Y, not answer "warm".
pub(super) fn alias_uses_resolved_id<R: SimRuntime, D: Depth>(rt: R) {
    let builder = ManagerWorld::builder(rt).model("X", &[], &[]);
    let world = cache::<R, D>(builder, 4, &["X"], &[]);
    let t1 = world.spawn("T1", |m, t| {
        let added = traced(t, "add(X as Y)", || m.add_model("X", Some("Y")));
        (added.clone(), m.contains("Y"))
    });
    let t2 = world.spawn("T2", |m, t| traced(t, "add(X)", || m.add_model("X", None)));
    let (aliased, registered) = join::<R, _>(t1);
    let plain = join::<R, _>(t2);
    ensure!(matches!(aliased, Ok(Added::Loaded)), "I9", "add(X as Y) gave {aliased:?}");
    ensure!(registered, "I9", "Y is not registered after add(X as Y) succeeded");
    ensure!(matches!(plain, Ok(Added::Warm)), "contract", "add(X) gave {plain:?}");
    finish(&world);
}

/// M-S8: max_size 2, queue [V, A]; adding N evicts V while V is added again.
pub(super) fn eviction_vs_reload<R: SimRuntime, D: Depth>(rt: R) {
    let builder =
        ManagerWorld::builder(rt).model("V", &[], &[]).model("A", &[], &[]).model("N", &[], &[]).work(0);
    let world = cache::<R, D>(builder, 2, &["A", "V"], &["V", "A"]);
    let t1 = world.spawn("T1", |m, t| traced(t, "add(N)", || m.add_model("N", None)));
    let t2 = world.spawn("T2", |m, t| {
        // Several warm (or re-)adds: each is a chance for the eviction to land in between.
        (0..3).map(|_| traced(t, "add(V)", || m.add_model("V", None))).collect::<Vec<_>>()
    });
    let added = join::<R, _>(t1);
    let again = join::<R, _>(t2);
    ensure!(added.is_ok(), "contract", "add(N) failed: {added:?}");
    ensure!(again.iter().all(Result::is_ok), "contract", "add(V) failed: {again:?}");
    finish(&world);
}

/// M-S9: S2 through the cache: X's first load fails while two more callers add X.
pub(super) fn load_failure_through_cache<R: SimRuntime, D: Depth>(rt: R) {
    // Under loom, which reaches that order at its bound anyway and would explore every
    // scheduling point of the way, N comes at once.
    let late = if R::NAME == "loom" { 0 } else { super::wakeups::HEAD_START / 2 };
    let builder = ManagerWorld::builder(rt).model("X", &[Step::Fail], &[]);
    let world = cache::<R, D>(builder, 4, &[], &[]);
    // N comes last, often after H's load failed while W still waits for the lock: the late
    // caller that must not start a second generation beside W's.
    let handles = [("H", 0), ("W", 0), ("N", late)].map(|(n, after)| {
        world.spawn(n, move |m, t| {
            super::wakeups::give_way::<R>(after);
            traced(t, "add(X)", || m.add_model("X", None))
        })
    });
    let results = handles.map(join::<R, _>);
    scripted_failure_shared(&results);
    finish(&world);
}

/// The nested stack of M-S10: cache(3) → tracing → cache(2) → base.
type Nested<R> = FixedSizeCache<Traced<FixedSizeCache<Base<R>>>>;

/// M-S10: nested caches; every method works at depth, and pins reach the inner cache.
pub(super) fn nested_stacks<R: SimRuntime>(rt: R) {
    let builder = ManagerWorld::builder(rt).model("A", &[], &[]).model("B", &[], &[]).model("C", &[], &[]);
    let cfg = |n| FixedSizeConfig::new(n).with_capacity_wait(Duration::from_millis(30));
    let world: ManagerWorld<R, Nested<R>> = builder.stack(|base| {
        let inner = FixedSizeCache::new(base, cfg(2)).expect("valid");
        FixedSizeCache::new(Traced::new(inner), cfg(3)).expect("valid")
    });
    let m = &world.manager;
    m.add_model("A", None).expect("add A");
    m.pin("A").expect("pin A");
    m.add_model("B", None).expect("add B");
    let t1 = world.spawn("T1", |m, t| traced(t, "add(C)", || m.add_model("C", None)));
    let t2 = world.spawn("T2", |m, t| {
        traced(t, "lease(B)", || {
            m.lease("B").map(drop).or_else(|e| match e {
                ManagerError::NotFound { .. } | ManagerError::Removing { .. } => Ok(()),
                other => Err(other),
            })
        })
    });
    let added = join::<R, _>(t1);
    let leased = join::<R, _>(t2);
    ensure!(added.is_ok(), "contract", "add(C) at depth gave {added:?}");
    ensure!(leased.is_ok(), "contract", "lease(B) at depth gave {leased:?}");
    ensure!(m.contains("A"), "I10", "pinned A was evicted by an inner layer");
    ensure!(
        m.get_ref().get_ref().pinned().iter().any(|p| p.as_str() == "A"),
        "I13",
        "the pin stopped at the outer cache"
    );
    check_queue(m.get_ref().get_ref());
    world.check_quiescent();
    m.unpin("A").expect("unpin at depth");
    m.remove("A").expect("remove at depth");
    check_queue(m.get_ref().get_ref());
}

/// M-PN1: nested caches with A registered; T1 pins A while T2 unpins it. Whichever comes last
/// wins in every layer: the outer cache and the inner one agree on whether A is pinned.
pub(super) fn pin_racing_unpin_at_depth<R: SimRuntime>(rt: R) {
    let builder = ManagerWorld::builder(rt).model("A", &[], &[]);
    let cfg = |n| FixedSizeConfig::new(n).with_capacity_wait(Duration::from_millis(30));
    let world: ManagerWorld<R, Nested<R>> = builder.stack(|base| {
        let inner = FixedSizeCache::new(base, cfg(2)).expect("valid");
        FixedSizeCache::new(Traced::new(inner), cfg(3)).expect("valid")
    });
    world.manager.add_model("A", None).expect("add A");
    let t1 = world.spawn("T1", |m, t| traced(t, "pin(A)", || m.pin("A")));
    let t2 = world.spawn("T2", |m, t| traced(t, "unpin(A)", || m.unpin("A")));
    let pinned = join::<R, _>(t1);
    let unpinned = join::<R, _>(t2);
    ensure!(pinned.is_ok() && unpinned.is_ok(), "contract", "pin(A) gave {pinned:?}, unpin(A) {unpinned:?}");
    let pinned_in = |pins: Vec<ModelId>| pins.iter().any(|p| p.as_str() == "A");
    let (outer, inner) =
        (pinned_in(world.manager.pinned()), pinned_in(world.manager.get_ref().get_ref().pinned()));
    ensure!(
        outer == inner,
        "I13",
        "after a pin racing an unpin, A is pinned outside: {outer}, inside: {inner}"
    );
    check_queue(&world.manager);
    check_queue(world.manager.get_ref().get_ref());
    world.check_quiescent();
}

/// M-S11: max_size 2, queue [V, A]; adding N must evict V, whose unload fails.
pub(super) fn failed_eviction_no_phantom<R: SimRuntime, D: Depth>(rt: R) {
    let builder =
        ManagerWorld::builder(rt).model("V", &[], &[Step::Fail]).model("A", &[], &[]).model("N", &[], &[]);
    let world = cache::<R, D>(builder, 2, &["A", "V"], &["V", "A"]);
    let t1 = world.spawn("T1", |m, t| traced(t, "add(N)", || m.add_model("N", None)));
    let t2 = world.spawn("T2", |m, t| traced(t, "add(A)", || m.add_model("A", None)));
    let added = join::<R, _>(t1);
    let warm = join::<R, _>(t2);
    ensure!(matches!(added, Err(ManagerError::Unload { .. })), "contract", "add(N) gave {added:?}");
    ensure!(matches!(warm, Ok(Added::Warm)), "contract", "add(A) gave {warm:?}");
    let q = queue(&world.manager);
    ensure!(q == ["V", "A"], "I6", "failed eviction left the queue {q:?}");
    finish(&world);
}

/// M-S12: a lease of an unknown id, and a lease racing a remove: no phantom queue entries.
pub(super) fn touch_of_unknown_ids<R: SimRuntime, D: Depth>(rt: R) {
    let builder = ManagerWorld::builder(rt).model("X", &[], &[]);
    let world = cache::<R, D>(builder, 4, &["X"], &[]);
    let t1 = world.spawn("T1", |m, t| traced(t, "lease(Z)", || m.lease("Z").map(drop)));
    let t2 = world.spawn("T2", |m, t| traced(t, "remove(X)", || m.remove("X")));
    let t3 = world.spawn("T3", |m, t| traced(t, "lease(X)", || m.lease("X").map(drop)));
    let unknown = join::<R, _>(t1);
    let removed = join::<R, _>(t2);
    let raced = join::<R, _>(t3);
    ensure!(matches!(unknown, Err(ManagerError::NotFound { .. })), "contract", "lease(Z) gave {unknown:?}");
    ensure!(removed.is_ok(), "contract", "remove(X) gave {removed:?}");
    ensure!(
        matches!(raced, Ok(()) | Err(ManagerError::NotFound { .. } | ManagerError::Removing { .. })),
        "contract",
        "lease(X) gave {raced:?}"
    );
    finish(&world);
}

/// M-S13: max_size 2, queue [V, A]; adding N must evict while warm adds hold V's and A's
/// lifecycle locks and touch the queue. No lock-order cycle, no timeout needed.
pub(super) fn lock_order<R: SimRuntime, D: Depth>(rt: R) {
    let builder = ManagerWorld::builder(rt).model("V", &[], &[]).model("A", &[], &[]).model("N", &[], &[]);
    let world = cache::<R, D>(builder, 2, &["A", "V"], &["V", "A"]);
    let t1 = world.spawn("T1", |m, t| traced(t, "add(N)", || m.add_model("N", None)));
    let t2 = world.spawn("T2", |m, t| traced(t, "add(V)", || m.add_model("V", None)));
    let t3 = world.spawn("T3", |m, t| traced(t, "add(A)", || m.add_model("A", None)));
    let results = [join::<R, _>(t1), join::<R, _>(t2), join::<R, _>(t3)];
    ensure!(results.iter().all(Result::is_ok), "contract", "adds failed: {results:?}");
    finish(&world);
}

/// M-L2: max_size 2, queue [A, B]; the main thread holds a lease on A while N is added and A is
/// leased again: eviction must take B, never the model in use.
pub(super) fn eviction_skips_in_use<R: SimRuntime, D: Depth>(rt: R) {
    let builder = ManagerWorld::builder(rt).model("A", &[], &[]).model("B", &[], &[]).model("N", &[], &[]);
    let world = cache::<R, D>(builder, 2, &["A", "B"], &[]);
    let held = world.manager.lease("A").expect("A is registered");
    drop(world.manager.lease("B").expect("B is registered")); // A, in use, is now the LRU
    let t1 = world.spawn("T1", |m, t| traced(t, "add(N)", || m.add_model("N", None)));
    let t2 = world.spawn("T2", |m, t| traced(t, "lease(A)", || m.lease("A").map(drop)));
    let added = join::<R, _>(t1);
    let leased = join::<R, _>(t2);
    drop(held);
    ensure!(leased.is_ok(), "L2", "lease(A) of a model in use gave {leased:?}");
    ensure!(added.is_ok(), "contract", "add(N) gave {added:?}");
    ensure!(
        world.manager.contains("A") && !world.manager.contains("B"),
        "L2",
        "evicted {:?}",
        world.manager.ids()
    );
    finish(&world);
}
