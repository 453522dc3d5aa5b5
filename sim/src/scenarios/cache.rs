//! Shared-weight cache scenarios: shutdown, holds, admissions, identity, reconcile, adoption.
//! Every run ends with A1 (accounting) and A6 (nothing left once every handle is gone); threads
//! check A2 (one live canonical per key) and A5 (a locked record is resident) as they go.

use resident::cache::{CanonicalId, DeviceCache, ModelGuard, PutOptions};
use resident::runtime::Arc;

use crate::ensure;
use crate::runtime::{Counter, SimRuntime};
use crate::trace;
use crate::unwinding::catch;
use crate::violation::InjectedPanic;
use crate::world::cache::{CacheWorld, Weights};
use crate::world::checks::ensure_resident;
use crate::world::join;
use crate::world::mailbox::Mailbox;

pub(super) type Cache<R> = Arc<DeviceCache<Weights<R>, R>>;

/// Admits and locks `key` (`bytes`) in `cache`.
pub(super) fn load<R: SimRuntime>(
    cache: &Cache<R>,
    key: &str,
    bytes: u64,
    thread: &str,
) -> ModelGuard<Weights<R>, R> {
    trace::record(thread, format!("put({key}) on {}", cache.device()));
    let admission = cache.put(key, Weights::plain(bytes), bytes, PutOptions::default());
    ensure!(admission.is_ok(), "contract", "{thread}: put({key}) gave {admission:?}");
    let guard = admission.expect("checked").into_loaded().lock();
    ensure_resident(cache, &guard, thread);
    guard
}

/// Leaves `key` resident and idle in `cache`.
pub(super) fn preload<R: SimRuntime>(cache: &Cache<R>, key: &str, bytes: u64) {
    drop(cache.put(key, Weights::plain(bytes), bytes, PutOptions::default()).expect("setup put"));
}

/// Joins every scenario thread, then runs the end-of-run checks.
fn join_then_finish<R: SimRuntime, const N: usize>(world: &CacheWorld<R>, threads: [R::Handle<()>; N]) {
    for thread in threads {
        join::<R, _>(thread);
    }
    finish(world);
}

pub(super) fn finish<R: SimRuntime>(world: &CacheWorld<R>) {
    world.check_accounting();
    world.check_drained();
}

fn shutdown_thread<R: SimRuntime>(world: &CacheWorld<R>, cache: usize) -> R::Handle<()> {
    let cache = Arc::clone(&world.caches[cache]);
    world.spawn("T0", move |_, _| {
        trace::record("T0", format!("shutdown({})", cache.device()));
        cache.shutdown();
    })
}

/// One cache (with `m` preloaded if `preload`), one user thread T1 running `user`, and T0
/// shutting the cache down at any point; then A1 and A6.
fn user_against_shutdown<R: SimRuntime>(
    rt: R,
    cap: u64,
    preload_m: bool,
    user: impl FnOnce(Cache<R>) + Send + 'static,
) {
    let world = CacheWorld::new(rt, cap, 1);
    if preload_m {
        preload(&world.caches[0], "m", 30);
    }
    let c0 = Arc::clone(&world.caches[0]);
    let t1 = world.spawn("T1", move |_, _| user(c0));
    let t0 = shutdown_thread(&world, 0);
    join_then_finish(&world, [t1, t0]);
}

/// C-R1: T1 uses m on cuda:0 while cuda:0 shuts down and cuda:1 reloads m: the reload adopts T1's
/// canonical (one copy, counted once).
pub(super) fn shutdown_keeps_weights<R: SimRuntime>(rt: R) {
    shutdown_between_get_and_lock(rt, true, false);
}

/// C-R3: shutdown lands inside m's admission window; the loader still gets its record.
pub(super) fn shutdown_in_admission_window<R: SimRuntime>(rt: R) {
    user_against_shutdown(rt, 100, false, |c0: Cache<R>| {
        let admission =
            c0.put("m", Weights::plain(30), 30, PutOptions::default()).expect("put before or after shutdown");
        R::yield_now();
        let guard = admission.into_loaded().lock();
        ensure_resident(&c0, &guard, "T1");
    });
}

