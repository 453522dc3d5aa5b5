//! Wake-up scenarios (SPEC §5, `W-*`): one per notify site that production relies on. Each runs
//! with [`Time::Auto`](crate::runtime::Time::Auto): a deadline fires only once every thread is
//! blocked, so a waiter that nobody woke sleeps until its deadline, and the scenario fails — the
//! runtime flags a waiter whose deadline woke it with its condition already true, and every
//! scenario here checks that no deadline passed at all (the logical clock is still at zero).

use std::time::Duration;

use resident::runtime::Arc;
use resident::{Added, Manager, ManagerExt, ModelId};

use super::cache::{Cache, finish as finish_cache};
use super::layers::{self, Depth};
use crate::ensure;
use crate::runtime::SimRuntime;
use crate::trace;
use crate::world::cache::{Behaviour, CacheWorld, Weights};
use crate::world::join;
use crate::world::manager::ManagerWorld;
use crate::world::traced;

/// Scheduling points T1 passes before it releases the victim.
const RELEASE_AFTER: usize = HEAD_START;

/// Scheduling points a thread that changes what another one waits for passes first (see
/// [`give_way`]).
pub(super) const HEAD_START: usize = 64;

/// Passes `points` scheduling points before the change a waiter waits for, so that uniform
/// random schedules often let the waiter reach its wait first (PCT and loom reach that order
/// anyway); both orders are explored.
pub(super) fn give_way<R: SimRuntime>(points: usize) {
    for _ in 0..points {
        R::yield_now();
    }
}

/// Nothing slept until a deadline: every wait in the scenario ended by a notify.
pub(super) fn no_deadline_passed<R: SimRuntime>(rt: &R) {
    let now = rt.now();
    ensure!(
        now == Duration::ZERO,
        "lost-wakeup",
        "a waiter slept until its deadline ({now:?} passed) although what it waited for had happened"
    );
}

/// W-1: the main thread holds X's lifecycle lock while T2 adds X (waiting for the lock); T1
/// releases it. T2 must be woken by the release.
pub(super) fn lock_release<R: SimRuntime>(rt: R) {
    let world = ManagerWorld::builder(rt).model("X", &[], &[]).build();
    let guard = world.manager.lock(&ModelId::new("X").expect("valid id")).expect("free lock");
    let t2 = world.spawn("T2", |m, t| traced(t, "add(X)", || m.add_model("X", None)));
    let t1 = world.spawn("T1", move |_, _| drop(guard));
    join::<R, _>(t1);
    let added = join::<R, _>(t2);
    ensure!(added.is_ok(), "contract", "add(X) gave {added:?}");
    no_deadline_passed(&world.rt);
    world.check_quiescent();
}

/// W-2: X is registered and the main thread holds a lease while T2 removes X (draining); T1 ends
/// the lease. The remove must be woken by the end of the last lease.
pub(super) fn lease_drain<R: SimRuntime>(rt: R) {
    let world = ManagerWorld::builder(rt).model("X", &[], &[]).build();
    world.manager.add_model("X", None).expect("setup load succeeds");
    let lease = world.manager.lease("X").expect("registered");
    let t2 = world.spawn("T2", |m, t| traced(t, "remove(X)", || m.remove("X")));
    let t1 = world.spawn("T1", move |_, _| drop(lease));
    join::<R, _>(t1);
    let removed = join::<R, _>(t2);
    ensure!(removed.is_ok(), "contract", "remove(X) gave {removed:?}");
    no_deadline_passed(&world.rt);
    world.check_quiescent();
}

/// The cache of the room scenarios: max_size 1, A registered and queued.
fn full_cache<R: SimRuntime, D: Depth>(rt: R) -> ManagerWorld<R, layers::Stack<R, D>> {
    let builder = ManagerWorld::builder(rt).model("A", &[], &[]).model("B", &[], &[]);
    layers::cache::<R, D>(builder, 1, &["A"], &[])
}

