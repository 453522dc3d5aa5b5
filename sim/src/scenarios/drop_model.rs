//! `drop_model` scenarios found by review (SPEC 3.3, 3.4, 3.10): `get` never serves a stale
//! record, a drop covers submodels and every peer, an admission racing a drop either ends stale
//! or did not adopt the old canonical, and user code panicking inside an admission strands no
//! claim.

use crate::unwinding::{catch, resume};

use resident::cache::PutOptions;
use resident::runtime::Arc;

use super::cache::{finish, load, preload};
use crate::ensure;
use crate::runtime::SimRuntime;
use crate::trace;
use crate::violation::InjectedPanic;
use crate::world::cache::{Behaviour, CacheWorld, Script, Weights};
use crate::world::join;

/// C-D1: T1 keeps m locked on cuda:0 and n locked on cuda:1; T2 drops m and then gets it, T3
/// shuts cuda:1 down and then gets n: both gets miss the stale records.
pub(super) fn get_misses_stale<R: SimRuntime>(rt: R) {
    let world = CacheWorld::new(rt, 100, 2);
    preload(&world.caches[0], "m", 30);
    preload(&world.caches[1], "n", 30);
    let (locked, done) = (world.signal(), world.signal());
    let (c0, c1, l1, d1) =
        (Arc::clone(&world.caches[0]), Arc::clone(&world.caches[1]), Arc::clone(&locked), Arc::clone(&done));
    let t1 = world.spawn("T1", move |_, _| {
        let guards = (load(&c0, "m", 30, "T1"), load(&c1, "n", 30, "T1"));
        l1.post(());
        d1.wait();
        drop(guards);
    });
    let (c0, l2) = (Arc::clone(&world.caches[0]), Arc::clone(&locked));
    let t2 = world.spawn("T2", move |_, _| {
        l2.wait();
        trace::record("T2", "drop_model(m)");
        c0.drop_model("m");
        let hit = c0.get("m").is_some();
        ensure!(!hit, "C-D1", "get(m) after drop_model(m) served the dropped record");
    });
    let (c1, l3) = (Arc::clone(&world.caches[1]), Arc::clone(&locked));
    let t3 = world.spawn("T3", move |_, _| {
        l3.wait();
        trace::record("T3", "shutdown(cuda:1)");
        c1.shutdown();
        let hit = c1.get("n").is_some();
        ensure!(!hit, "C-D1", "get(n) after shutdown served a stale record");
    });
    join::<R, _>(t2);
    join::<R, _>(t3);
    done.post(());
    join::<R, _>(t1);
    finish(&world);
}

/// C-D2: T1 holds `m:vae` on cuda:0 and `m` on cuda:1; T2 drops m through cuda:0. cuda:1's `m`
/// is stale (its get misses) and a reload of `m:vae` on cuda:1 does not adopt the old canonical.
pub(super) fn drop_covers_submodels_and_peers<R: SimRuntime>(rt: R) {
    let world = CacheWorld::new(rt, 1000, 2);
    let (locked, done) = (world.mailbox(), world.signal());
    let (c0, c1, l1, d1) =
        (Arc::clone(&world.caches[0]), Arc::clone(&world.caches[1]), Arc::clone(&locked), Arc::clone(&done));
    let t1 = world.spawn("T1", move |_, _| {
        let vae = load(&c0, "m:vae", 20, "T1");
        let m = load(&c1, "m", 30, "T1");
        l1.post(vae.canonical_id());
        d1.wait();
        drop((vae, m));
    });
    let (c0, c1, l2) = (Arc::clone(&world.caches[0]), Arc::clone(&world.caches[1]), Arc::clone(&locked));
    let t2 = world.spawn("T2", move |_, _| {
        let old_vae = l2.wait();
        trace::record("T2", "drop_model(m) on cuda:0");
        c0.drop_model("m");
        ensure!(c1.get("m").is_none(), "C-D2", "cuda:1 still serves m after drop_model(m)");
        let vae = load(&c1, "m:vae", 20, "T2");
        ensure!(vae.canonical_id() != old_vae, "C-D2", "a reload of m:vae adopted the dropped canonical");
    });
    join::<R, _>(t2);
    done.post(());
    join::<R, _>(t1);
    finish(&world);
}