/// C-R5 / C-R14: shutdown between the lookup of `get` and the first lock; with a peer reload
/// (C-R14) the reload must adopt the same canonical.
fn shutdown_between_get_and_lock<R: SimRuntime>(rt: R, peer_reload: bool, in_one_step: bool) {
    let world = CacheWorld::new(rt, 100, 2);
    preload(&world.caches[0], "m", 30);
    let (held, reloaded) = (world.mailbox(), world.signal());
    let (c0, h1, r1) = (Arc::clone(&world.caches[0]), Arc::clone(&held), Arc::clone(&reloaded));
    let t1 = world.spawn("T1", move |_, _| {
        let guard = if in_one_step {
            c0.get_locked("m")
        } else {
            c0.get("m").map(|loaded| {
                R::yield_now();
                loaded.lock()
            })
        };
        let Some(guard) = guard else { return h1.post(None) };
        ensure_resident(&c0, &guard, "T1");
        h1.post(guard.canonical_id());
        if peer_reload {
            r1.wait();
        }
        ensure_resident(&c0, &guard, "T1");
    });
    let t0 = shutdown_thread(&world, 0);
    let t2 = peer_reload.then(|| {
        let (c1, h2, r2) = (Arc::clone(&world.caches[1]), Arc::clone(&held), Arc::clone(&reloaded));
        world.spawn("T2", move |_, _| {
            let theirs = h2.wait();
            let guard = load(&c1, "m", 30, "T2");
            if let Some(theirs) = theirs {
                ensure!(
                    guard.canonical_id() == Some(theirs),
                    "A2",
                    "cuda:1 copied m while T1 held its canonical"
                );
            }
            r2.post(());
        })
    });
    join::<R, _>(t1);
    join::<R, _>(t0);
    if let Some(t2) = t2 {
        join::<R, _>(t2);
    }
    finish(&world);
}

/// C-R5.
pub(super) fn shutdown_before_first_lock<R: SimRuntime>(rt: R) {
    shutdown_between_get_and_lock(rt, false, false);
}

/// C-R14.
pub(super) fn hold_armed_with_lookup<R: SimRuntime>(rt: R) {
    shutdown_between_get_and_lock(rt, true, false);
}

/// C-R5l: C-R5 with `get_locked`, the lookup and the lock in one critical section.
pub(super) fn locked_with_lookup<R: SimRuntime>(rt: R) {
    shutdown_between_get_and_lock(rt, false, true);
}

/// C-R5c: C-R5 with an eviction for room in place of the shutdown. T1's hold becomes a lock
/// while T0's put makes room by evicting the least recently used free record: m is held, then
/// locked, never free on the way, so T0 takes it only once T1's guard is gone.
pub(super) fn lock_against_eviction_for_room<R: SimRuntime>(rt: R) {
    let world = CacheWorld::new(rt, 50, 1);
    preload(&world.caches[0], "m", 30);
    let c0 = Arc::clone(&world.caches[0]);
    let t1 = world.spawn("T1", move |_, _| {
        trace::record("T1", "get(m), then lock");
        let Some(loaded) = c0.get("m") else { return };
        R::yield_now();
        let guard = loaded.lock();
        ensure_resident(&c0, &guard, "T1");
    });
    let c0 = Arc::clone(&world.caches[0]);
    let t0 = world.spawn("T0", move |_, _| {
        trace::record("T0", "put(n): room for it only without m");
        let admission = c0.put("n", Weights::plain(30), 30, PutOptions::default());
        ensure!(admission.is_ok(), "contract", "T0: put(n) gave {admission:?}");
    });
    join_then_finish(&world, [t1, t0]);
}

/// C-R5s: a lock is a use, and counts in the LRU order. T1 gets A, gets B, then locks A, and
/// lets both go: A was used last. T2 puts C meanwhile (room for it); once both are done, a put
/// of D evicts the least recently used record, which is B or C, never A.
pub(super) fn lock_use_stamped<R: SimRuntime>(rt: R) {
    let world = CacheWorld::new(rt, 90, 1);
    preload(&world.caches[0], "A", 30);
    preload(&world.caches[0], "B", 30);
    let c0 = Arc::clone(&world.caches[0]);
    let t1 = world.spawn("T1", move |_, _| {
        trace::record("T1", "get(A), get(B), lock A, let both go");
        let a = c0.get("A").expect("A is resident until D's put");
        let b = c0.get("B");
        let guard = a.lock();
        drop(b);
        drop(guard);
    });
    let c0 = Arc::clone(&world.caches[0]);
    let t2 = world.spawn("T2", move |_, _| {
        trace::record("T2", "put(C): room for it");
        preload(&c0, "C", 30);
    });
    join::<R, _>(t1);
    join::<R, _>(t2);
    let c0 = &world.caches[0];
    trace::record("main", "put(D): evicts the least recently used");
    preload(c0, "D", 30);
    let keys = c0.keys();
    ensure!(keys.iter().any(|k| k == "A"), "3.2", "A, locked after B was got, was evicted first: {keys:?}");
    finish(&world);
}