/// Adds B while A is held by `hold`, then lets `release` (run by T1) make A evictable: the add
/// that waits for room must be woken by it.
fn room_after<R: SimRuntime, D: Depth, H: Send + 'static>(
    world: ManagerWorld<R, layers::Stack<R, D>>,
    hold: H,
    release: impl FnOnce(&layers::Stack<R, D>, H) + Send + 'static,
) {
    room_after_in::<R, D, H>(world, hold, RELEASE_AFTER, release);
}

/// [`room_after`], T1 passing `after` scheduling points before it releases.
fn room_after_in<R: SimRuntime, D: Depth, H: Send + 'static>(
    world: ManagerWorld<R, layers::Stack<R, D>>,
    hold: H,
    after: usize,
    release: impl FnOnce(&layers::Stack<R, D>, H) + Send + 'static,
) {
    let t2 = world.spawn("T2", |m, t| traced(t, "add(B)", || m.add_model("B", None)));
    let t1 = world.spawn("T1", move |m, _| {
        give_way::<R>(after);
        release(m, hold);
    });
    join::<R, _>(t1);
    let added = join::<R, _>(t2);
    ensure!(added.is_ok(), "contract", "add(B) gave {added:?}");
    ensure!(!world.manager.contains("A"), "contract", "A was not evicted: {:?}", world.manager.ids());
    no_deadline_passed(&world.rt);
    layers::finish(&world);
}

/// W-3: the only victim A is leased while B is added; T1 ends the lease.
pub(super) fn room_after_lease<R: SimRuntime, D: Depth>(rt: R) {
    let world = full_cache::<R, D>(rt);
    let lease = world.manager.lease("A").expect("registered");
    room_after::<R, D, _>(world, lease, |_, lease| drop(lease));
}

/// W-3w: W-3 with the lease ending at once, while the add may still be planning: the add must
/// have declared its watch for lease ends before it first looked at A.
pub(super) fn room_after_lease_at_once<R: SimRuntime, D: Depth>(rt: R) {
    let world = full_cache::<R, D>(rt);
    let lease = world.manager.lease("A").expect("registered");
    room_after_in::<R, D, _>(world, lease, 0, |_, lease| drop(lease));
}

/// W-4: A's lifecycle lock is held while B is added; T1 releases it.
pub(super) fn room_after_lock<R: SimRuntime, D: Depth>(rt: R) {
    let world = full_cache::<R, D>(rt);
    let guard = world.manager.lock(&ModelId::new("A").expect("valid id")).expect("free lock");
    room_after::<R, D, _>(world, guard, |_, guard| drop(guard));
}

/// Warm adds T1 makes in W-20: each hold of A's lock is a window in which T2 may find it held.
const WARM_ADDS: usize = 4;

/// W-20: the only victim A is added again by T1, a few times (warm; loaded again if T2
/// evicted it first), while T2 adds B. A warm add changes nothing a waiter could use, so its
/// release is quiet; but if T2 planned while T1 held A's lock, it skipped A for it, and the
/// release must wake it.
pub(super) fn room_after_warm_add<R: SimRuntime, D: Depth>(rt: R) {
    let world = full_cache::<R, D>(rt);
    let t1 = world.spawn("T1", |m, t| {
        (0..WARM_ADDS)
            .map(|_| traced(t, "add(A)", || m.add_model("A", None)))
            .find(Result::is_err)
            .unwrap_or(Ok(Added::Warm))
    });
    let t2 = world.spawn("T2", |m, t| traced(t, "add(B)", || m.add_model("B", None)));
    let warm = join::<R, _>(t1);
    let added = join::<R, _>(t2);
    ensure!(warm.is_ok(), "contract", "add(A) gave {warm:?}");
    ensure!(added.is_ok(), "contract", "add(B) gave {added:?}");
    no_deadline_passed(&world.rt);
    layers::finish(&world);
}

