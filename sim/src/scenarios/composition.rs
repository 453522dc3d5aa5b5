//! The production composition (SPEC §5, `X-*`): `FixedSizeCache<ModelManager<cache loader>>`
//! per device over one cache group, device budgets on. Every scenario ends with the devices'
//! models removed, then the group's accounting (A1) and drain checks.

use std::time::Duration;

use resident::cache::CanonicalId;
use resident::runtime::Arc;
use resident::{Added, CacheError, Manager, ManagerError, ManagerExt};

use crate::ensure;
use crate::runtime::SimRuntime;
use crate::trace;
use crate::world::composition::Composition;
use crate::world::join;
use crate::world::traced;

/// Removes every model of every device, then the cache group's end-of-run checks.
fn finish<R: SimRuntime>(c: &Composition<R>) {
    for device in &c.devices {
        for id in device.ids() {
            let removed = device.remove(id.as_str());
            ensure!(removed.is_ok(), "contract", "remove({id}) at the end gave {removed:?}");
        }
        crate::world::checks::check_queue(device);
    }
    super::cache::finish(&c.world);
}

/// two devices cold-load one key at once: each device loads it once (I1 per device), the
/// group reads its file once (get_or_put is single-flight per key), and one canonical backs both.
pub(super) fn cold_loads_on_two_devices<R: SimRuntime>(rt: R) {
    let c = Composition::new(rt, &["m"], 40, 100, 100, 2, 2);
    ensure!(c.world.group.load_wait() == Duration::from_secs(1), "contract", "the load wait did not take");
    let handles = [("T1", 0), ("T2", 1)]
        .map(|(name, d)| c.spawn(name, d, |m, t| traced(t, "add(m)", || m.add_model("m", None))));
    for handle in handles {
        let added = join::<R, _>(handle);
        ensure!(matches!(added, Ok(Added::Loaded)), "contract", "add(m) gave {added:?}");
    }
    let reads = c.files.reads("m");
    ensure!(reads == 1, "X-1", "m's file was read {reads} times for two devices");
    let in_use = c.world.group.budget().in_use();
    ensure!(in_use == 40, "A1", "{in_use} bytes counted for one 40-byte canonical shared by two devices");
    super::wakeups::no_deadline_passed(&c.world.rt);
    finish(&c);
}

/// Whether an add failed because the loader's cache group was shut down.
fn refused_by_shutdown(error: &ManagerError) -> bool {
    matches!(error, ManagerError::Load { source, .. }
        if matches!(source.downcast_ref::<CacheError>(), Some(CacheError::ShutDown { .. })))
}

/// The canonical device `d` serves `key` from, through a lease that checks A5.
fn served_canonical<R: SimRuntime>(c: &Composition<R>, d: usize, key: &str) -> Option<CanonicalId> {
    let lease = c.devices[d].lease(key);
    ensure!(lease.is_ok(), "contract", "lease({key}) on device {d} gave {:?}", lease.as_ref().err());
    let lease = lease.ok()?;
    lease.check_resident("main");
    lease.canonical()
}

/// device 0 evicts its idle record of `m` (a `make_room` for its whole budget) while
/// device 1 adds `m`: it adopts the canonical if the record still keeps it alive, or reads the
/// file again if not, then locks it on its device. Either way device 1's record stays resident
/// while locked (A5), and the canonical it serves stays the store's: a later add on device 0
/// adopts it and reads nothing (A2: one key's weights are never in RAM twice).
pub(super) fn eviction_races_peer_lock<R: SimRuntime>(rt: R) {
    let c = Composition::new(rt, &["m"], 40, 100, 100, 2, 2);
    let setup = c.devices[0].add_model("m", None).and_then(|_| c.devices[0].remove("m"));
    ensure!(setup.is_ok(), "contract", "setup gave {setup:?}");
    let cache0 = Arc::clone(&c.world.caches[0]);
    let t1 =
        c.world.spawn("T1", move |_, _| traced("T1", "make_room(100) on cuda:0", || cache0.make_room(100)));
    let t2 = c.spawn("T2", 1, |m, t| {
        let added = traced(t, "add(m)", || m.add_model("m", None));
        ensure!(matches!(added, Ok(Added::Loaded)), "contract", "add(m) on device 1 gave {added:?}");
        if let Ok(lease) = m.lease("m") {
            lease.serve(t);
        }
    });
    join::<R, _>(t1);
    join::<R, _>(t2);
    let reads = c.files.reads("m");
    ensure!((1..=2).contains(&reads), "I1", "m's file was read {reads} times");
    let added = c.devices[0].add_model("m", None);
    ensure!(matches!(added, Ok(Added::Loaded)), "contract", "add(m) on device 0 again gave {added:?}");
    let again = c.files.reads("m");
    ensure!(
        again == reads,
        "A2",
        "device 0 read m's file again ({reads} -> {again}) while device 1 held its canonical"
    );
    let (d0, d1) = (served_canonical(&c, 0, "m"), served_canonical(&c, 1, "m"));
    ensure!(d0 == d1, "A2", "the devices serve two copies of m's weights ({d0:?}, {d1:?})");
    c.world.check_accounting();
    super::wakeups::no_deadline_passed(&c.world.rt);
    finish(&c);
}

