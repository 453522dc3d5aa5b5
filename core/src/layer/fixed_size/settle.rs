//! Bringing the queue in line with the registry: the [`Settle`] guard an add or a removal holds
//! with the id's lifecycle lock, and the reconcile that drops ids a layer below removed (SPEC
//! 2.4, 2.11: I4 at every depth).

use super::FixedSizeCache;
use crate::id::ModelId;
use crate::manager::Manager;
use crate::mutants::Mutant;
use crate::runtime::AtomicWord;
use crate::runtime::Ordering::{AcqRel, Acquire};

/// Which way a [`Settle`] guard brings an id's queue entry in line with the registry.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum Settling {
    /// After a cold add: a registered id is queued, an unregistered one is not (an entry a
    /// reconcile left to this lock's holder included), and ids a layer below evicted meanwhile
    /// leave the queue.
    Add,
    /// After a removal: an unregistered id is not queued.
    Remove,
}

/// Held with an id's lifecycle lock (so its registration is stable) across inner calls that
/// run user code: on every exit, a panic included, it settles the id's queue entry from the
/// registry and wakes the adds waiting for room. A call that returns ends it with the
/// registration it saw under the lock ([`Settle::registered`], [`Settle::settled`]) instead of
/// asking the registry again.
pub(super) struct Settle<'a, M: Manager> {
    pub(super) cache: &'a FixedSizeCache<M>,
    pub(super) id: &'a ModelId,
    pub(super) way: Settling,
}

impl<M: Manager> Settle<'_, M> {
    /// Settles now, with the registration the caller saw under the lock (which keeps it so)
    /// rather than asking the registry again.
    pub(super) fn registered(self, registered: bool) {
        // Disarmed first: a settle that panics must not settle again in the unwind.
        std::mem::ManuallyDrop::new(self).settle(registered);
    }

    /// Ends a removal's guard with nothing left to do: under the lock, the caller saw the id
    /// removed and dropped it from the book itself, or saw it kept (registered, so left as is).
    pub(super) fn settled(self) {
        debug_assert!(self.way == Settling::Remove, "an add's guard also reconciles");
        std::mem::forget(self);
    }

    fn settle(&self, registered: bool) {
        let keeps_stale =
            self.way == Settling::Add && self.cache.mutant(Mutant::FAILED_ADD_KEEPS_STALE_ENTRY);
        match self.way {
            Settling::Add | Settling::Remove if !registered && !keeps_stale => {
                self.cache.forget(self.id);
            }
            Settling::Add if registered => self.cache.book.with(|b| {
                if !b.queue.contains(self.id) {
                    b.push(self.id);
                }
            }),
            Settling::Add | Settling::Remove => {}
        }
        if self.way == Settling::Add {
            self.cache.reconcile_below(Some(self.id));
        }
    }
}

impl<M: Manager> Drop for Settle<'_, M> {
    fn drop(&mut self) {
        self.settle(self.cache.inner.contains(self.id.as_str()));
    }
}

impl<M: Manager> FixedSizeCache<M> {
    /// Drops `id` (no longer registered) from the book; the bytes it had recorded for it, read
    /// in the same critical section. The slot it freed may be the one an add waits for: that
    /// add is told now, not when the lifecycle lock is released (its caller may hold it on, as
    /// `remove_locked`'s and `evict_locked`'s callers may).
    pub(super) fn forget(&self, id: &ModelId) -> u64 {
        let (bytes, queued) = self.book.with(|b| (b.sizes.get_by(id).copied().unwrap_or(0), b.forget(id)));
        if queued {
            self.inner.changes().bump_at(Mutant::LOST_WAKEUP_SLOT_FORGOTTEN);
        }
        bytes
    }

    /// Drops queued ids (other than `except`, the id whose lock the caller holds) that a layer
    /// below removed — an inner cache's evictions — so that this layer's queue equals the
    /// registry again (I4 at every depth); whether it dropped any. An id whose lifecycle lock
    /// is busy is left to its holder, who settles it. Nothing to look for while the stack
    /// counted no removal since the last look that found every queued id registered or dropped
    /// it ([`Manager::removals`]).
    pub(super) fn reconcile_below(&self, except: Option<&ModelId>) -> bool {
        if self.mutant(Mutant::NESTED_QUEUE_STALE) {
            return false;
        }
        // Read before the queue: a removal counted after this read is looked for next time.
        let count = self.inner.removals();
        if count.is_some_and(|count| count == self.reconciled_at.load(Acquire)) {
            return false;
        }
        // The queue's ids, each asked of the registry below on its own: no copy of the whole
        // registry per cold add (each is asked again under its lock before it is forgotten).
        let queued: Vec<ModelId> =
            self.book.with(|b| b.queue.iter().filter(|q| Some(*q) != except).cloned().collect());
        let (mut dropped, mut all_settled) = (false, true);
        for id in queued.iter().filter(|id| !self.inner.contains(id.as_str())) {
            let Some(guard) = self.inner.try_lock(id) else {
                all_settled = false;
                continue;
            };
            if !self.inner.contains(id.as_str()) {
                self.book.with(|b| b.forget(id));
                dropped = true;
            }
            drop(guard);
        }
        // A busy id left to its holder may be a layer below's eviction, which settles only its
        // own queue: it is looked for again next time.
        let past_busy = self.mutant(Mutant::RECONCILE_PAST_BUSY);
        if let Some(count) = count.filter(|_| all_settled || past_busy) {
            self.reconciled_at.fetch_max(count, AcqRel);
        }
        dropped
    }

    /// After this layer's own eviction, counted from `before` on, and its queue updated: if the
    /// queue was reconciled at `before` and the eviction was the only removal since, it still
    /// is (so the next reconcile looks for nothing).
    pub(super) fn reconciled_past_own(&self, before: Option<u64>) {
        let (Some(before), Some(after)) = (before, self.inner.removals()) else { return };
        let past_others = self.mutant(Mutant::RECONCILE_PAST_OTHERS);
        if before.checked_add(1) == Some(after) || past_others {
            let _ = self.reconciled_at.compare_exchange(before, after, AcqRel, Acquire);
        }
    }
}
