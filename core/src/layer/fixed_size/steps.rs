//! The layer's steps: the [`Decorator`](crate::layer::Decorator) impl through which every call
//! of the stack reaches this layer under the id's lifecycle lock, and the replace it routes
//! through (beside the old version, or in its place).

use super::{CapacityPolicy, FixedSizeCache, Settle, Settling};
use crate::deadline::Deadline;
use crate::error::{ManagerError, RegisterError};
use crate::held::Held;
use crate::id::ModelId;
use crate::manager::{Added, Eviction, Lease, LifecycleGuard, Manager, Replaced};
use crate::mutants::Mutant;
use crate::runtime::AtomicWord;
use crate::runtime::Ordering::{Acquire, Release};

// ---- The layer's steps --------------------------------------------------------------------------

/// Implemented by its path, so that inside this folder the methods it shares with
/// [`Manager`] need no qualification.
impl<M: Manager> crate::layer::Decorator for FixedSizeCache<M> {
    type Inner = M;

    fn inner(&self) -> &M {
        &self.inner
    }

    /// The unpins below, and this layer's own.
    fn unpins(&self) -> Option<u64> {
        let below = self.inner.unpins()?;
        Some(below.saturating_add(self.unpins.load(Acquire)))
    }

    fn add_locked(
        &self,
        guard: &LifecycleGuard<M::Model, M::Runtime>,
        canonical: &ModelId,
    ) -> Result<Added, ManagerError> {
        let id = guard.id();
        if self.mutant(Mutant::CANONICAL_WARM_CHECK) && self.inner.contains(canonical.as_str()) {
            self.touch(id);
            return Ok(Added::Warm);
        }
        if self.inner.contains(id.as_str()) {
            let added = self.inner.add_locked(guard, canonical)?;
            if !self.mutant(Mutant::WARM_TOUCH_OUTSIDE_LOCK) {
                self.touch(id);
            }
            self.adopt(id);
            return Ok(added);
        }
        self.add_cold(guard, Some(canonical), || self.inner.add_locked(guard, canonical))
    }

    /// Makes room for the new version beside the old one first (the id itself is never a
    /// victim); the id keeps its place in the queue and its pin.
    fn replace_locked(
        &self,
        guard: &LifecycleGuard<M::Model, M::Runtime>,
        canonical: &ModelId,
    ) -> Result<Replaced, ManagerError> {
        self.replace_through(guard, canonical, false)
    }

    /// Needs no slot beside the old version: the id keeps its place in the queue (and in the
    /// count) while its new version loads into the slot the old one left, and its pin. If the
    /// new version fails to load, the id leaves the queue.
    fn replace_in_place_locked(
        &self,
        guard: &LifecycleGuard<M::Model, M::Runtime>,
        canonical: &ModelId,
    ) -> Result<Replaced, ManagerError> {
        self.replace_through(guard, canonical, true)
    }

    fn remove_locked(&self, guard: &LifecycleGuard<M::Model, M::Runtime>) -> Result<(), ManagerError> {
        let id = guard.id();
        if self.mutant(Mutant::QUEUE_REMOVAL_FIRST) {
            self.book.with(|b| b.forget(id));
            return self.inner.remove_locked(guard);
        }
        let settle = (!self.mutant(Mutant::QUEUE_SKIPPED_ON_PANIC)).then_some(Settle {
            cache: self,
            id,
            way: Settling::Remove,
        });
        self.inner.remove_locked(guard)?;
        self.forget(id);
        if let Some(settle) = settle {
            settle.settled();
        }
        Ok(())
    }

    /// Skips a victim pinned in this layer; otherwise the layers below decide. The queue entry is
    /// settled on every exit (from what the eviction saw, or from the registry).
    fn evict_locked(&self, guard: &LifecycleGuard<M::Model, M::Runtime>) -> Result<Eviction, ManagerError> {
        self.evict_sized(guard).map(|(outcome, _)| outcome)
    }

    /// Goes through admission like a cold add: counted against `max_size`, evicting or waiting
    /// for room (bounded by the guard's deadline); queued once registered.
    fn register_locked(
        &self,
        guard: &LifecycleGuard<M::Model, M::Runtime>,
        model: M::Model,
    ) -> Result<(), RegisterError<M::Model>> {
        let id = guard.id();
        if self.inner.contains(id.as_str()) {
            // Registered already (and kept so by the lock): the layers below refuse it and
            // hand the model back. Whatever they register anyway is queued (I4).
            let registered = self.inner.register_locked(guard, model);
            if registered.is_ok() {
                self.book.with(|b| b.push(id));
            }
            return registered;
        }
        // Here until the inner call takes it, and back here if that refuses it.
        // Held across admission's reports and evictions (user code) until registered.
        let guarded = !self.mutant(Mutant::REGISTERED_MODEL_DROPPED_IN_UNWIND);
        let mut held = Held::<_, M::Runtime>::new(model, guarded);
        let added = self.add_cold(guard, None, || {
            let model = held.take().expect("the inner call runs once");
            self.inner.register_locked(guard, model).map(|()| Added::Loaded).map_err(|back| {
                held.put_back(back.model);
                back.error
            })
        });
        match (added, held.take()) {
            (Ok(_), _) => Ok(()),
            (Err(error), Some(model)) => Err(RegisterError::new(error, model)),
            (Err(error), None) => unreachable!("every refusal hands the model back: {error}"),
        }
    }