/// device 0 serves `m` (T1 leases it) while T2 drops `m` from the group and T3 adds `m` on
/// device 1. Device 0's manager still has `m` registered, so it keeps serving the old weights —
/// resident, never evicted while locked (A5) — until removed; a load after the drop reads fresh
/// weights (device 1 may have adopted the old ones before the drop: they stay until removed).
pub(super) fn drop_model_while_leased<R: SimRuntime>(rt: R) {
    let c = Composition::new(rt, &["m"], 40, 100, 100, 2, 2);
    let setup = c.devices[0].add_model("m", None);
    ensure!(setup.is_ok(), "contract", "setup gave {setup:?}");
    // Another user of device 0's cache holds the old record, so its canonical stays alive (and
    // its address is not reused) until the end.
    let keep = c.world.caches[0].get("m").map(|loaded| loaded.lock());
    let old = keep.as_ref().and_then(|guard| guard.canonical_id());
    let t1 = c.spawn("T1", 0, |m, t| {
        let lease = traced(t, "lease(m)", || m.lease("m"));
        ensure!(lease.is_ok(), "contract", "lease(m) on device 0 gave {:?}", lease.as_ref().err());
        if let Ok(lease) = lease {
            lease.serve(t);
        }
    });
    let group = Arc::clone(&c.world.group);
    let t2 = c.world.spawn("T2", move |_, _| traced("T2", "drop_model(m)", || group.drop_model("m")));
    let t3 = c.spawn("T3", 1, |m, t| {
        let added = traced(t, "add(m)", || m.add_model("m", None));
        ensure!(matches!(added, Ok(Added::Loaded)), "contract", "add(m) on device 1 gave {added:?}");
    });
    join::<R, _>(t1);
    join::<R, _>(t2);
    join::<R, _>(t3);
    let served = served_canonical(&c, 0, "m");
    ensure!(served == old, "X-3", "device 0 stopped serving its registered weights after drop_model");
    let reloaded = c.devices[0].remove("m").and_then(|_| c.devices[0].add_model("m", None));
    ensure!(reloaded.is_ok(), "contract", "remove and add(m) on device 0 gave {reloaded:?}");
    let fresh = served_canonical(&c, 0, "m");
    ensure!(fresh != old, "X-3", "a load after drop_model(m) served the dropped weights");
    drop(keep);
    c.world.check_accounting();
    super::wakeups::no_deadline_passed(&c.world.rt);
    finish(&c);
}