/// C-D3: T1 keeps m's canonical alive on cuda:0; T2 adopts it on cuda:1 (`adopt`) while T3
/// drops m through the group. Afterwards a `get` of m on cuda:1 never serves the dropped canonical.
pub(super) fn adoption_races_drop<R: SimRuntime>(rt: R) {
    let world = CacheWorld::new(rt, 1000, 2);
    preload(&world.caches[0], "m", 30);
    let (locked, done) = (world.mailbox(), world.signal());
    let (c0, l1, d1) = (Arc::clone(&world.caches[0]), Arc::clone(&locked), Arc::clone(&done));
    let t1 = world.spawn("T1", move |_, _| {
        let guard = load(&c0, "m", 30, "T1");
        l1.post(guard.canonical_id());
        d1.wait();
        drop(guard);
    });
    let (c1, l2) = (Arc::clone(&world.caches[1]), Arc::clone(&locked));
    let t2 = world.spawn("T2", move |_, _| {
        l2.wait();
        trace::record("T2", "adopt(m) on cuda:1");
        match c1.adopt("m") {
            Ok(Some(admission)) => drop(admission.into_loaded().lock()),
            Ok(None) => drop(load(&c1, "m", 30, "T2")),
            Err(error) => ensure!(false, "contract", "T2: adopt(m) gave {error:?}"),
        }
    });
    let (group, l3) = (Arc::clone(&world.group), Arc::clone(&locked));
    let t3 = world.spawn("T3", move |_, _| {
        l3.wait();
        trace::record("T3", "drop_model(m) on the group");
        group.drop_model("m");
    });
    join::<R, _>(t2);
    join::<R, _>(t3);
    let old = locked.wait();
    if let Some(loaded) = world.caches[1].get("m") {
        let guard = loaded.lock();
        ensure!(guard.canonical_id() != old, "C-D3", "cuda:1 serves the canonical drop_model(m) invalidated");
    }
    done.post(());
    join::<R, _>(t1);
    finish(&world);
}

/// C-D4: T1 and T2 admit m at once; T2's private weights panic when dropped, which happens
/// inside its `put` if it joins T1's record (they are spare then). The panic strands no
/// admission: at the end nothing stays pinned (A6).
pub(super) fn panic_inside_admission<R: SimRuntime>(rt: R) {
    let world = CacheWorld::new(rt, 1000, 1);
    let script = world.script();
    let c0 = Arc::clone(&world.caches[0]);
    let t1 = world.spawn("T1", move |_, _| drop(load(&c0, "m", 30, "T1")));
    let (c0, s2) = (Arc::clone(&world.caches[0]), Arc::clone(&script));
    let t2 = world.spawn("T2", move |_, _| {
        let weights = Weights::scripted(30, Behaviour { drop_panics: true, ..Behaviour::default() }, &s2);
        trace::record("T2", "put(m) with panicking spare weights");
        let put = catch(|| {
            let private = PutOptions { shared: false, ..PutOptions::default() };
            c0.put("m", weights, 30, private).map(|admission| drop(admission.into_loaded().lock()))
        });
        s2.disarm();
        match put {
            Ok(result) => ensure!(result.is_ok(), "contract", "T2: put(m) gave {result:?}"),
            Err(payload) if payload.is::<InjectedPanic>() => {}
            Err(payload) => resume(payload),
        }
    });
    join::<R, _>(t1);
    join::<R, _>(t2);
    finish(&world);
}

/// C-D5 (found by the generated cache programs): T1 holds the last handle of `m`'s record, which
/// was dropped and replaced (so detached), and lets go while T2 inspects the cache. The
/// inspection never becomes the record's last owner: the weights' `Drop` (user code, which
/// panics here) runs in T1, never inside the read-only `resident()`.
pub(super) fn inspection_races_last_release<R: SimRuntime>(rt: R) {
    let world = CacheWorld::new(rt, 100, 1);
    let script = world.script();
    let cache = Arc::clone(&world.caches[0]);
    let panicking = Weights::scripted(30, Behaviour { drop_panics: true, ..Behaviour::default() }, &script);
    let held = cache.put("m", panicking, 30, PutOptions::default()).map(|a| a.into_loaded().lock());
    cache.drop_model("m");
    let replaced = cache.put("m", Weights::plain(30), 30, PutOptions::default()).map(drop);
    ensure!(held.is_ok() && replaced.is_ok(), "contract", "setup puts gave {held:?} / {replaced:?}");
    let t1 = world.spawn("T1", move |_, _| {
        trace::record("T1", "release(m, detached)");
        crate::violation::catching(|| drop(held));
    });
    let c = Arc::clone(&cache);
    let t2 = world.spawn("T2", move |_, _| {
        trace::record("T2", "resident()");
        let seen = crate::violation::catching(|| c.resident());
        ensure!(seen.is_some(), "U2", "inspecting the cache ran a weights' Drop (it panicked there)");
    });
    join::<R, _>(t1);
    join::<R, _>(t2);
    script.disarm();
    finish(&world);
}

