//! The registry and the lifecycle table, kept together behind one short monitor.
//!
//! Keeping both maps under one monitor makes the retirement rule a single atomic check: an
//! entry is retired only when it is still the current generation of its id, has no
//! reservations, and the id is not registered (invariants I2 and I3).

use std::collections::BTreeMap;
use std::time::Duration;

use super::lease::ModelSlot;
use super::registry::Registry;
use crate::error::ManagerError;
use crate::hashed::{Hashed, Keyed};
use crate::id::ModelId;
use crate::mutants::Mutant;
use crate::runtime::{Arc, Runtime, TimedLock};

/// One generation of a resolved id's lifecycle lock.
pub(crate) struct LifecycleEntry<R: Runtime> {
    pub(crate) lock: TimedLock<R>,
    pub(crate) generation: u64,
}

struct LifecycleRecord<R: Runtime> {
    entry: Arc<LifecycleEntry<R>>,
    reservations: usize,
    /// Reservations ever made of this generation: the next reservation's ticket.
    tickets: u64,
    /// The last failed load of this generation, shared with the callers that reserved it
    /// before the failure (SPEC 1.9).
    failure: Option<Failure>,
}

/// A failed load, kept for the callers that waited for it.
struct Failure {
    /// Tickets below this one were issued before the failure: their callers share it.
    before: u64,
    /// The canonical id that failed to load (callers of another model of the id load afresh).
    canonical: ModelId,
    error: ManagerError,
}

/// A failed load remembered for new callers ([`ManagerConfig::with_failure_cache`]).
///
/// [`ManagerConfig::with_failure_cache`]: super::ManagerConfig::with_failure_cache
struct Recent {
    canonical: ModelId,
    error: ManagerError,
    /// On the runtime's clock; `None`: never (the configured time was too long to represent).
    until: Option<Duration>,
}

/// Errors of failed loads the table let go of: they hold the loaders' errors, whose `Drop` is
/// user code, so the caller drops them once it has left the table's monitor.
#[must_use = "drop the displaced errors outside the table's monitor"]
pub(crate) struct Displaced(Vec<ManagerError>);

impl Displaced {
    fn push(&mut self, error: Option<ManagerError>) {
        self.0.extend(error);
    }

    /// Whether no error was let go of (nothing of the user's to drop).
    pub(crate) fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

/// One reservation of a generation, as [`Table::reserve`] hands it out.
pub(crate) struct Reserved<R: Runtime> {
    pub(crate) entry: Arc<LifecycleEntry<R>>,
    /// The reservation's place in the generation's order (see [`Table::shared_failure`]).
    pub(crate) ticket: u64,
    /// Whether this reservation created the generation (reported by the caller, outside the
    /// monitor: a subscriber is user code).
    pub(crate) created: bool,
}

// ---- The table ----------------------------------------------------------------------------------

/// Lifecycle table (`resolved id -> entry`), with the registry (`resolved id -> model slot`)
/// it retires entries by: leases read the registry without this monitor, every change of it
/// that the retirement rule depends on is made under it.
pub(crate) struct Table<M: Send + Sync + 'static, R: Runtime> {
    pub(crate) registry: Arc<Registry<M, R>>,
    /// Hashed: every add and every eviction reserves and releases an entry (one probe under the
    /// hash the id keeps and one compare each, where an ordered map compared the id with its
    /// neighbours); whatever lists the ids sorts them.
    lifecycle: Hashed<ModelId, LifecycleRecord<R>>,
    generations: u64,
    /// Recent failed loads by resolved id, while the negative cache is on.
    recent: BTreeMap<ModelId, Recent>,
}

/// What [`Table::register`] did: the slot it displaced, or the slot back (refused).
pub(crate) type Registered<M, R> = Result<Option<Arc<ModelSlot<M, R>>>, Arc<ModelSlot<M, R>>>;

