//! Every invariant the worlds check, by its id (`docs/spec.md` §7 defines them): the manager's
//! (I1, I2, L1 and the capacity as they happen; I3, I4, I14 at quiescence), the shared-weight
//! cache's (A1, A2, A5, A6, A7, A9), and user code's (U1). The scenarios and the generated programs call these; a violation fails the
//! execution with a replayable schedule.

use std::collections::BTreeMap;

use resident::cache::{CanonicalId, DeviceCache, ModelGuard};
use resident::{FixedSizeCache, Manager, ManagerExt, Snapshot};

use super::cache::{CacheWorld, Weights};
use super::manager::{ManagerWorld, SimModel};
use crate::ensure;
use crate::runtime::{Counter, SimRuntime};

// ---- User code ------------------------------------------------------------------------------

/// Fails the execution if user code runs inside one of the runtime's monitors (SPEC 3.10).
pub fn ensure_outside_monitors<R: SimRuntime>(what: &str) {
    if !crate::unwinding::panicking() {
        let held = R::monitors_held();
        ensure!(held == 0, "U1", "{what} (user code) ran inside {held} internal monitor(s)");
    }
}

// ---- The manager ----------------------------------------------------------------------------

/// L1: a model in use has not been unloaded (`unloaded` times so far).
pub(crate) fn not_unloaded(unloaded: usize, thread: &str, id: &str) {
    ensure!(unloaded == 0, "L1", "{thread} used {id} after it was unloaded");
}

/// The capacity of a `FixedSizeCache` world: `alive` models after a load of `id`, at most `max`.
pub(crate) fn within_capacity(alive: usize, max: usize, id: &str) {
    ensure!(alive <= max, "capacity", "{alive} models alive after loading {id}; max_size is {max}");
}

/// I1, I2: enters a critical region counted by `active` (one load, or one mutation, of an id
/// at a time); fails the execution if someone else is in it.
pub(crate) fn exclusive<R: SimRuntime>(active: &R::Counter, invariant: &'static str, what: &str, id: &str) {
    let before = active.add(1);
    ensure!(before == 0, invariant, "{} {what}s of {id} ran at the same time", before + 1);
}

/// I3 at quiescence: the lifecycle table holds only registered ids, none reserved or locked.
pub fn lifecycle_released(snapshot: &Snapshot) {
    for entry in &snapshot.lifecycle {
        ensure!(
            snapshot.registered.contains(&entry.id),
            "I3",
            "lifecycle entry of {} (generation {}) outlived its model",
            entry.id,
            entry.generation
        );
        ensure!(
            entry.reservations == 0 && !entry.locked,
            "I3",
            "lifecycle entry of {} has {} reservation(s), locked={}, with no caller left",
            entry.id,
            entry.reservations,
            entry.locked
        );
    }
}

impl<R: SimRuntime, S: Manager<Model = SimModel<R>, Runtime = R>> ManagerWorld<R, S> {
    /// Quiescence checks, after every thread has been joined:
    /// - I3: the lifecycle table holds only registered ids, none reserved or locked;
    /// - I14: each id has exactly as many live models as it has registrations (no orphans).
    pub fn check_quiescent(&self) {
        let snapshot = self.manager.snapshot();
        lifecycle_released(&snapshot);
        if self.manager.is_shut_down() {
            // A shut-down stack refuses leases, which tell a registration's model id: count
            // every id together.
            let (alive, registered) = (self.probe.alive_total(), snapshot.registered.len());
            ensure!(
                alive == registered,
                "I14",
                "{alive} model(s) built and not unloaded, {registered} registered"
            );
            return;
        }
        let mut registered: BTreeMap<String, usize> = BTreeMap::new();
        for id in &snapshot.registered {
            let lease = self.manager.lease(id.as_str());
            ensure!(lease.is_ok(), "I14", "registered {id} cannot be leased at quiescence: {lease:?}");
            if let Ok(lease) = lease {
                *registered.entry(lease.id.clone()).or_default() += 1;
            }
        }
        for (id, probe) in &self.probe.ids {
            let registered = registered.get(id).copied().unwrap_or(0);
            ensure!(
                probe.alive() == registered,
                "I14",
                "{id}: {} model(s) built and not unloaded, {registered} registered",
                probe.alive()
            );
        }
    }
}

/// I4 at quiescence (and after every completed mutation): the cache's queue holds exactly the
/// registered ids, each once.
pub fn check_queue<M: Manager>(cache: &FixedSizeCache<M>) {
    let queue = cache.queue();
    let mut registered = cache.ids();
    let mut queued = queue.clone();
    queued.sort();
    registered.sort();
    let mut deduped = queued.clone();
    deduped.dedup();
    ensure!(deduped.len() == queued.len(), "I4", "queue {queue:?} has duplicates");
    ensure!(queued == registered, "I4", "queue {queue:?} but registered {registered:?}");
    ensure!(cache.loading() == 0, "I4", "{} cold loads still counted at quiescence", cache.loading());
}