/// C-P7 (found by the generated cache programs): `a` (60) is idle under a hard cap of 100 and
/// the eviction callback panics. T1 puts `b` (60) with weights whose `Drop` panics: making room
/// for them evicts `a`, whose callback panics out of the put. The caller's weights, held across
/// that, are dropped in the unwind under a catch: the put's panic reaches T1, no abort, nothing
/// stranded.
pub(super) fn room_making_panics_with_the_callers_weights_held<R: SimRuntime>(rt: R) {
    let world = CacheWorld::new(rt, 100, 1);
    let script = world.script();
    preload(&world.caches[0], "a", 60);
    world.caches[0].on_evict(|_, _| std::panic::panic_any(InjectedPanic));
    let why = "making room evicts a, whose callback panics";
    let t1 = put_that_panics(&world, &script, ("b", 60, PutOptions::default()), why);
    join::<R, _>(t1);
    script.disarm();
    finish(&world);
}

/// C-P7n: T1 puts `m` as a private copy (not shared) with weights whose `Drop` panics, and the
/// subscriber panics at the report of its charge. The caller's weights, held until they are
/// charged, are dropped under a catch in that unwind: the put's panic reaches T1, no abort,
/// nothing left charged.
pub(super) fn private_charge_report_panics_with_the_callers_weights_held<R: SimRuntime>(rt: R) {
    let world = CacheWorld::new(rt, 100, 1);
    let script = world.script();
    crate::instrumentation::panic_at(&["charged non-shared"]);
    let private = PutOptions { shared: false, ..PutOptions::default() };
    let t1 = put_that_panics(
        &world,
        &script,
        ("m", 30, private),
        "the report of its private copy's charge panics",
    );
    join::<R, _>(t1);
    crate::instrumentation::disarm();
    script.disarm();
    finish(&world);
}