/// C-R6: a holder dropped unused after shutdown still releases: the stale record goes.
pub(super) fn abandoned_holder<R: SimRuntime>(rt: R) {
    user_against_shutdown(rt, 100, true, |c0: Cache<R>| {
        let loaded = c0.get("m");
        R::yield_now();
        drop(loaded);
    });
}

/// C-R12: a loader cancelled between `put` and `get`, before or after shutdown, still releases.
pub(super) fn cancelled_admission<R: SimRuntime>(rt: R) {
    user_against_shutdown(rt, 100, false, |c0: Cache<R>| {
        let admission = c0.put("m", Weights::plain(30), 30, PutOptions::default());
        R::yield_now();
        drop(admission);
    });
}

/// C-R13: a prefetch after shutdown is refused; before it, it is an ordinary admission.
pub(super) fn prefetch_after_shutdown<R: SimRuntime>(rt: R) {
    user_against_shutdown(rt, 100, false, |c0: Cache<R>| {
        let prefetch =
            c0.put("m", Weights::plain(30), 30, PutOptions { prefetch: true, ..PutOptions::default() });
        let refused = matches!(prefetch, Err(resident::CacheError::ShutDown { .. }));
        ensure!(prefetch.is_ok() || refused, "contract", "prefetch gave {prefetch:?}");
        ensure!(!refused || c0.is_shut_down(), "contract", "prefetch refused before shutdown");
    });
}

/// C-R7: a sibling admission (and its make_room) must not strip or evict a held record.
pub(super) fn sibling_admission<R: SimRuntime>(rt: R) {
    let world = CacheWorld::new(rt, 50, 1);
    preload(&world.caches[0], "first", 30);
    let c0 = Arc::clone(&world.caches[0]);
    let t1 = world.spawn("T1", move |_, _| {
        let Some(first) = c0.get("first") else { return };
        let second = load(&c0, "second", 30, "T1");
        drop(second);
        let first = first.lock();
        ensure_resident(&c0, &first, "T1");
    });
    let t0 = shutdown_thread(&world, 0);
    join_then_finish(&world, [t1, t0]);
}

/// C-R8: a stale record's unlock must not evict it while a second holder exists.
pub(super) fn stale_unlock_with_second_holder<R: SimRuntime>(rt: R) {
    let world = CacheWorld::new(rt, 100, 1);
    preload(&world.caches[0], "m", 30);
    let (holding, down) = (world.signal(), world.signal());
    let first = world.caches[0].get("m").expect("preloaded").lock();
    let (c0, h2) = (Arc::clone(&world.caches[0]), Arc::clone(&holding));
    let t2 = world.spawn("T2", move |_, _| {
        let Some(loaded) = c0.get("m") else { return h2.post(()) };
        h2.post(()); // only the post matters here
        R::yield_now();
        let guard = loaded.lock();
        ensure_resident(&c0, &guard, "T2");
    });
    let (c0, d0) = (Arc::clone(&world.caches[0]), Arc::clone(&down));
    let t0 = world.spawn("T0", move |_, _| {
        c0.shutdown();
        d0.post(());
    });
    holding.wait();
    down.wait();
    drop(first);
    join_then_finish(&world, [t2, t0]);
}

/// C-R9: a holder panics while locked, another while holding: unwinding releases everything.
pub(super) fn holder_panics<R: SimRuntime>(rt: R) {
    let world = CacheWorld::new(rt, 100, 1);
    preload(&world.caches[0], "m", 30);
    let spawn_panicker = |name: &'static str, lock: bool| {
        let c0 = Arc::clone(&world.caches[0]);
        world.spawn(name, move |_, _| {
            let caught = catch(|| {
                let loaded = c0.get("m");
                let _guard = loaded.map(|l| {
                    if lock {
                        Some(l.lock())
                    } else {
                        drop(l);
                        None
                    }
                });
                R::yield_now();
                std::panic::panic_any(InjectedPanic);
            });
            ensure!(
                caught.is_err_and(|p| p.is::<InjectedPanic>()),
                "contract",
                "{name}: the injected panic was lost"
            );
        })
    };
    let (t1, t2) = (spawn_panicker("T1", true), spawn_panicker("T2", false));
    let t0 = shutdown_thread(&world, 0);
    join_then_finish(&world, [t1, t2, t0]);
}