// ---- The shared-weight cache ----------------------------------------------------------------

/// A7 on a device: `used` bytes live or moving on device `on`, within its `budget`.
pub(crate) fn device_within_budget(used: u64, budget: u64, on: &str) {
    ensure!(used <= budget, "A7", "{used} bytes live or moving on {on}, over its device budget of {budget}");
}

impl<R: SimRuntime> CacheWorld<R> {
    /// A7 at any step: bytes in use plus bytes reserved are within the cap.
    pub fn check_committed(&self, at: &str) {
        // One read of the sum: two reads could straddle a debit and a reservation after it.
        let budget = self.group.budget();
        let (committed, cap) = (budget.committed(), budget.cap());
        ensure!(committed <= cap, "A7", "{committed} bytes in use or reserved, over the cap {cap} ({at})");
    }

    /// A1 at quiescence (keep-alive expiry [stopped](Self::stop_expiry) first): the budget
    /// counts each distinct live canonical once plus every private resident record, and nothing
    /// else.
    pub fn check_accounting(&self) {
        self.stop_expiry();
        let mut canonicals: BTreeMap<CanonicalId, u64> = BTreeMap::new();
        let mut private = 0;
        for record in self.caches.iter().flat_map(|c| c.resident()) {
            match record.canonical {
                Some(id) => {
                    canonicals.insert(id, record.bytes);
                }
                None => private += record.bytes,
            }
        }
        let expected = canonicals.values().sum::<u64>() + private;
        let counted = self.group.budget().in_use();
        ensure!(counted == expected, "A1", "budget counts {counted} bytes, {expected} are alive");
    }

    /// A2 at quiescence (no duplicate, no forgotten canonical): every resident record of shared
    /// weights uses the canonical the store holds for its key now. A record that adopted weights
    /// `drop_model` made the store forget, or a second canonical of a key beside the store's,
    /// would be served on while every new load builds (or adopts) other weights.
    pub fn check_store_current(&self) {
        for cache in &self.caches {
            for record in cache.resident().into_iter().filter(|r| !r.detached) {
                let Some(canonical) = record.canonical else { continue };
                let current = self.group.store().adopt(&record.key).map(|c| c.id());
                ensure!(
                    current == Some(canonical),
                    "A2",
                    "{} keeps {} on shared weights the store does not hold for it (the store's: {})",
                    cache.device(),
                    record.key,
                    if current.is_some() { "other weights" } else { "none" }
                );
            }
        }
    }

    /// A9 (no lost reconcile): the budget is back within its cap; `why` says what should have
    /// brought it there.
    pub fn check_within_cap(&self, why: &str) {
        let budget = self.group.budget();
        let (used, cap) = (budget.in_use(), budget.cap());
        ensure!(used <= cap, "A9", "budget {used} over cap {cap}: {why}");
    }

    /// A6: with every handle gone, shutting every cache down leaves nothing resident or counted;
    /// and (A4, 3.7) every record admitted was reported evicted once.
    pub fn check_drained(&self) {
        for cache in &self.caches {
            cache.shutdown();
            ensure!(
                cache.keys().is_empty(),
                "A6",
                "{} keeps {:?} after shutdown with no handle left",
                cache.device(),
                cache.keys()
            );
            // 3.7: every record admitted left through a path that reported it, exactly once.
            let stats = cache.stats();
            ensure!(
                stats.evictions == stats.admissions,
                "A4",
                "{} admitted {} records and reported {} evictions, with none left",
                cache.device(),
                stats.admissions,
                stats.evictions
            );
        }
        let counted = self.group.budget().in_use();
        ensure!(counted == 0, "A6", "{counted} bytes still counted with no record left");
        let reserved = self.group.budget().reserved();
        ensure!(reserved == 0, "A6", "{reserved} bytes still reserved with no load left");
    }
}

/// A5: a locked record is resident in its cache (no path evicted it while locked).
pub fn ensure_resident<R: SimRuntime>(
    cache: &DeviceCache<Weights<R>, R>,
    guard: &ModelGuard<Weights<R>, R>,
    thread: &str,
) {
    let id = guard.canonical_id();
    let resident = cache.resident().iter().any(|r| !r.detached && r.key == guard.key() && r.canonical == id);
    ensure!(resident, "A5", "{thread} locked {} but its record was evicted", guard.key());
}

/// A5 where a replace may detach a record in use: the locked record is still in its cache, as
/// its key's occupant or detached from it (a stale record whose key a newer admission took),
/// never evicted.
pub fn ensure_not_evicted<R: SimRuntime>(
    cache: &DeviceCache<Weights<R>, R>,
    guard: &ModelGuard<Weights<R>, R>,
    thread: &str,
) {
    let id = guard.canonical_id();
    let kept = cache.resident().iter().any(|r| r.key == guard.key() && r.canonical == id);
    ensure!(kept, "A5", "{thread} locked {} but its record was evicted", guard.key());
}