impl<M: Send + Sync + 'static, R: Runtime> Table<M, R> {
    pub(crate) fn new(registry: Arc<Registry<M, R>>) -> Self {
        Self { registry, lifecycle: Hashed::default(), generations: 0, recent: BTreeMap::new() }
    }

    /// Reserves the current generation of `id`, creating one if there is none.
    pub(crate) fn reserve(&mut self, id: &ModelId, runtime: &R) -> Reserved<R> {
        let Self { lifecycle, generations, .. } = self;
        let (record, created) = lifecycle.get_or_insert_with(id, || {
            *generations += 1;
            LifecycleRecord {
                entry: Arc::new(LifecycleEntry { lock: TimedLock::new(runtime), generation: *generations }),
                reservations: 0,
                tickets: 0,
                failure: None,
            }
        });
        record.reservations += 1;
        record.tickets += 1;
        Reserved { entry: Arc::clone(&record.entry), ticket: record.tickets - 1, created }
    }

    /// Records that loading `canonical` under generation `entry` of `id` failed with `error`:
    /// the callers that reserved the generation so far share it. With `negative: Some(time)`
    /// new callers get it too for that long from `now` (for good if the end is too far to
    /// represent); expired failures are pruned.
    pub(crate) fn record_failure(
        &mut self,
        id: &ModelId,
        entry: &Arc<LifecycleEntry<R>>,
        canonical: &ModelId,
        error: &ManagerError,
        negative: Option<Duration>,
        now: Duration,
    ) -> Displaced {
        let mut displaced = Displaced(Vec::new());
        if let Some(record) = self.lifecycle.get_mut_by(id).filter(|r| Arc::ptr_eq(&r.entry, entry)) {
            let failure =
                Failure { before: record.tickets, canonical: canonical.clone(), error: error.clone() };
            displaced.push(record.failure.replace(failure).map(|f| f.error));
        }
        if let Some(time) = negative {
            let until = now.checked_add(time);
            let expired: Vec<ModelId> = self
                .recent
                .iter()
                .filter(|(_, r)| r.until.is_some_and(|u| now >= u))
                .map(|(k, _)| k.clone())
                .collect();
            for key in expired {
                displaced.push(self.recent.remove(&key).map(|r| r.error));
            }
            let recent = Recent { canonical: canonical.clone(), error: error.clone(), until };
            displaced.push(self.recent.insert(id.clone(), recent).map(|r| r.error));
        }
        displaced
    }

    /// The failure that a caller holding ticket `ticket` of generation `entry` of `id`, about
    /// to load `canonical`, receives instead of loading: the generation's last failed load of
    /// the same canonical id if it failed after the caller reserved, else a failure of the
    /// negative cache that has not expired at `now()` (read only if there is one).
    pub(crate) fn shared_failure(
        &self,
        id: &ModelId,
        entry: &Arc<LifecycleEntry<R>>,
        ticket: u64,
        canonical: &ModelId,
        now: impl FnOnce() -> Duration,
    ) -> Option<ManagerError> {
        let shared = self
            .lifecycle
            .get_by(id)
            .filter(|r| Arc::ptr_eq(&r.entry, entry))
            .and_then(|r| r.failure.as_ref())
            .filter(|f| ticket < f.before && f.canonical == *canonical);
        let recent = || {
            let remembered = self.recent.get(id).filter(|r| r.canonical == *canonical)?;
            // The clock is read only when there is a remembered failure to expire.
            remembered.until.is_none_or(|u| now() < u).then_some(remembered)
        };
        shared.map(|f| f.error.clone()).or_else(|| recent().map(|r| r.error.clone()))
    }

    /// A load of `id` succeeded: the negative cache forgets its failure. The generation keeps
    /// the last failure for the callers that reserved before it and have not had the lock
    /// yet (they waited for that load: they get its error, S-F1); later callers never see it.
    pub(crate) fn loaded(&mut self, id: &ModelId) -> Displaced {
        Displaced(self.recent.remove(id).map(|r| r.error).into_iter().collect())
    }

    /// Releases one reservation of `entry`, retiring it if that was the last one and the id is
    /// not registered (then `true`, with the failure it kept). A stale generation (no longer
    /// current) is left alone.
    pub(crate) fn unreserve(&mut self, id: &ModelId, entry: &Arc<LifecycleEntry<R>>) -> (bool, Displaced) {
        let mut displaced = Displaced(Vec::new());
        let Some(record) = self.lifecycle.get_mut_by(id) else { return (false, displaced) };
        if !Arc::ptr_eq(&record.entry, entry) {
            return (false, displaced);
        }
        debug_assert!(record.reservations > 0, "reservation count underflow for {id}");
        record.reservations -= 1;
        let retired = record.reservations == 0 && !self.registry.contains_key(id);
        if retired {
            displaced.push(self.lifecycle.remove_by(id).and_then(|r| r.failure).map(|f| f.error));
        }
        (retired, displaced)
    }

    /// Forgets the current entry of `id` whatever its state. Only the mutants call this: it is
    /// the historical "dispose the lock entry" that splits generations.
    pub(crate) fn forget(&mut self, id: &ModelId) {
        self.lifecycle.remove_by(id);
    }

    /// Shuts down for good; the ids a shutdown must settle: every registered id, and every id
    /// with a lifecycle entry (an add or an in-place replace that got past the shut-down check
    /// before this holds one, and registers only under its lock). Every registration happens
    /// under this monitor and is refused once the flag is set, so the registry cannot change
    /// its mind between the two reads. `bug` says whether the S-G1 mutant is on.
    pub(crate) fn shut_down(&mut self, bug: impl Fn(Mutant) -> bool) -> Vec<ModelId> {
        self.registry.shut_down();
        let mut ids: Vec<ModelId> = self.registry.ids();
        if bug(Mutant::SHUTDOWN_REGISTRY_ONLY) {
            return ids;
        }
        ids.extend(self.lifecycle.iter().map(|(id, _)| id.clone()));
        ids.sort();
        ids.dedup();
        ids
    }

    /// Registers `slot` under `id`, unless the manager is shut down and `refuse` (not under the
    /// `registered-after-shutdown` mutant): the slot it displaced, or `slot` back. A shutdown
    /// lists the ids under this monitor, so a call racing it either registered before the
    /// listing (which then covers it) or is refused (SPEC 1.13): a load that outlasts the
    /// shutdown's wait for its lock never registers after it.
    pub(crate) fn register(
        &mut self,
        id: ModelId,
        slot: Arc<ModelSlot<M, R>>,
        refuse: bool,
    ) -> Registered<M, R> {
        if refuse && self.registry.is_shut_down() {
            return Err(slot);
        }
        Ok(self.registry.insert(id, slot))
    }

    /// The current entry of `id`, if any.
    pub(crate) fn entry<K: Keyed<ModelId> + ?Sized>(&self, id: &K) -> Option<Arc<LifecycleEntry<R>>> {
        self.lifecycle.get_by(id).map(|r| Arc::clone(&r.entry))
    }

    /// `(id, generation, reservations, entry)` of every lifecycle entry, in id order.
    pub(crate) fn lifecycle(&self) -> Vec<(ModelId, u64, usize, Arc<LifecycleEntry<R>>)> {
        let mut entries: Vec<_> = self
            .lifecycle
            .iter()
            .map(|(id, r)| (id.clone(), r.entry.generation, r.reservations, Arc::clone(&r.entry)))
            .collect();
        entries.sort_unstable_by(|a, b| a.0.cmp(&b.0));
        entries
    }
}
