//! Keep-alive timer scenarios (SPEC 3.8; `C-B3`, `W-11`, `W-12`, `W-15`): idle records expire with no
//! other call, a shutdown cancels its cache's expiry for good and lets the timer thread exit,
//! and every change that brings a deadline forward wakes the sleeping timer.
//!
//! The timer thread is started by the code under test through the runtime facade; the
//! execution joins it before it ends, so a timer that never exits is a deadlock. Under
//! [`Time::Auto`](crate::runtime::Time::Auto) its sleep ends only once every scenario thread is
//! blocked — the main thread waiting for an eviction it did not ask for — and a sleep ended by
//! its deadline although a change was posted is a lost wakeup.

use std::time::Duration;

use resident::cache::{CacheGroup, PutOptions};
use resident::runtime::Arc;

use super::cache::{Cache, finish, preload};
use super::wakeups::{HEAD_START, give_way};
use crate::instrumentation;
use crate::runtime::SimRuntime;
use crate::world::cache::{CacheWorld, Weights};
use crate::world::join;
use crate::world::mailbox::Mailbox;
use crate::{ensure, trace};

/// The keep-alive of every cache here.
const KEEP_ALIVE: Duration = Duration::from_secs(10);
/// Every model's size (two fit the cap of 100).
const BYTES: u64 = 30;

/// A mailbox posted when `cache` evicts `key`, whoever evicts it.
fn on_eviction_of<R: SimRuntime>(
    world: &CacheWorld<R>,
    cache: &Cache<R>,
    key: &'static str,
) -> Arc<Mailbox<R, ()>> {
    let evicted = world.mailbox();
    let post = Arc::clone(&evicted);
    cache.on_evict(move |gone, _| {
        if gone == key {
            post.post(());
        }
    });
    evicted
}

/// Sets the keep-alive of `cache`, which must be accepted.
fn keep_alive<R: SimRuntime>(cache: &Cache<R>, keep_alive: Duration) {
    ensure!(cache.set_keep_alive(Some(keep_alive)), "contract", "keep-alive refused before shutdown");
}

/// Spawns `thread`, which admits `key` on `cache` and lets it go: the record is left idle.
fn spawn_put_and_release<R: SimRuntime>(
    world: &CacheWorld<R>,
    thread: &'static str,
    cache: usize,
    key: &'static str,
) -> R::Handle<()> {
    let cache = Arc::clone(&world.caches[cache]);
    world.spawn(thread, move |_, _| {
        trace::record(thread, format!("put({key}) on {}, lock, unlock", cache.device()));
        let admitted = cache.put(key, Weights::plain(BYTES), BYTES, PutOptions::default());
        ensure!(admitted.is_ok(), "contract", "{thread}: put({key}) gave {admitted:?}");
        drop(admitted.expect("checked").into_loaded().lock());
    })
}

/// C-B3: a record left idle is evicted by the timer with no call from anyone; a peer shut down
/// while its record is locked evicts it at its release (stale), not by expiry; once every cache
/// with a keep-alive is shut down the timer thread exits while the group is still alive.
pub(super) fn timer_expires_and_exits<R: SimRuntime>(rt: R) {
    let world = CacheWorld::hard(rt, 100, 2);
    let evicted = on_eviction_of(&world, &world.caches[0], "a");
    for cache in &world.caches {
        keep_alive(cache, KEEP_ALIVE);
    }
    let t1 = spawn_put_and_release(&world, "T1", 0, "a");
    let c1 = Arc::clone(&world.caches[1]);
    let t2 = world.spawn("T2", move |_, _| {
        trace::record("T2", "put(b) on cuda:1, lock; shutdown(cuda:1); unlock");
        let admitted = c1.put("b", Weights::plain(BYTES), BYTES, PutOptions::default());
        ensure!(admitted.is_ok(), "contract", "T2: put(b) gave {admitted:?}");
        let guard = admitted.expect("checked").into_loaded().lock();
        c1.shutdown();
        drop(guard);
        ensure!(c1.keys().is_empty(), "K1", "cuda:1 keeps b after shutdown and its last release");
    });
    join::<R, _>(t1);
    join::<R, _>(t2);
    trace::record("main", "waits for a's eviction (no call)");
    evicted.wait();
    let keys = world.caches[0].keys();
    ensure!(keys.is_empty(), "K2", "cuda:0 keeps {keys:?} after a's keep-alive expired");
    trace::record("main", "shutdown(cuda:0); the timer thread must exit");
    world.caches[0].shutdown();
    world.rt.join_background();
    ensure!(!world.group.keep_alive_timer_running(), "K3", "the timer runs on with no keep-alive left");
    ensure!(!world.caches[0].set_keep_alive(Some(KEEP_ALIVE)), "K1", "keep-alive re-armed after shutdown");
    finish(&world);
}

