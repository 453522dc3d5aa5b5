//! Hard-budget scenarios (SPEC 3.11, A7; `C-B*`, `W-9`, `W-10`): loads reserve their bytes
//! before they allocate them, make room, wait for it (woken by debits and by releases that
//! leave a record evictable), and give their reservation back on every path.
//!
//! Every loader here checks A7 from inside itself, at the moment it would allocate: the bytes in
//! use plus the bytes reserved are within the cap, and at least its own bytes are reserved (so
//! the heap — bytes in use plus bytes being built — stays within the cap too).

use resident::CacheError;
use resident::runtime::Arc;

use super::cache::{Cache, finish};
use super::wakeups::{HEAD_START, give_way, no_deadline_passed};
use crate::latch::Latch;
use crate::runtime::SimRuntime;
use crate::violation::{InjectedPanic, catching};
use crate::world::cache::{CacheWorld, Weights};
use crate::world::join;
use crate::{ensure, trace};

/// The cap of every world here: room for one model of [`BYTES`], not two.
const CAP: u64 = 100;
/// Every model's size.
const BYTES: u64 = 60;

/// What a scripted load does once it has checked A7.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Outcome {
    Loads,
    Fails,
    Panics,
}

/// The loads of a world: each checks A7 against the group's budget as it allocates.
struct Loads<R: SimRuntime> {
    world_budget: Arc<resident::cache::RamBudget<R>>,
}

impl<R: SimRuntime> Loads<R> {
    fn new(world: &CacheWorld<R>) -> Arc<Self> {
        Arc::new(Self { world_budget: Arc::clone(world.group.budget()) })
    }

    /// A load of [`BYTES`] that checks A7 as it starts, then ends as `outcome` says.
    fn run(&self, thread: &str, outcome: Outcome) -> Result<Weights<R>, &'static str> {
        let budget = &self.world_budget;
        // Each a single read: two reads of the budget could straddle another load's changes.
        let (committed, cap) = (budget.committed(), budget.cap());
        let reserved = budget.reserved();
        ensure!(
            committed <= cap && BYTES <= reserved,
            "A7",
            "{thread}'s load allocates with {committed} bytes in use or reserved (cap {cap}) and \
             {reserved} reserved, less than its own {BYTES}"
        );
        R::yield_now();
        match outcome {
            Outcome::Loads => Ok(Weights::plain(BYTES)),
            Outcome::Fails => Err("a scripted load failure"),
            Outcome::Panics => std::panic::panic_any(InjectedPanic),
        }
    }
}

/// Spawns `thread`, which loads `key` through `get_or_put` on `cache`; the load ends as
/// `outcome` says. The thread returns the call's result (`None` if the injected panic reached
/// it), dropping the model at once.
fn spawn_load<R: SimRuntime>(
    world: &CacheWorld<R>,
    loads: &Arc<Loads<R>>,
    thread: &'static str,
    cache: usize,
    key: &'static str,
    outcome: Outcome,
) -> R::Handle<Option<Result<(), CacheError>>> {
    let (cache, loads): (Cache<R>, _) = (Arc::clone(&world.caches[cache]), Arc::clone(loads));
    world.spawn(thread, move |_, _| {
        trace::record(thread, format!("get_or_put({key}) on {}", cache.device()));
        let got = catching(|| cache.get_or_put(key, BYTES, || loads.run(thread, outcome)).map(drop));
        trace::record(thread, format!("get_or_put({key}) -> {got:?}"));
        got
    })
}

/// The checks every scenario here ends with: the high-water mark within the cap (A7), no
/// reservation left, then A1 and A6.
fn finish_within_cap<R: SimRuntime>(world: &CacheWorld<R>) {
    let budget = world.group.budget();
    let (high, cap) = (budget.high_water(), budget.cap());
    ensure!(high <= cap, "A7", "the budget's high-water mark {high} is over its cap {cap}");
    finish(world);
}

/// C-B1: two cold loads of different keys on two peers, with room for one: neither allocates
/// before its bytes are reserved (A7 inside both loaders); the second waits for the first's
/// record to go idle, evicts it and loads.
pub(super) fn cold_loads_with_room_for_one<R: SimRuntime>(rt: R) {
    let world = CacheWorld::hard(rt, CAP, 2);
    let loads = Loads::new(&world);
    let t1 = spawn_load(&world, &loads, "T1", 0, "a", Outcome::Loads);
    let t2 = spawn_load(&world, &loads, "T2", 1, "b", Outcome::Loads);
    for (name, handle) in [("T1", t1), ("T2", t2)] {
        let got = join::<R, _>(handle);
        ensure!(matches!(got, Some(Ok(()))), "contract", "{name}'s load gave {got:?}");
    }
    no_deadline_passed(&world.rt);
    finish_within_cap(&world);
}