/// T1 adds `a` on device 0 and T2 adds `b` on device 1; once both files are being read,
/// T3 shuts the group down. Each add either completes (its model keeps serving until removed)
/// or is refused with `ShutDown`; once every model is removed nothing stays resident or counted — without shutting
/// any cache down again (A6) — and a later add is refused without reading a file.
pub(super) fn shutdown_mid_load<R: SimRuntime>(rt: R) {
    let c = Composition::new(rt, &["a", "b"], 40, 100, 100, 2, 2);
    // The shutdown waits for both reads to start: their own scheduling points add nothing.
    c.files.set_read_yields(0);
    let adds = [("T1", 0, "a"), ("T2", 1, "b")].map(|(name, d, key)| {
        c.spawn(name, d, move |m, t| {
            let added = traced(t, &format!("add({key})"), || m.add_model(key, None));
            let expected = match &added {
                Ok(Added::Loaded) => true,
                Err(error) => refused_by_shutdown(error),
                Ok(_) => false,
            };
            ensure!(expected, "contract", "add({key}) racing shutdown gave {added:?}");
        })
    });
    let (group, files) = (Arc::clone(&c.world.group), Arc::clone(&c.files));
    let t3 = c.world.spawn("T3", move |_, _| {
        files.started.wait_for(2);
        trace::record("T3", "shutdown(group)".to_owned());
        group.shutdown();
    });
    for handle in adds {
        join::<R, _>(handle);
    }
    join::<R, _>(t3);
    for (d, device) in c.devices.iter().enumerate() {
        for id in device.ids() {
            served_canonical(&c, d, id.as_str());
            let removed = device.remove(id.as_str());
            ensure!(removed.is_ok(), "contract", "remove({id}) after shutdown gave {removed:?}");
        }
    }
    for cache in &c.world.caches {
        let keys = cache.keys();
        ensure!(keys.is_empty(), "A6", "{} keeps {keys:?} after the group's shutdown", cache.device());
    }
    let counted = c.world.group.budget().in_use();
    ensure!(counted == 0, "A6", "{counted} bytes counted after the group's shutdown with nothing in use");
    let reads = c.files.reads("a");
    let late = c.devices[0].add_model("a", None);
    ensure!(
        late.as_ref().is_err_and(refused_by_shutdown),
        "contract",
        "add(a) after the group's shutdown gave {late:?}"
    );
    ensure!(c.files.reads("a") == reads, "contract", "an add after shutdown read a's file");
    super::wakeups::no_deadline_passed(&c.world.rt);
    finish(&c);
}

/// `m`'s file is at version 0. T1 adds `m` on device 0; T2 rewrites the file and adds `m`
/// on device 1. T1's look at the file may come before the rewrite and its load after T2's read
/// of version 1: T1 then holds the group's version-1 weights under a version-0 look. It must
/// serve them (the file is at version 1 now), not drop them from the whole group and read the
/// file again: no version of the file is read twice.
pub(super) fn a_stale_look_keeps_the_newer_weights<R: SimRuntime>(rt: R) {
    let c = Composition::new(rt, &["m"], 40, 200, 100, 2, 2);
    c.files.set_read_yields(1);
    let t1 = c.spawn("T1", 0, |m, t| traced(t, "add(m)", || m.add_model("m", None)));
    let files = Arc::clone(&c.files);
    let t2 = c.spawn("T2", 1, move |m, t| {
        trace::record(t, "rewrite m's file");
        files.rewrite("m");
        traced(t, "add(m)", || m.add_model("m", None))
    });
    let (first, second) = (join::<R, _>(t1), join::<R, _>(t2));
    ensure!(first.is_ok() && second.is_ok(), "contract", "add(m) gave {first:?} and {second:?}");
    for version in [0, 1] {
        let reads = c.files.reads_of_version("m", version);
        ensure!(reads <= 1, "X-6", "version {version} of m's file was read {reads} times");
    }
    let served = served_version(&c, 1, "m");
    ensure!(served == Some(1), "X-6", "device 1 serves version {served:?} of m's file after its rewrite");
    super::wakeups::no_deadline_passed(&c.world.rt);
    finish(&c);
}

/// The version of its file that device `d`'s registered `key` serves.
fn served_version<R: SimRuntime>(c: &Composition<R>, d: usize, key: &str) -> Option<u64> {
    c.devices[d].lease(key).ok().map(|lease| lease.version())
}

/// `m` is served on device 0 and cached idle on device 1 (added, then removed). T1
/// replaces `m` on device 0 while T2 leases it: the replace reads the file again though it is
/// unchanged (a replace never adopts the weights it replaces). Then the file is rewritten, and
/// the main thread adds `m` on device 1 while T3 replaces it on device 0: both serve the new
/// version, never the weights the group still held of the old one.
pub(super) fn source_changes_between_loads<R: SimRuntime>(rt: R) {
    let c = Composition::new(rt, &["m"], 40, 200, 100, 2, 2);
    c.files.set_read_yields(1);
    let setup = c.devices[1].add_model("m", None).and_then(|_| c.devices[1].remove("m"));
    let setup = setup.and_then(|_| c.devices[0].add_model("m", None).map(drop));
    ensure!(setup.is_ok(), "contract", "setup gave {setup:?}");
    let reads = c.files.reads("m");
    let t1 = c.spawn("T1", 0, |m, t| traced(t, "replace(m)", || m.replace("m", None)));
    let t2 = c.spawn("T2", 0, |m, t| {
        let lease = traced(t, "lease(m)", || m.lease("m").map(|lease| lease.serve(t)));
        ensure!(lease.is_ok(), "contract", "lease(m) during a replace gave {lease:?}");
    });
    let replaced = join::<R, _>(t1);
    join::<R, _>(t2);
    ensure!(replaced.is_ok(), "contract", "replace(m) gave {replaced:?}");
    let read = c.files.reads("m") - reads;
    ensure!(
        read == 1,
        "X-5",
        "a replace of m read its file {read} time(s): it adopted the weights it replaces"
    );
    trace::record("main", "rewrite m's file");
    c.files.rewrite("m");
    let t3 = c.spawn("T3", 0, |m, t| traced(t, "replace(m)", || m.replace("m", None).map(drop)));
    let added = traced("main", "add(m) on device 1", || c.devices[1].add_model("m", None).map(drop));
    let replaced = join::<R, _>(t3);
    ensure!(
        added.is_ok() && replaced.is_ok(),
        "contract",
        "add(m) gave {added:?}, replace(m) gave {replaced:?}"
    );
    for d in [0, 1] {
        let version = served_version(&c, d, "m");
        ensure!(
            version == Some(1),
            "X-5",
            "device {d} serves version {version:?} of m's file after its rewrite"
        );
    }
    super::wakeups::no_deadline_passed(&c.world.rt);
    finish(&c);
}

