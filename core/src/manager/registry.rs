//! The registry: resolved id → model slot, and the in-place replaces under way, read by every
//! lease without the table's monitor. Sharded by id, each shard behind its own reader-writer
//! lock on its own cache line, so that leases of different ids share no lock word and leases of
//! one id only read theirs.
//!
//! Writes (registering, switching and removing versions) happen under the id's lifecycle lock
//! and, where the table's retirement rule reads the registry, under the table's monitor too
//! (lock order: table monitor → shard lock → nothing).

use super::lease::ModelSlot;
use crate::id::ModelId;
use crate::runtime::Ordering::{Acquire, Release};
use std::time::Duration;

use crate::hashed::Keyed;
use crate::mutants::Mutant;
use crate::runtime::{Arc, AtomicWord, Monitor, Runtime, RwLock, TimedOut};
use crate::shards::{ById, Shards};

/// What a lease finds under an id.
pub(crate) enum Found<M, R: Runtime> {
    /// The registered model's slot.
    Slot(Arc<ModelSlot<M, R>>),
    /// An in-place replace of the id, to wait for.
    Swapping(Arc<Swap<R>>),
}

/// An in-place replace under way; settled once, when the id has its new version or none.
pub(crate) struct Swap<R: Runtime> {
    settled: R::Monitor<bool>,
}

impl<R: Runtime> Swap<R> {
    pub(crate) fn new(runtime: &R) -> Self {
        Self { settled: runtime.monitor(false) }
    }

    /// Waits at most `timeout` for the swap to settle.
    pub(crate) fn wait(&self, timeout: Duration) -> Result<(), TimedOut> {
        self.settled.wait_until(Some(timeout), |settled| settled.then_some(()))
    }

    /// The swap is over (the table no longer lists it): wakes the leases waiting for it.
    pub(crate) fn settle(&self, runtime: &R) {
        self.settled.with(|settled| *settled = true);
        if !runtime.mutant(Mutant::LOST_WAKEUP_SWAP_SETTLED) {
            self.settled.notify_all();
        }
    }
}

/// What one shard keeps.
struct Shard<M: Send + Sync + 'static, R: Runtime> {
    slots: ById<Arc<ModelSlot<M, R>>>,
    swaps: ById<Arc<Swap<R>>>,
}

/// The registry (see the module docs).
pub(crate) struct Registry<M: Send + Sync + 'static, R: Runtime> {
    shards: Shards<Shard<M, R>, R>,
    /// 1 once shut down, for good.
    shut_down: R::Atomic,
    /// How many times an id has stopped being registered, counted after each such removal
    /// (see [`Registry::removals`]).
    removals: R::Atomic,
}