/// C-B2: a load that fails and a load that panics, with room for one of them at a time, and a
/// third call that finds its key loaded meanwhile or loads it: each gives its reservation back
/// (the waiter behind it gets the room), and none is left once every call returned (A6).
pub(super) fn reservations_released_on_every_path<R: SimRuntime>(rt: R) {
    let world = CacheWorld::hard(rt, CAP, 1);
    let loads = Loads::new(&world);
    let t1 = spawn_load(&world, &loads, "T1", 0, "a", Outcome::Fails);
    let t2 = spawn_load(&world, &loads, "T2", 0, "b", Outcome::Panics);
    let got1 = join::<R, _>(t1);
    ensure!(
        matches!(got1, Some(Err(CacheError::Load { .. }))),
        "contract",
        "T1's failing load gave {got1:?}"
    );
    let got2 = join::<R, _>(t2);
    ensure!(got2.is_none(), "contract", "T2's panicking load gave {got2:?}");
    let reserved = world.group.budget().reserved();
    ensure!(reserved == 0, "A3", "{reserved} bytes still reserved after every load ended");
    let after = world.caches[0].get_or_put("b", BYTES, || loads.run("main", Outcome::Loads)).map(drop);
    ensure!(after.is_ok(), "contract", "a load after the failed ones gave {after:?}");
    no_deadline_passed(&world.rt);
    finish_within_cap(&world);
}

/// W-9: T1's load holds the only room and fails; T2's load of another key waits for room. The
/// debit of T1's released reservation must wake T2.
pub(super) fn debit_wakes_the_waiter<R: SimRuntime>(rt: R) {
    let world = CacheWorld::hard(rt, CAP, 1);
    let loads = Loads::new(&world);
    let t1 = spawn_load(&world, &loads, "T1", 0, "a", Outcome::Fails);
    let t2 = spawn_load(&world, &loads, "T2", 0, "b", Outcome::Loads);
    let (got1, got2) = (join::<R, _>(t1), join::<R, _>(t2));
    ensure!(
        matches!(got1, Some(Err(CacheError::Load { .. }))),
        "contract",
        "T1's failing load gave {got1:?}"
    );
    ensure!(matches!(got2, Some(Ok(()))), "contract", "T2's load gave {got2:?}");
    no_deadline_passed(&world.rt);
    finish_within_cap(&world);
}

/// W-10: `a` fills the budget and the main thread holds it locked; T2 loads `b` and waits for
/// room; T1 unlocks `a`, leaving it evictable. That release must wake T2, which evicts `a`.
pub(super) fn release_wakes_the_waiter<R: SimRuntime>(rt: R) {
    release_while_a_load_seeks_room(rt, true);
}

/// W-10w: W-10 without T1's head start for T2, so that the release may land between T2's look
/// for room and its wait, under loom too (a thread that gives way lets the others run to their
/// blocking point first): a release wakes only the waits that watch, so T2 must watch before
/// it looks.
pub(super) fn release_racing_the_look_wakes_the_waiter<R: SimRuntime>(rt: R) {
    release_while_a_load_seeks_room(rt, false);
}

/// W-10's world: T2 loads `b` while `a`, locked, fills the budget; T1 unlocks `a` (after giving
/// T2 a head start if `head_start`). T2 loads without a deadline passing.
fn release_while_a_load_seeks_room<R: SimRuntime>(rt: R, head_start: bool) {
    let world = CacheWorld::hard(rt, CAP, 1);
    let loads = Loads::new(&world);
    let guard = world.caches[0]
        .get_or_put("a", BYTES, || Ok::<_, &str>(Weights::plain(BYTES)))
        .expect("setup load")
        .lock();
    let started = Arc::new(Latch::new(&world.rt));
    let t2 = {
        let (c0, loads, started): (Cache<R>, _, _) =
            (Arc::clone(&world.caches[0]), Arc::clone(&loads), Arc::clone(&started));
        world.spawn("T2", move |_, _| {
            started.add(1);
            trace::record("T2", "get_or_put(b)");
            c0.get_or_put("b", BYTES, || loads.run("T2", Outcome::Loads)).map(drop)
        })
    };
    let t1 = world.spawn("T1", move |_, _| {
        started.wait_for(1);
        if head_start {
            give_way::<R>(HEAD_START);
        }
        trace::record("T1", "unlock(a)");
        drop(guard);
    });
    join::<R, _>(t1);
    let got = join::<R, _>(t2);
    ensure!(got.is_ok(), "contract", "T2's load gave {got:?}");
    no_deadline_passed(&world.rt);
    finish_within_cap(&world);
}