/// C-R4 / C-R27: m is dropped while in use and re-admitted in the same cache and a peer: the
/// re-admission gets fresh weights, and the old record's last release touches only itself, and
/// evicts it from cuda:0: reported then, once (3.7).
pub(super) fn drop_model_during_use<R: SimRuntime>(rt: R) {
    let world = CacheWorld::new(rt, 200, 2);
    let reported = Arc::new(R::counter_for_model());
    let count = Arc::clone(&reported);
    world.caches[0].on_evict(move |_, _| {
        count.add(1);
    });
    preload(&world.caches[0], "m", 30);
    let (dropped, loaded, released) = (world.signal(), world.signal(), world.signal());
    let old = world.caches[0].get("m").expect("preloaded").lock();
    let old_id = old.canonical_id();
    let (c0, c1) = (Arc::clone(&world.caches[0]), Arc::clone(&world.caches[1]));
    let (d2, l2, r2) = (Arc::clone(&dropped), Arc::clone(&loaded), Arc::clone(&released));
    let t2 = world.spawn("T2", move |_, _| {
        d2.wait();
        let fresh = load(&c0, "m", 40, "T2");
        let peer = load(&c1, "m", 40, "T2");
        // The old canonical is still alive (held by the main thread): identities are comparable.
        ensure!(fresh.canonical_id() != old_id, "A2", "the rebuild adopted the dropped canonical");
        ensure!(peer.canonical_id() == fresh.canonical_id(), "A2", "two live canonicals for the rebuilt m");
        l2.post(());
        r2.wait();
        c0.make_room(200);
        ensure_resident(&c0, &fresh, "T2");
    });
    let (c0, d0) = (Arc::clone(&world.caches[0]), Arc::clone(&dropped));
    let t0 = world.spawn("T0", move |_, _| {
        trace::record("T0", "drop_model(m)");
        c0.drop_model("m");
        d0.post(());
    });
    loaded.wait();
    trace::record("main", "drop(old m)");
    drop(old);
    released.post(());
    join_then_finish(&world, [t2, t0]);
    let evictions = world.caches[0].stats().evictions;
    let called = reported.get();
    ensure!(
        called as u64 == evictions,
        "A4",
        "cuda:0 counted {evictions} evictions and called back {called}"
    );
}

/// C-R18: cuda:0 is over the budget with a locked record when cuda:1 asks it for room; its
/// unlock, later, must honour the request: the budget is back under its cap at quiescence.
pub(super) fn contended_peer_reconcile<R: SimRuntime>(rt: R) {
    let world = CacheWorld::new(rt, 50, 2);
    preload(&world.caches[0], "a", 30);
    let a = world.caches[0].get("a").expect("preloaded").lock();
    // Over the cap: a is locked on cuda:0 and b on cuda:1.
    let b = world.caches[1]
        .put("b", Weights::plain(30), 30, PutOptions::default())
        .expect("setup put")
        .into_loaded()
        .lock();
    let c1 = Arc::clone(&world.caches[1]);
    let t1 = world.spawn("T1", move |_, _| {
        trace::record("T1", "make_room(10) on cuda:1");
        c1.make_room(10);
        drop(b);
    });
    let t2 = world.spawn("T2", move |_, _| {
        R::yield_now();
        trace::record("T2", "unlock a on cuda:0");
        drop(a);
    });
    join::<R, _>(t1);
    join::<R, _>(t2);
    world.check_within_cap("a deferred reconcile was lost");
    finish(&world);
}

/// C-R19: T1's admission on cuda:0 overshoots while T2 is inside an operation on cuda:1, whose
/// idle record must go. T1's try of cuda:1's lock may fail; T2, releasing, must then see the flag
/// T1 set before trying. Checked at quiescence, with T1's model still locked.
pub(super) fn reconcile_no_lost_wakeup<R: SimRuntime>(rt: R) {
    let world = CacheWorld::new(rt, 50, 2);
    preload(&world.caches[1], "b", 30);
    let c0 = Arc::clone(&world.caches[0]);
    let t1 = world.spawn("T1", move |_, _| load(&c0, "a", 30, "T1"));
    let c1 = Arc::clone(&world.caches[1]);
    let t2 = world.spawn("T2", move |_, _| {
        for _ in 0..3 {
            trace::record("T2", "stats() on cuda:1");
            c1.stats();
        }
    });
    let a = join::<R, _>(t1);
    join::<R, _>(t2);
    world.check_within_cap("cuda:1 missed a reconcile request (lost wakeup)");
    drop(a);
    finish(&world);
}