/// C-P6t: the `tracing` subscriber panics at every report of the keep-alive timer thread (its
/// start, its end): the thread goes on, and a record T1 leaves idle expires with no call.
pub(super) fn subscriber_panics_in_the_timer<R: SimRuntime>(rt: R) {
    let world = CacheWorld::hard(rt, 100, 1);
    let evicted = on_eviction_of(&world, &world.caches[0], "a");
    instrumentation::panic_at(&["keep-alive timer started", "keep-alive timer exited"]);
    keep_alive(&world.caches[0], KEEP_ALIVE);
    let t1 = spawn_put_and_release(&world, "T1", 0, "a");
    join::<R, _>(t1);
    trace::record("main", "waits for a's eviction (no call)");
    evicted.wait();
    trace::record("main", "shutdown(cuda:0); the timer thread must exit");
    world.caches[0].shutdown();
    world.rt.join_background();
    instrumentation::disarm();
    ensure!(!world.group.keep_alive_timer_running(), "K3", "the timer runs on with no keep-alive left");
    finish(&world);
}

/// W-11: the timer sleeps with nothing idle; T1's release leaves a record idle and must wake it
/// (the record's deadline is the only one).
pub(super) fn release_wakes_the_timer<R: SimRuntime>(rt: R) {
    let world = CacheWorld::hard(rt, 100, 1);
    let evicted = on_eviction_of(&world, &world.caches[0], "a");
    keep_alive(&world.caches[0], KEEP_ALIVE);
    let t1 = spawn_put_and_release(&world, "T1", 0, "a");
    join::<R, _>(t1);
    trace::record("main", "waits for a's eviction (no call)");
    evicted.wait();
    finish(&world);
}

/// W-11l: the timer sleeps to a's deadline while the main thread holds b. It wakes, evicts a
/// and (a's eviction callback wakes the main thread) the main thread lets b go while the timer
/// still looks: the release, which reads the timer's deadline without its monitor, must not
/// take a's old deadline for the one the timer will sleep to (b is the only idle record then).
pub(super) fn release_during_the_timers_look<R: SimRuntime>(rt: R) {
    let world = CacheWorld::hard(rt, 100, 1);
    let cache = &world.caches[0];
    preload(cache, "a", BYTES);
    preload(cache, "b", BYTES);
    // One callback per cache: it posts the eviction of either.
    let (a_gone, b_gone) = (world.mailbox(), world.mailbox());
    let (post_a, post_b) = (Arc::clone(&a_gone), Arc::clone(&b_gone));
    cache.on_evict(move |gone, _| match gone {
        "a" => post_a.post(()),
        "b" => post_b.post(()),
        _ => {}
    });
    trace::record("main", "lock(b); set_keep_alive(10 s); waits for a's eviction (no call)");
    let held = cache.get("b").map(|b| b.lock());
    ensure!(held.is_some(), "contract", "b was preloaded");
    keep_alive(cache, KEEP_ALIVE);
    a_gone.wait();
    trace::record("main", "unlock(b) during the timer's look; waits for b's eviction (no call)");
    drop(held);
    b_gone.wait();
    finish(&world);
}

/// W-12: the timer sleeps for cuda:0 (a keep-alive, nothing idle); T1 gives cuda:1, whose record
/// is idle, a shorter keep-alive, which must wake the timer. Then the world is dropped with the
/// timer asleep again (the caches' drop wakes it: W-15).
pub(super) fn keep_alive_set_wakes_the_timer<R: SimRuntime>(rt: R) {
    let world = CacheWorld::hard(rt, 100, 2);
    preload(&world.caches[1], "n", BYTES);
    let evicted = on_eviction_of(&world, &world.caches[1], "n");
    keep_alive(&world.caches[0], KEEP_ALIVE);
    let c1 = Arc::clone(&world.caches[1]);
    let t1 = world.spawn("T1", move |_, _| {
        trace::record("T1", "set_keep_alive(1 s) on cuda:1");
        keep_alive(&c1, Duration::from_secs(1));
    });
    join::<R, _>(t1);
    trace::record("main", "waits for n's eviction (no call)");
    evicted.wait();
    // No check of the accounting here: it stops expiry, and the timer must be asleep now.
    trace::record("main", "drops the world with its timer asleep");
}