/// W-5: A is pinned while B is added; T1 unpins it.
pub(super) fn room_after_unpin<R: SimRuntime, D: Depth>(rt: R) {
    let world = full_cache::<R, D>(rt);
    world.manager.pin("A").expect("registered");
    room_after::<R, D, _>(world, (), |m, ()| m.unpin("A").expect("valid id"));
}

/// W-6: T1 and T2 place the same record; whoever finds the other's move in flight waits for it
/// to settle, and must be woken when it does.
pub(super) fn move_settled<R: SimRuntime>(rt: R) {
    let world = CacheWorld::new(rt, 1000, 1);
    let script = world.with_device(100);
    let weights = Weights::scripted(60, Behaviour::default(), &script);
    drop(world.caches[0].put("m", weights, 60, resident::cache::PutOptions::default()).expect("setup put"));
    let handles = ["T1", "T2"].map(|name| {
        let c0: Cache<R> = Arc::clone(&world.caches[0]);
        world.spawn(name, move |_, _| {
            trace::record(name, "lock_on_device(m)".to_owned());
            let placed = c0.get("m").expect("resident").lock_on_device();
            ensure!(placed.is_ok(), "contract", "{name}: lock_on_device(m) gave {:?}", placed.map(|_| ()));
        })
    });
    for handle in handles {
        join::<R, _>(handle);
    }
    no_deadline_passed(&world.rt);
    finish_cache(&world);
}

/// W-8: T1 loads `m` through `get_or_put` on cuda:0, and its load waits until T2 is done; T2
/// wants `m` on cuda:1 and waits for T1's load; T3 shuts the group down once the load is in
/// flight. The shutdown must wake T2, refused with `ShutDown` (T1's load then finishes, stale).
pub(super) fn group_shutdown<R: SimRuntime>(rt: R) {
    let world = CacheWorld::new(rt, 1000, 2);
    world.group.set_load_wait(Duration::from_secs(1)).expect("a valid load wait");
    let (started, t2_done) =
        (Arc::new(crate::latch::Latch::new(&world.rt)), Arc::new(crate::latch::Latch::new(&world.rt)));
    let (c0, s1, d1) = (Arc::clone(&world.caches[0]), Arc::clone(&started), Arc::clone(&t2_done));
    let t1 = world.spawn("T1", move |_, _| {
        let loaded = traced("T1", "get_or_put(m) on cuda:0", || {
            c0.get_or_put("m", 40, || {
                s1.add(1);
                d1.wait_for(1);
                Ok::<_, std::convert::Infallible>(Weights::plain(40))
            })
        });
        ensure!(loaded.is_ok(), "contract", "T1's load gave {:?}", loaded.map(drop));
    });
    let (c1, s2, d2) = (Arc::clone(&world.caches[1]), Arc::clone(&started), Arc::clone(&t2_done));
    let t2 = world.spawn("T2", move |_, _| {
        s2.wait_for(1);
        let got = traced("T2", "get_or_put(m) on cuda:1", || {
            c1.get_or_put("m", 40, || Ok::<_, std::convert::Infallible>(Weights::plain(40))).map(drop)
        });
        d2.add(1);
        got
    });
    let (group, s3) = (Arc::clone(&world.group), Arc::clone(&started));
    let t3 = world.spawn("T3", move |_, _| {
        s3.wait_for(1);
        give_way::<R>(RELEASE_AFTER);
        trace::record("T3", "shutdown(group)".to_owned());
        group.shutdown();
    });
    join::<R, _>(t3);
    let got = join::<R, _>(t2);
    join::<R, _>(t1);
    ensure!(
        matches!(got, Err(resident::CacheError::ShutDown { .. })),
        "contract",
        "T2's get_or_put after the group's shutdown gave {got:?}"
    );
    no_deadline_passed(&world.rt);
    finish_cache(&world);
}