/// C-R21: two admissions on cuda:0 each overshoot and ask cuda:1 (two idle records) to
/// reconcile. The second request may land while the first reconcile still holds cuda:1's lock,
/// after its eviction loop saw the budget satisfied: that reconcile's clear must not erase it.
pub(super) fn reconcile_flag_survives_clear<R: SimRuntime>(rt: R) {
    let world = CacheWorld::new(rt, 50, 2);
    preload(&world.caches[1], "b", 20);
    preload(&world.caches[1], "c", 20);
    let spawn_loader = |name: &'static str, key: &'static str| {
        let c = Arc::clone(&world.caches[0]);
        world.spawn(name, move |_, _| load(&c, key, 20, name))
    };
    let (t1, t2) = (spawn_loader("T1", "a"), spawn_loader("T2", "d"));
    let locked = (join::<R, _>(t1), join::<R, _>(t2));
    world.check_within_cap("a reconcile's clear erased a request made while it ran");
    drop(locked);
    finish(&world);
}

/// C-R22: a cache over the budget because of its own locked record reconciles at its unlock.
pub(super) fn own_overshoot<R: SimRuntime>(rt: R) {
    let world = CacheWorld::new(rt, 50, 1);
    let both = (world.signal(), world.signal());
    let spawn_user =
        |name: &'static str, key: &'static str, mine: &Arc<Mailbox<R, ()>>, theirs: &Arc<Mailbox<R, ()>>| {
            let (c0, mine, theirs) = (Arc::clone(&world.caches[0]), Arc::clone(mine), Arc::clone(theirs));
            world.spawn(name, move |_, _| {
                let guard = load(&c0, key, 30, name);
                mine.post(());
                theirs.wait(); // both locked at once: the cache is over its cap by its own records
                drop(guard);
            })
        };
    let t1 = spawn_user("T1", "a", &both.0, &both.1);
    let t2 = spawn_user("T2", "b", &both.1, &both.0);
    join::<R, _>(t1);
    join::<R, _>(t2);
    world.check_within_cap("the last unlock did not reconcile the cache's own overshoot");
    finish(&world);
}

/// C-R23: a reconcile after m's admission must not evict m before its first use.
pub(super) fn reconcile_spares_admission<R: SimRuntime>(rt: R) {
    let world = CacheWorld::new(rt, 40, 1);
    preload(&world.caches[0], "y", 30);
    let y = world.caches[0].get("y").expect("preloaded").lock();
    let admitted = world.signal();
    let (c0, a1) = (Arc::clone(&world.caches[0]), Arc::clone(&admitted));
    let t1 = world.spawn("T1", move |_, _| {
        let admission = c0.put("m", Weights::plain(30), 30, PutOptions::default()).expect("fits the cap");
        a1.post(());
        R::yield_now();
        let guard = admission.into_loaded().lock();
        ensure_resident(&c0, &guard, "T1");
    });
    admitted.wait();
    drop(world.caches[0].get("y")); // touch y: m is now the least recently used
    drop(y); // the release reconciles: y may go, m may not
    join_then_finish(&world, [t1]);
}

/// C-R26: caches dropped without shutdown release everything; nothing stays pinned meanwhile.
pub(super) fn dropped_without_shutdown<R: SimRuntime>(rt: R) {
    let world = CacheWorld::new(rt, 100, 2);
    let spawn_user = |name: &'static str, cache: usize| {
        let c = Arc::clone(&world.caches[cache]);
        world.spawn(name, move |_, _| {
            let admission = c.put("m", Weights::plain(30), 30, PutOptions::default());
            R::yield_now();
            drop(admission);
            drop(c.get("m"));
        })
    };
    let (t1, t2) = (spawn_user("T1", 0), spawn_user("T2", 1));
    join::<R, _>(t1);
    join::<R, _>(t2);
    for cache in &world.caches {
        cache.make_room(world.group.budget().cap());
        ensure!(
            cache.keys().is_empty(),
            "A6",
            "{} keeps {:?} pinned with no handle left",
            cache.device(),
            cache.keys()
        );
    }
    let group = Arc::clone(&world.group);
    drop(world);
    ensure!(
        group.budget().in_use() == 0,
        "A6",
        "{} bytes counted after every cache was dropped",
        group.budget().in_use()
    );
}