/// X-5p: `m` is cached idle on device 1 (added, then removed), then its file is rewritten; the
/// `tracing` subscriber panics at the report of weights of an earlier version of their source.
/// T1 adds `m` on device 0: it adopts the group's old weights, finds them stale and drops the
/// key, and its subscriber's panic comes only then: no cache of the group keeps the old
/// version resident (1.11, 3.3, 3.10).
pub(super) fn subscriber_panics_at_a_stale_drop<R: SimRuntime>(rt: R) {
    let c = Composition::new(rt, &["m"], 40, 200, 100, 2, 2);
    let setup = c.devices[1].add_model("m", None).and_then(|_| c.devices[1].remove("m"));
    ensure!(setup.is_ok(), "contract", "setup gave {setup:?}");
    trace::record("main", "rewrite m's file");
    c.files.rewrite("m");
    crate::instrumentation::panic_at(&["weights of an earlier version of their source: dropped"]);
    let t1 = c.spawn("T1", 0, |m, t| {
        traced(t, "add(m)", || crate::violation::catching(|| m.add_model("m", None).map(drop)))
    });
    let added = join::<R, _>(t1);
    crate::instrumentation::disarm();
    ensure!(!matches!(added, Some(Ok(()))), "contract", "add(m) gave {added:?} past a panicking subscriber");
    for (d, cache) in c.world.caches.iter().enumerate() {
        let kept: Vec<_> = cache.resident().into_iter().filter(|r| r.key == "m").collect();
        ensure!(
            kept.is_empty(),
            "X-5",
            "device {d} keeps {kept:?} of m's old version after a load found it stale and its report panicked"
        );
    }
    finish(&c);
}

/// `m` is served on device 0; `m:v2`, a file of its own, is cached idle on device 1 (added,
/// then removed). T1 replaces `m` on device 0 while T2 adds `m:v2` there: `m:v2` adopts the
/// weights device 1 holds, read once in all — a replace of `m` is no drop of `m:v2`, whose
/// file did not change (1.11, 3.3).
pub(super) fn a_replace_spares_an_id_that_extends_it<R: SimRuntime>(rt: R) {
    let c = Composition::new(rt, &["m", "m:v2"], 40, 200, 100, 2, 2);
    c.files.set_read_yields(1);
    let setup = c.devices[1].add_model("m:v2", None).and_then(|_| c.devices[1].remove("m:v2"));
    let setup = setup.and_then(|_| c.devices[0].add_model("m", None).map(drop));
    ensure!(setup.is_ok(), "contract", "setup gave {setup:?}");
    let t1 = c.spawn("T1", 0, |m, t| traced(t, "replace(m)", || m.replace("m", None).map(drop)));
    let t2 = c.spawn("T2", 0, |m, t| traced(t, "add(m:v2)", || m.add_model("m:v2", None).map(drop)));
    let replaced = join::<R, _>(t1);
    let added = join::<R, _>(t2);
    ensure!(
        replaced.is_ok() && added.is_ok(),
        "contract",
        "replace(m) gave {replaced:?}, add(m:v2) gave {added:?}"
    );
    let read = c.files.reads("m:v2");
    ensure!(read == 1, "X-7", "m:v2's file was read {read} times: the replace of m dropped its weights");
    finish(&c);
}
