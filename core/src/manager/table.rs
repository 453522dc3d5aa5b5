//! The registry and the lifecycle table, kept together behind one short monitor.
//!
//! Keeping both maps under one monitor makes the retirement rule a single atomic check: an
//! entry is retired only when it is still the current generation of its id, has no
//! reservations, and the id is not registered (invariants I2 and I3).

use std::collections::BTreeMap;

use super::lease::Slot;
use crate::id::ModelId;
use crate::runtime::{Arc, Runtime, TimedLock};

/// One generation of a resolved id's lifecycle lock.
pub(crate) struct LifecycleEntry<R: Runtime> {
    pub(crate) lock: TimedLock<R>,
    pub(crate) generation: u64,
}

struct LifecycleRecord<R: Runtime> {
    entry: Arc<LifecycleEntry<R>>,
    reservations: usize,
}

/// Registry (`resolved id -> model slot`) plus lifecycle table (`resolved id -> entry`).
pub(crate) struct Table<M, R: Runtime> {
    pub(crate) registry: BTreeMap<ModelId, Arc<Slot<M, R>>>,
    lifecycle: BTreeMap<ModelId, LifecycleRecord<R>>,
    generations: u64,
}

impl<M, R: Runtime> Table<M, R> {
    pub(crate) fn new() -> Self {
        Self { registry: BTreeMap::new(), lifecycle: BTreeMap::new(), generations: 0 }
    }

    /// Reserves the current generation of `id`, creating one if there is none.
    pub(crate) fn reserve(&mut self, id: &ModelId, runtime: &R) -> Arc<LifecycleEntry<R>> {
        let Self { lifecycle, generations, .. } = self;
        let record = lifecycle.entry(id.clone()).or_insert_with(|| {
            *generations += 1;
            tracing::trace!(%id, generation = *generations, "lifecycle entry created");
            LifecycleRecord {
                entry: Arc::new(LifecycleEntry { lock: TimedLock::new(runtime), generation: *generations }),
                reservations: 0,
            }
        });
        record.reservations += 1;
        Arc::clone(&record.entry)
    }

    /// Releases one reservation of `entry`, retiring it if that was the last one and the id is
    /// not registered. A stale generation (no longer current) is left alone.
    pub(crate) fn unreserve(&mut self, id: &ModelId, entry: &Arc<LifecycleEntry<R>>) {
        let Some(record) = self.lifecycle.get_mut(id) else { return };
        if !Arc::ptr_eq(&record.entry, entry) {
            return;
        }
        debug_assert!(record.reservations > 0, "reservation count underflow for {id}");
        record.reservations -= 1;
        if record.reservations == 0 && !self.registry.contains_key(id) {
            tracing::trace!(%id, generation = entry.generation, "lifecycle entry retired");
            self.lifecycle.remove(id);
        }
    }

    /// Forgets the current entry of `id` whatever its state. Only the mutants call this: it is
    /// the historical "dispose the lock entry" that splits generations.
    pub(crate) fn forget(&mut self, id: &ModelId) {
        self.lifecycle.remove(id);
    }

    /// The current entry of `id`, if any.
    pub(crate) fn entry(&self, id: &ModelId) -> Option<Arc<LifecycleEntry<R>>> {
        self.lifecycle.get(id).map(|r| Arc::clone(&r.entry))
    }

    /// `(id, generation, reservations, entry)` of every lifecycle entry, in id order.
    pub(crate) fn lifecycle(&self) -> Vec<(ModelId, u64, usize, Arc<LifecycleEntry<R>>)> {
        self.lifecycle
            .iter()
            .map(|(id, r)| (id.clone(), r.entry.generation, r.reservations, Arc::clone(&r.entry)))
            .collect()
    }
}