/// C-R28: two peers load m at once: one canonical, whoever wins the race.
pub(super) fn adoption_race<R: SimRuntime>(rt: R) {
    let world = CacheWorld::new(rt, 100, 2);
    let (from0, from1) = (world.mailbox(), world.mailbox());
    let spawn_loader = |name: &'static str,
                        cache: usize,
                        mine: Arc<Mailbox<R, Option<CanonicalId>>>,
                        theirs: Arc<Mailbox<R, Option<CanonicalId>>>| {
        let c = Arc::clone(&world.caches[cache]);
        world.spawn(name, move |_, _| {
            let guard = load(&c, "m", 30, name);
            mine.post(guard.canonical_id());
            let other = theirs.wait();
            ensure!(
                other == guard.canonical_id(),
                "A2",
                "{name} and its peer hold two live canonicals for m"
            );
        })
    };
    let t1 = spawn_loader("T1", 0, Arc::clone(&from0), Arc::clone(&from1));
    let t2 = spawn_loader("T2", 1, from1, from0);
    join_then_finish(&world, [t1, t2]);
}

/// C-K1: keep-alive expiry racing a get-then-lock, and shutdown cancelling keep-alive for good.
pub(super) fn keep_alive<R: SimRuntime>(rt: R) {
    let world = CacheWorld::new(rt, 100, 1);
    let ten = std::time::Duration::from_secs(10);
    ensure!(world.caches[0].set_keep_alive(Some(ten)), "contract", "keep-alive refused before shutdown");
    preload(&world.caches[0], "m", 30);
    let c0 = Arc::clone(&world.caches[0]);
    let t1 = world.spawn("T1", move |_, _| {
        let Some(loaded) = c0.get("m") else { return };
        R::yield_now();
        let guard = loaded.lock();
        ensure_resident(&c0, &guard, "T1");
    });
    let (c0, rt) = (Arc::clone(&world.caches[0]), world.rt.clone());
    let t0 = world.spawn("T0", move |_, _| {
        trace::record("T0", "20 s pass; expire_idle()");
        rt.advance_clock(2 * ten);
        c0.expire_idle();
    });
    let c0 = Arc::clone(&world.caches[0]);
    let t3 = world.spawn("T3", move |_, _| {
        trace::record("T3", "shutdown()");
        c0.shutdown();
        ensure!(c0.keep_alive().is_none(), "K1", "keep-alive survived shutdown");
        ensure!(!c0.set_keep_alive(Some(ten)), "K1", "keep-alive re-armed after shutdown");
    });
    join_then_finish(&world, [t1, t0, t3]);
}

/// C-R2: a shared record in use at shutdown is evicted at its last release with its bytes
/// debited as shared (by its canonical), never from the cache's private count.
pub(super) fn shared_debit_after_shutdown<R: SimRuntime>(rt: R) {
    let world = CacheWorld::new(rt, 100, 1);
    preload(&world.caches[0], "m", 30);
    let private = PutOptions { shared: false, ..PutOptions::default() };
    drop(world.caches[0].put("p", Weights::plain(20), 20, private).expect("setup put"));
    let m = world.caches[0].get("m").expect("preloaded").lock();
    let p = world.caches[0].get("p").expect("preloaded").lock();
    let down = world.signal();
    let (c0, d0) = (Arc::clone(&world.caches[0]), Arc::clone(&down));
    let t0 = world.spawn("T0", move |_, _| {
        trace::record("T0", "shutdown()");
        c0.shutdown();
        d0.post(());
    });
    let (c0, d1) = (Arc::clone(&world.caches[0]), Arc::clone(&down));
    let t1 = world.spawn("T1", move |_, _| {
        d1.wait();
        trace::record("T1", "unlock m (stale, shared)");
        drop(m);
        let private = c0.non_shared_bytes();
        ensure!(
            private == 20,
            "A1",
            "the private count is {private} after a shared record's eviction; p still holds 20"
        );
        drop(p);
    });
    join_then_finish(&world, [t0, t1]);
}