/// W-12x: five caches; the timer sleeps for cuda:4's keep-alive (nothing idle); cuda:0 holds n
/// idle, with no keep-alive. T1 turns cuda:4's keep-alive off (the timer wakes, looks at the
/// caches in order, finds none, and decides to exit) while T2 gives cuda:0 one (the three caches
/// between are what the timer looks at after cuda:0, the window of the race): the timer must
/// look again, or exit and be started anew — never exit with cuda:0's keep-alive in force. n
/// must then expire with no call.
pub(super) fn keep_alive_set_while_the_timer_exits<R: SimRuntime>(rt: R) {
    let world = CacheWorld::hard(rt, 100, 5);
    preload(&world.caches[0], "n", BYTES);
    let evicted = on_eviction_of(&world, &world.caches[0], "n");
    keep_alive(&world.caches[4], KEEP_ALIVE);
    let (c0, c4) = (Arc::clone(&world.caches[0]), Arc::clone(&world.caches[4]));
    let t1 = world.spawn("T1", move |_, _| {
        trace::record("T1", "set_keep_alive(None) on cuda:4");
        ensure!(c4.set_keep_alive(None), "contract", "keep-alive refused before shutdown");
    });
    let t2 = world.spawn("T2", move |_, _| {
        trace::record("T2", "set_keep_alive(10 s) on cuda:0");
        keep_alive(&c0, KEEP_ALIVE);
    });
    join::<R, _>(t1);
    join::<R, _>(t2);
    trace::record("main", "waits for n's eviction (no call)");
    evicted.wait();
    finish(&world);
}

/// W-15: the timer sleeps for cuda:0's keep-alive, with nothing idle; T1 drops cuda:0 without
/// shutting it down. The drop must wake the timer, which then finds no keep-alive and exits while
/// the group lives.
pub(super) fn cache_drop_wakes_the_timer<R: SimRuntime>(rt: R) {
    let group = CacheGroup::<Weights<R>, R>::with_runtime(100, rt.clone()).expect("a valid cap");
    let c0 = group.cache("cuda:0");
    keep_alive(&c0, KEEP_ALIVE);
    // The one scenario thread not spawned through a world: a world would keep cuda:0 alive,
    // and the point is that T1 drops the last reference to it.
    let t1 = rt.spawn("T1", move || {
        give_way::<R>(HEAD_START);
        trace::record("T1", "drops cuda:0 (no shutdown)");
        drop(c0);
    });
    join::<R, _>(t1);
    trace::record("main", "the timer thread must exit");
    rt.join_background();
    ensure!(!group.keep_alive_timer_running(), "K3", "the timer runs on with no keep-alive left");
}

/// W-12p: under a hard cap of 100, cuda:1 holds `a` (40, least recently used) and `n` (20),
/// idle, with no keep-alive. T1 loads `b` (60) on cuda:0, which needs `a`'s room and asks
/// cuda:1 for it, while T2 gives cuda:1 a keep-alive; `a`'s first eviction callback panics (not
/// the first callback of all: the timer may expire `n` between `a`'s eviction and its callback).
/// If T2 holds cuda:1's lock when T1 asks, T2 honours the request after setting the keep-alive,
/// and the panic reaches it there: the keep-alive in force must have its timer by then, so `n`
/// expires with no call.
pub(super) fn keep_alive_set_whose_drain_panics_starts_the_timer<R: SimRuntime>(rt: R) {
    let world = CacheWorld::hard(rt, 100, 2);
    preload(&world.caches[1], "a", 40);
    preload(&world.caches[1], "n", 20);
    let evicted = world.mailbox();
    let (post, first) = (Arc::clone(&evicted), std::sync::atomic::AtomicBool::new(true));
    world.caches[1].on_evict(move |gone, _| {
        if gone == "a" && first.swap(false, std::sync::atomic::Ordering::Relaxed) {
            std::panic::panic_any(crate::violation::InjectedPanic)
        }
        if gone == "n" {
            post.post(());
        }
    });
    let c0 = Arc::clone(&world.caches[0]);
    let t1 = world.spawn("T1", move |_, _| {
        trace::record("T1", "get_or_put(b) on cuda:0, which needs a's room");
        let loaded = crate::violation::catching(|| {
            c0.get_or_put("b", 60, || Ok::<_, &str>(Weights::plain(60))).map(drop)
        });
        trace::record("T1", format!("get_or_put(b) -> {loaded:?}"));
    });
    let c1 = Arc::clone(&world.caches[1]);
    let t2 = world.spawn("T2", move |_, _| {
        trace::record("T2", "set_keep_alive(10 s) on cuda:1");
        let set = crate::violation::catching(|| c1.set_keep_alive(Some(KEEP_ALIVE)));
        ensure!(set != Some(false), "contract", "keep-alive refused before shutdown");
    });
    join::<R, _>(t1);
    join::<R, _>(t2);
    ensure!(world.caches[1].keep_alive() == Some(KEEP_ALIVE), "contract", "the keep-alive was not set");
    trace::record("main", "waits for n's expiry (no call)");
    evicted.wait();
    finish(&world);
}