    fn lease_until(&self, id: &str, deadline: Deadline) -> Result<Lease<M::Model, M::Runtime>, ManagerError> {
        if self.mutant(Mutant::TOUCH_UNKNOWN) {
            let resolved = ModelId::new(id)?;
            self.book.with(|b| b.touch_appending(&resolved));
            return self.inner.lease_until(id, deadline);
        }
        let lease = self.inner.lease_until(id, deadline)?;
        self.touch(lease.id());
        Ok(lease)
    }

    /// Holding the id's lifecycle lock, it also drops a stale queue entry of it (one that a
    /// reconcile left to this lock's holder).
    fn pin_locked(&self, guard: &LifecycleGuard<M::Model, M::Runtime>) -> Result<(), ManagerError> {
        let _settle = Settle { cache: self, id: guard.id(), way: Settling::Remove };
        if !self.mutant(Mutant::PIN_NOT_FORWARDED) {
            self.inner.pin_locked(guard)?;
        }
        self.book.with(|b| b.pinned.insert(guard.id().clone()));
        Ok(())
    }

    /// Pinned here, or in a layer below.
    fn is_pinned(&self, id: &str) -> bool {
        self.book.with(|b| b.pinned.contains(id)) || self.inner.is_pinned(id)
    }

    /// Under the id's lifecycle lock, like the pin it undoes: every layer sees the pin and the
    /// unpin of one id in the same order. Like every holder of that lock, it drops a stale queue
    /// entry of the id.
    fn unpin_locked(&self, guard: &LifecycleGuard<M::Model, M::Runtime>) -> Result<(), ManagerError> {
        let _settle = Settle { cache: self, id: guard.id(), way: Settling::Remove };
        self.inner.unpin_locked(guard)?;
        self.book.with(|b| b.unpin(guard.id()));
        // Counted after the pin is lifted: a layer above that reads the count sees it lifted.
        self.unpins.fetch_add(1, Release);
        // An add waiting for room must re-plan (a victim it skipped is evictable now): the
        // release of `guard` wakes it, the one notify site of an unpin (W-5).
        Ok(())
    }
}

// ---- Replacing ----------------------------------------------------------------------------------

impl<M: Manager> FixedSizeCache<M> {
    /// A replace loads the new version beside the old one: refused at once when `max_size` can
    /// never hold both, with the old version's slot taken and every other slot pinned (in this
    /// layer or below). Loads in flight and models in use only make it wait: they end.
    fn check_slot_beside(&self, id: &ModelId) -> Result<(), ManagerError> {
        // A shut-down stack refuses with `ShutDown` first (the admission says so); under the
        // overflow policy the admission overflows instead of waiting.
        let overflows = self.config.policy() == CapacityPolicy::Overflow;
        if self.mutant(Mutant::REPLACE_WAITS_FOR_NO_SLOT) || overflows || self.inner.is_shut_down() {
            return Ok(());
        }
        let (max_size, others) = self.book.ordered(|b| {
            let others: Vec<ModelId> = b.queue.iter().filter(|q| *q != id).cloned().collect();
            (b.max_size, others)
        });
        // Asked outside the book's monitor: a layer below answers from its own.
        let pinned: Vec<ModelId> = others.into_iter().filter(|q| self.is_pinned(q.as_str())).collect();
        if max_size > pinned.len() + 1 {
            return Ok(());
        }
        Err(ManagerError::NoSlotBeside { id: id.clone(), max_size, pinned })
    }

    /// A replace through this layer, beside the old version or in its place. Nothing
    /// registered: an add. The id keeps its place in the queue and its pin; its size is read
    /// again after, and a version that grew may take the layer past `max_bytes`, as a cold add
    /// may (M-B1).
    fn replace_through(
        &self,
        guard: &LifecycleGuard<M::Model, M::Runtime>,
        canonical: &ModelId,
        in_place: bool,
    ) -> Result<Replaced, ManagerError> {
        let id = guard.id();
        if !self.inner.contains(id.as_str()) {
            return self.add_locked(guard, canonical).map(|_| Replaced::Added);
        }
        let settle = Settle { cache: self, id, way: Settling::Add };
        // The new version (or the old, if the replace failed after the registration's report)
        // is sized even if a report panics after the switch.
        let replace = || {
            if in_place {
                // Its queue entry holds its slot in the count while the new version loads.
                return self.inner.replace_in_place_locked(guard, canonical);
            }
            self.check_slot_beside(id)?;
            let admission = self.admit(id, guard.deadline(), true)?;
            let replaced = self.inner.replace_locked(guard, canonical)?;
            // The new version takes the old one's place: its slot in the count is not needed.
            drop(admission);
            Ok(replaced)
        };
        self.registering(id, replace, || {
            let bytes = self.size_of(id);
            self.book.with(|b| b.set_size(id, bytes));
            settle.registered(true);
            if !self.mutant(Mutant::REPLACE_SKIPS_MAX_BYTES) {
                self.enforce_bytes(id);
            }
        })
    }
}