/// C-B4: `a` (60) is resident and idle on cuda:1 under a hard cap of 100; T1 loads `b` (60)
/// on cuda:0, which must ask cuda:1 for room, while T2 keeps cuda:1 busy with short
/// operations. When T1's request finds cuda:1's lock held, cuda:1's next release honours it
/// (T1 still looks for room, though it may not wait yet): `a` goes and T1 loads without
/// sleeping out its room wait (no deadline passes).
pub(super) fn busy_peer_honours_a_room_request<R: SimRuntime>(rt: R) {
    let world = CacheWorld::hard(rt, CAP, 2);
    drop(
        world.caches[1].get_or_put("a", BYTES, || Ok::<_, &str>(Weights::plain(BYTES))).expect("setup load"),
    );
    let loads = Loads::new(&world);
    let c0: Cache<R> = Arc::clone(&world.caches[0]);
    let t1 = world.spawn("T1", move |_, _| {
        trace::record("T1", "get_or_put(b) on cuda:0");
        c0.get_or_put("b", BYTES, || loads.run("T1", Outcome::Loads)).map(drop)
    });
    let c1: Cache<R> = Arc::clone(&world.caches[1]);
    let t2 = world.spawn("T2", move |_, _| {
        // Each holds cuda:1's state lock across a look at the budget (a scheduling point).
        for _ in 0..6 {
            trace::record("T2", "make_room(0) on cuda:1");
            c1.make_room(0);
        }
    });
    let loaded = join::<R, _>(t1);
    join::<R, _>(t2);
    ensure!(loaded.is_ok(), "contract", "T1's load of b gave {loaded:?}");
    no_deadline_passed(&world.rt);
    finish(&world);
}

/// W-21: on cuda:1, `a` (40) is idle and `y` (40) is held by the main thread and locked by T2
/// and T3, under a hard cap of 100. T1 loads `b` (60) on cuda:0, which needs `a`'s room and asks
/// cuda:1 for it, while T2 and T3 panic with their guards on `y`: each release runs while its
/// thread unwinds, when no user code may run, so it leaves a request it finds unhonoured. It
/// must tell T1 to look again (cuda:1's lock is free then): T1 evicts `a` and loads without
/// sleeping out its room wait.
pub(super) fn unwinding_release_wakes_the_waiter<R: SimRuntime>(rt: R) {
    const SMALL: u64 = 40;
    let world = CacheWorld::hard(rt, CAP, 2);
    let c1: Cache<R> = Arc::clone(&world.caches[1]);
    drop(c1.get_or_put("a", SMALL, || Ok::<_, &str>(Weights::plain(SMALL))).expect("setup load"));
    drop(c1.get_or_put("y", SMALL, || Ok::<_, &str>(Weights::plain(SMALL))).expect("setup load"));
    let held = c1.get("y").expect("y is resident");
    let loads = Loads::new(&world);
    let started = Arc::new(Latch::new(&world.rt));
    let c0: Cache<R> = Arc::clone(&world.caches[0]);
    let begun = Arc::clone(&started);
    let t1 = world.spawn("T1", move |_, _| {
        begun.add(1);
        trace::record("T1", "get_or_put(b) on cuda:0");
        c0.get_or_put("b", BYTES, || loads.run("T1", Outcome::Loads)).map(drop)
    });
    // T2 gives T1 a head start (random schedules then often overlap them), T3 none (PCT does).
    let panicking = |thread: &'static str, head_start: usize| {
        let (guard, started) = (c1.get("y").expect("y is resident").lock(), Arc::clone(&started));
        world.spawn(thread, move |_, _| {
            if head_start > 0 {
                started.wait_for(1);
                give_way::<R>(head_start);
            }
            trace::record(thread, "panics holding a guard of y (released while unwinding)");
            catching(|| {
                let _guard = guard;
                std::panic::panic_any(InjectedPanic)
            })
        })
    };
    let (t2, t3) = (panicking("T2", HEAD_START), panicking("T3", 0));
    let loaded = join::<R, _>(t1);
    join::<R, _>(t2);
    join::<R, _>(t3);
    drop(held);
    ensure!(loaded.is_ok(), "contract", "T1's load of b gave {loaded:?}");
    no_deadline_passed(&world.rt);
    finish(&world);
}