impl<M: Send + Sync + 'static, R: Runtime> Registry<M, R> {
    pub(crate) fn new(runtime: &R) -> Self {
        let empty = || Shard { slots: ById::default(), swaps: ById::default() };
        Self {
            shards: Shards::new(runtime, empty),
            shut_down: runtime.atomic(0),
            removals: runtime.atomic(0),
        }
    }

    fn shard<K: Keyed<ModelId> + ?Sized>(&self, id: &K) -> (&R::RwLock<Shard<M, R>>, u64) {
        self.shards.of(id)
    }

    /// What a lease of `id` finds, in one read of its shard: the in-place replace it must wait
    /// for, else the slot (`swap_gone`: the S-R2i mutant, which overlooks the replace).
    pub(crate) fn lookup<K: Keyed<ModelId> + ?Sized>(&self, id: &K, swap_gone: bool) -> Option<Found<M, R>> {
        let (shard, at) = self.shard(id);
        // In-place replaces are rare: most lookups find none listed in their shard at all.
        shard.read(|s| match (!s.swaps.is_empty()).then(|| s.swaps.get_at(at, id)).flatten() {
            Some(_) if swap_gone => None,
            Some(swap) => Some(Found::Swapping(Arc::clone(swap))),
            None => s.slots.get_at(at, id).cloned().map(Found::Slot),
        })
    }

    /// The slot registered under `id`. The caller drops the clone outside every lock.
    pub(crate) fn get<K: Keyed<ModelId> + ?Sized>(&self, id: &K) -> Option<Arc<ModelSlot<M, R>>> {
        let (shard, at) = self.shard(id);
        shard.read(|s| s.slots.get_at(at, id).cloned())
    }

    /// Runs `f` on the slot registered under `id` without taking a reference to it (so that
    /// no model is ever dropped by the caller).
    pub(crate) fn with_slot<K: Keyed<ModelId> + ?Sized, U>(
        &self,
        id: &K,
        f: impl FnOnce(Option<&ModelSlot<M, R>>) -> U,
    ) -> U {
        let (shard, at) = self.shard(id);
        shard.read(|s| f(s.slots.get_at(at, id).map(|slot| &**slot)))
    }

    pub(crate) fn contains_key<K: Keyed<ModelId> + ?Sized>(&self, id: &K) -> bool {
        let (shard, at) = self.shard(id);
        shard.read(|s| s.slots.get_at(at, id).is_some())
    }

    /// Registers `slot` under `id`; the slot it replaces, which the caller drops outside every
    /// lock.
    pub(crate) fn insert(&self, id: ModelId, slot: Arc<ModelSlot<M, R>>) -> Option<Arc<ModelSlot<M, R>>> {
        let (shard, at) = self.shard(&id);
        shard.write(|s| s.slots.insert(at, id, slot))
    }

    /// Unregisters `id`; the slot, which the caller drops outside every lock.
    pub(crate) fn remove<K: Keyed<ModelId> + ?Sized>(
        &self,
        runtime: &R,
        id: &K,
    ) -> Option<Arc<ModelSlot<M, R>>> {
        // Counted after the removal, so that a reader that sees the count sees the id gone.
        let first = runtime.mutant(Mutant::REMOVAL_COUNTED_FIRST);
        if first && self.contains_key(id) {
            self.removals.fetch_add(1, Release);
        }
        let (shard, at) = self.shard(id);
        let removed = shard.write(|s| s.slots.remove_at(at, id));
        if removed.is_some() && !first {
            self.removals.fetch_add(1, Release);
        }
        removed
    }

    /// How many times an id has stopped being registered so far. Each removal is counted after
    /// it took effect (release), so a reader of a count (acquire) that then asks whether an id
    /// is registered sees every removal the count includes.
    pub(crate) fn removals(&self) -> u64 {
        self.removals.load(Acquire)
    }

    /// Every registered id, in order.
    pub(crate) fn ids(&self) -> Vec<ModelId> {
        let mut ids = Vec::new();
        for shard in self.shards.iter() {
            shard.read(|s| ids.extend(s.slots.iter().map(|(id, _)| id.clone())));
        }
        ids.sort();
        ids
    }

    /// Lists an in-place replace of `id` under way: its leases wait for it.
    pub(crate) fn insert_swap(&self, id: ModelId, swap: Arc<Swap<R>>) {
        let (shard, at) = self.shard(&id);
        shard.write(|s| s.swaps.insert(at, id, swap));
    }

    /// Unlists `swap` if it is still the one listed for `id`; whether it was.
    pub(crate) fn remove_swap<K: Keyed<ModelId> + ?Sized>(&self, id: &K, swap: &Arc<Swap<R>>) -> bool {
        let (shard, at) = self.shard(id);
        shard.write(|s| {
            let listed = s.swaps.get_at(at, id).is_some_and(|listed| Arc::ptr_eq(listed, swap));
            if listed {
                s.swaps.remove_at(at, id);
            }
            listed
        })
    }

    /// Shuts down for good: adds and leases are refused from now on.
    pub(crate) fn shut_down(&self) {
        self.shut_down.store(1, Release);
    }

    pub(crate) fn is_shut_down(&self) -> bool {
        self.shut_down.load(Acquire) != 0
    }
}