/// T1 of C-P7 and C-P7n: puts `key` (of `bytes`, `how`) into the world's first cache, with
/// weights whose `Drop` panics, in a put that panics (`why`). The put's panic must reach T1.
fn put_that_panics<R: SimRuntime>(
    world: &CacheWorld<R>,
    script: &Arc<Script<R>>,
    (key, bytes, how): (&'static str, u64, PutOptions),
    why: &'static str,
) -> R::Handle<()> {
    let (c0, s1) = (Arc::clone(&world.caches[0]), Arc::clone(script));
    world.spawn("T1", move |_, _| {
        let weights = Weights::scripted(bytes, Behaviour { drop_panics: true, ..Behaviour::default() }, &s1);
        trace::record("T1", format!("put({key}): {why}"));
        match catch(|| c0.put(key, weights, bytes, how).map(drop)) {
            Err(payload) if payload.is::<InjectedPanic>() => {}
            Err(payload) => resume(payload),
            Ok(result) => ensure!(false, "contract", "put({key}) gave {result:?} though {why}"),
        }
    })
}

/// C-P8: a cache of its own, `cuda:9`, holds `m` and `n`, whose weights' `Drop` panics; the
/// scenario keeps a handle of `m` and lets go of the cache, so the handle holds its last
/// reference. T1 panics holding the handle: its release drops the cache, and so both records
/// and their weights, in that unwind, each under a catch of its own (one catch for both would
/// drop the second in the first's unwind). T1's own panic reaches it, no abort, nothing left
/// counted.
pub(super) fn last_cache_reference_let_go_in_an_unwind<R: SimRuntime>(rt: R) {
    let world = CacheWorld::new(rt, 100, 1);
    let script = world.script();
    let own = world.group.cache("cuda:9");
    let panicking =
        || Weights::scripted(30, Behaviour { drop_panics: true, ..Behaviour::default() }, &script);
    drop(own.put("n", panicking(), 30, PutOptions::default()).expect("setup put"));
    let held = own.put("m", panicking(), 30, PutOptions::default()).expect("setup put");
    drop(own);
    let t1 = world.spawn("T1", move |_, _| {
        trace::record("T1", "panics holding m, whose handle holds the last reference to cuda:9");
        let unwound = catch(move || {
            let _held = held;
            std::panic::panic_any(InjectedPanic);
        });
        match unwound {
            Err(payload) if payload.is::<InjectedPanic>() => {}
            Err(payload) => resume(payload),
            Ok(()) => ensure!(false, "contract", "T1's panic did not reach it"),
        }
    });
    join::<R, _>(t1);
    script.disarm();
    finish(&world);
}

/// C-P5: T1 keeps `m` locked while T2 drops it (so the record is stale), then T1 panics with
/// the guard alive. The guard's `Drop` runs during the unwind, evicts the stale record and
/// calls the eviction callback, which panics too: the record is released, the second panic is
/// dropped, and T1's own panic reaches its caller (production would abort otherwise).
pub(super) fn eviction_callback_panics_while_unwinding<R: SimRuntime>(rt: R) {
    let world = CacheWorld::new(rt, 100, 1);
    world.caches[0].on_evict(|_, _| std::panic::panic_any(InjectedPanic));
    let (locked, dropped) = (world.signal(), world.signal());
    let (c0, l1, d1) = (Arc::clone(&world.caches[0]), Arc::clone(&locked), Arc::clone(&dropped));
    let t1 = world.spawn("T1", move |_, _| {
        let guard = load(&c0, "m", 30, "T1");
        l1.post(());
        d1.wait();
        trace::record("T1", "panics holding m's guard");
        let unwound = catch(move || {
            let _guard = guard;
            std::panic::panic_any(InjectedPanic);
        });
        ensure!(unwound.is_err(), "contract", "T1's panic did not reach its caller");
        let left = c0.keys();
        ensure!(left.is_empty(), "C-P5", "the stale record outlived its last guard: {left:?}");
    });
    let (c0, l2) = (Arc::clone(&world.caches[0]), Arc::clone(&locked));
    let t2 = world.spawn("T2", move |_, _| {
        l2.wait();
        trace::record("T2", "drop_model(m)");
        c0.drop_model("m");
        dropped.post(());
    });
    join::<R, _>(t1);
    join::<R, _>(t2);
    finish(&world);
}

/// C-D6: T1 loads `m` on cuda:0 and, inside its loader, waits until T2 has dropped `m`; T3
/// loads `m` on cuda:1 meanwhile (waiting for T1's load of the key, or after it). T1 gets its
/// weights, but they may be the dropped ones: they are never the key's canonical. T3, and a
/// load after both, read fresh weights — none shares T1's.
pub(super) fn load_in_flight_across_drop<R: SimRuntime>(rt: R) {
    let world = CacheWorld::new(rt, 1000, 2);
    let (loading, dropped) = (world.signal(), world.signal());
    let (c0, l1, d1) = (Arc::clone(&world.caches[0]), Arc::clone(&loading), Arc::clone(&dropped));
    let t1 = world.spawn("T1", move |_, _| {
        trace::record("T1", "get_or_put(m) on cuda:0, straddling the drop");
        let loaded = c0.get_or_put("m", 30, || {
            l1.post(());
            d1.wait();
            Ok::<_, &str>(Weights::plain(30))
        });
        ensure!(loaded.is_ok(), "contract", "T1: get_or_put(m) gave {loaded:?}");
        loaded.expect("checked").lock()
    });
    let (c0, l2) = (Arc::clone(&world.caches[0]), Arc::clone(&loading));
    let t2 = world.spawn("T2", move |_, _| {
        l2.wait();
        trace::record("T2", "drop_model(m)");
        c0.drop_model("m");
        dropped.post(());
    });
    let c1 = Arc::clone(&world.caches[1]);
    let t3 = world.spawn("T3", move |_, _| {
        loading.wait();
        trace::record("T3", "get_or_put(m) on cuda:1");
        c1.get_or_put("m", 30, || Ok::<_, &str>(Weights::plain(30))).map(|loaded| loaded.lock())
    });
    let straddled = join::<R, _>(t1);
    join::<R, _>(t2);
    let beside = join::<R, _>(t3);
    ensure!(beside.is_ok(), "contract", "T3: get_or_put(m) gave {:?}", beside.as_ref().map(|_| ()));
    let beside = beside.expect("checked");
    ensure!(
        !beside.shares_weights_with(&straddled),
        "C-D6",
        "T3's load of m on cuda:1 adopted the weights T1 built across drop_model(m)"
    );
    trace::record("main", "get_or_put(m) on cuda:1 after both");
    let after =
        world.caches[1].get_or_put("m", 30, || Ok::<_, &str>(Weights::plain(30))).expect("a load").lock();
    ensure!(
        !after.shares_weights_with(&straddled),
        "C-D6",
        "a load of m after drop_model(m) adopted the weights T1 built across it"
    );
    drop((straddled, beside, after));
    finish(&world);
}