/// W-22: under a hard cap of 100, cuda:1 holds `a` (40, least recently used) and `m` (40), and
/// cuda:2 shares `m`'s weights, held by the main thread. T1 loads `b` (60) on cuda:0, which
/// needs `a`'s room and asks cuda:1 for it; T2 drops `m`, and cuda:1's eviction callback
/// panics for it. Taking out cuda:1's `m` frees nothing (cuda:2 still holds its weights), so
/// the drop's finish must honour the room request T1 left while it held cuda:1's lock, panic
/// or not: T1 loads without sleeping out its room wait, and the panic reaches T2.
pub(super) fn panicking_drop_finish_honours_the_room_request<R: SimRuntime>(rt: R) {
    const SMALL: u64 = 40;
    let world = CacheWorld::hard(rt, CAP, 3);
    let (c1, c2): (Cache<R>, Cache<R>) = (Arc::clone(&world.caches[1]), Arc::clone(&world.caches[2]));
    for key in ["a", "m"] {
        drop(c1.get_or_put(key, SMALL, || Ok::<_, &str>(Weights::plain(SMALL))).expect("setup load"));
    }
    drop(c2.get_or_put("m", SMALL, || Ok::<_, &str>(Weights::plain(SMALL))).expect("adopts m"));
    let held = c2.get("m").expect("m is resident on cuda:2");
    c1.on_evict(|key, _| {
        if key == "m" {
            std::panic::panic_any(InjectedPanic)
        }
    });
    let loads = Loads::new(&world);
    let c0: Cache<R> = Arc::clone(&world.caches[0]);
    let t1 = world.spawn("T1", move |_, _| {
        trace::record("T1", "get_or_put(b) on cuda:0");
        c0.get_or_put("b", BYTES, || loads.run("T1", Outcome::Loads)).map(drop)
    });
    let group = Arc::clone(&world.group);
    let t2 = world.spawn("T2", move |_, _| {
        trace::record("T2", "drop_model(m): cuda:1's eviction callback panics for it");
        let dropped = catching(|| group.drop_model("m"));
        ensure!(
            dropped.is_none(),
            "contract",
            "drop_model(m) returned {dropped:?} past a panicking callback"
        );
    });
    let loaded = join::<R, _>(t1);
    join::<R, _>(t2);
    drop(held);
    ensure!(loaded.is_ok(), "contract", "T1's load of b gave {loaded:?}");
    no_deadline_passed(&world.rt);
    finish(&world);
}

/// W-23: under a hard cap of 100, cuda:0 holds `k` (60, least recently used) and `z` (40),
/// idle. T1 loads `b` (40) on cuda:0: taking `k` out looks like room enough. T2 gets `k` on
/// cuda:1 and holds it until T1 is done: if it adopts `k`'s weights between T1's taking `k` out
/// and dropping it, the drop gives nothing back. T1 must then evict `z` rather than wait for a
/// change that comes only with T2's release (after T1's load): it loads without sleeping out
/// its room wait.
pub(super) fn a_room_round_looks_again_when_its_eviction_gave_nothing_back<R: SimRuntime>(rt: R) {
    eviction_gives_nothing_back(rt, 0);
}

/// W-23p: W-23 with the records on a peer. cuda:1 holds `k` and `z`, cuda:0 nothing: T1's
/// load on cuda:0 asks cuda:1 for room, and T2 adopts `k` on cuda:2. If the eviction gives
/// nothing back, T1 must ask again (cuda:1 then evicts `z`) rather than wait.
pub(super) fn a_peer_asked_again_when_its_eviction_gave_nothing_back<R: SimRuntime>(rt: R) {
    eviction_gives_nothing_back(rt, 1);
}

/// W-23 (`holder` 0: the records on the loading cache) and W-23p (`holder` 1: on a peer).
fn eviction_gives_nothing_back<R: SimRuntime>(rt: R, holder: usize) {
    let world = CacheWorld::hard(rt, CAP, holder + 2);
    let records: Cache<R> = Arc::clone(&world.caches[holder]);
    for (key, bytes) in [("k", BYTES), ("z", 40)] {
        drop(records.get_or_put(key, bytes, || Ok::<_, &str>(Weights::plain(bytes))).expect("setup load"));
    }
    let done = world.mailbox();
    let posted = Arc::clone(&done);
    let c0: Cache<R> = Arc::clone(&world.caches[0]);
    let t1 = world.spawn("T1", move |_, _| {
        trace::record("T1", "get_or_put(b) on cuda:0");
        let loaded = c0.get_or_put("b", 40, || Ok::<_, &str>(Weights::plain(40))).map(drop);
        posted.post(());
        loaded
    });
    let adopter: Cache<R> = Arc::clone(&world.caches[holder + 1]);
    let t2 = world.spawn("T2", move |_, _| {
        trace::record("T2", format!("get_or_put(k) on {}, held until T1 is done", adopter.device()));
        let held = adopter.get_or_put("k", BYTES, || Ok::<_, &str>(Weights::plain(BYTES)));
        done.wait();
        drop(held);
    });
    let loaded = join::<R, _>(t1);
    join::<R, _>(t2);
    ensure!(loaded.is_ok(), "contract", "T1's load of b gave {loaded:?}");
    no_deadline_passed(&world.rt);
    finish(&world);
}
