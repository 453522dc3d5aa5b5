//! Eviction: taking victims out of the stack for room (each under its own lifecycle lock,
//! taken with `try_lock`), and the byte budget enforced after a load.

use super::plans::{self, Below, Stack};
use super::queue::BelowCounts;
use super::{FixedSizeCache, Settle, Settling};
use crate::error::ManagerError;
use crate::held::Held;
use crate::id::ModelId;
use crate::manager::{Eviction, LifecycleGuard, Manager, ManagerExt};
use crate::mutants::Mutant;
use crate::telemetry;
use crate::telemetry::EvictedBy;

/// The victims a round skipped because some layer pins them, and the counts below as the first
/// was found pinned.
pub(super) type Pinned = (Vec<ModelId>, BelowCounts);

// ---- Evicting victims -------------------------------------------------------------------------------

impl<M: Manager> FixedSizeCache<M> {
    /// Evicts `victims` in order: `None` if at least one went, else the skipped victims that
    /// some layer pins, with the counts below as the first of them was found pinned. A busy,
    /// pinned or in-use victim is skipped; a failed unload ends the round with its error
    /// (completed evictions stay done; the failed victim keeps its place).
    pub(super) fn evict_all(&self, victims: &[ModelId]) -> Result<Option<Pinned>, ManagerError> {
        if self.mutant(Mutant::QUEUE_LOCK_DURING_EVICTION) {
            let none = || (Vec::new(), BelowCounts::default());
            return self.evict_holding_the_queue(victims).map(|evicted| (!evicted).then(none));
        }
        let popped_pins = self.pop_for_eviction(victims);
        let (mut evicted, mut pinned, mut counts) = (false, Vec::new(), None);
        for victim in victims {
            match self.evict_seeing(victim, EvictedBy::MaxSize, &mut counts)? {
                Some(Eviction::Evicted | Eviction::NotRegistered) => evicted = true,
                Some(Eviction::Pinned) => pinned.push(victim.clone()),
                Some(Eviction::InUse) | None => {}
            }
        }
        if let Some(pins) = popped_pins {
            self.book.with(|b| pins.into_iter().rev().for_each(|p| b.queue.push_front(p)));
        }
        Ok((!evicted).then(|| (pinned, counts.unwrap_or_default())))
    }

    /// Mutant S5: pop skipped pins and the victims off the queue before evicting (upstream).
    pub(super) fn pop_for_eviction(&self, victims: &[ModelId]) -> Option<Vec<ModelId>> {
        if !self.mutant(Mutant::NO_EVICTION_RESTORE) {
            return None;
        }
        Some(self.book.with(|b| {
            let (mut pins, mut kept, mut left) = (Vec::new(), Vec::new(), victims.to_vec());
            while let Some(front) = b.queue.pop_front().filter(|_| !left.is_empty()) {
                if b.pinned.contains(&front) {
                    pins.push(front);
                } else if let Some(at) = left.iter().position(|v| *v == front) {
                    left.remove(at);
                } else {
                    kept.push(front);
                }
            }
            kept.into_iter().rev().for_each(|k| b.queue.push_front(k));
            pins
        }))
    }

    /// Mutant S13: hold the queue lock while waiting for each victim's lifecycle lock.
    pub(super) fn evict_holding_the_queue(&self, victims: &[ModelId]) -> Result<bool, ManagerError> {
        self.book.with(|b| {
            for victim in victims {
                let guard = self.inner.lock(victim)?;
                self.inner.remove_locked(&guard)?;
                b.forget(victim);
            }
            Ok(!victims.is_empty())
        })
    }

    /// Evicts one victim; `None` if its lifecycle lock is busy (skipped).
    pub(super) fn evict(&self, victim: &ModelId, by: EvictedBy) -> Result<Option<Eviction>, ManagerError> {
        self.evict_seeing(victim, by, &mut None)
    }

    /// [`FixedSizeCache::evict`]; a victim found pinned fills `counts`, if empty, with the counts
    /// below read under its lifecycle lock (an unpin or a removal of it comes after them).
    fn evict_seeing(
        &self,
        victim: &ModelId,
        by: EvictedBy,
        counts: &mut Option<BelowCounts>,
    ) -> Result<Option<Eviction>, ManagerError> {
        let Some(guard) = self.inner.try_lock(victim) else {
            tracing::debug!(%victim, "evict: busy, skipped");
            return Ok(None);
        };
        if !self.inner.contains(victim.as_str()) {
            self.book.with(|b| b.forget(victim));
            return Ok(Some(Eviction::NotRegistered));
        }
        if self.mutant(Mutant::EVICT_LEASED) {
            return self.evict_in_use(&guard).map(Some);
        }
        let evicted = self.evict_sized(&guard);
        if counts.is_none() && matches!(evicted, Ok((Eviction::Pinned, _))) {
            *counts = Some(Stack(&self.inner).counts());
        }
        match evicted {
            Ok((outcome, bytes)) => {
                tracing::debug!(%victim, ?outcome, "evict");
                if outcome == Eviction::Evicted {
                    telemetry::evicted(by, bytes);
                }
                Ok(Some(outcome))
            }
            Err(error) => {
                // Held across the report (user code): an unload's error is user code too.
                let guarded = !self.mutant(Mutant::USER_ERROR_DROPPED_IN_UNWIND);
                let error = Held::<_, M::Runtime>::new(error, guarded);
                tracing::debug!(%victim, error = %error.get(), "eviction failed");
                Err(error.into_inner())
            }
        }
    }

    /// Mutant L2: removes the victim whatever its leases (remove's drain, then `Busy`).
    pub(super) fn evict_in_use(
        &self,
        guard: &LifecycleGuard<M::Model, M::Runtime>,
    ) -> Result<Eviction, ManagerError> {
        if self.book.with(|b| b.pinned.contains(guard.id())) {
            return Ok(Eviction::Pinned);
        }
        self.inner.remove_locked(guard)?;
        self.book.with(|b| b.forget(guard.id()));
        Ok(Eviction::Evicted)
    }

    /// After a load: evict LRU models until the byte budget holds again. A victim found pinned
    /// below or in use is passed over for the next: the bound holds while any other model is
    /// idle. One found busy (its lock held: often another eviction or removal of it) is passed
    /// over too, its bytes counted as going: no live model is evicted for room its holder is
    /// about to free. Failures only warn: the load itself succeeded.
    pub(super) fn enforce_bytes(&self, keep: &ModelId) {
        let Some(max_bytes) = self.config.max_bytes() else { return };
        let (mut skipped, mut busy) = (Vec::new(), Vec::new());
        loop {
            let (bytes, victim) = self.book.ordered(|b| {
                let victim = plans::bytes_victim(b, (keep, &skipped), max_bytes, &Stack(&self.inner));
                // The busy victims still recorded: one whose holder removed it meanwhile is out
                // of the bytes already.
                let going = busy.iter().filter_map(|id: &ModelId| b.sizes.get_by(id)).sum::<u64>();
                (b.bytes().saturating_sub(going), victim)
            });
            if bytes <= max_bytes {
                return;
            }
            let Some(victim) = victim else {
                tracing::warn!(bytes, max_bytes, "over the byte budget, nothing evictable");
                return;
            };
            match self.evict(&victim, EvictedBy::MaxBytes) {
                Ok(Some(Eviction::Evicted | Eviction::NotRegistered)) => {}
                Ok(Some(Eviction::Pinned | Eviction::InUse) | None)
                    if self.mutant(Mutant::BYTES_STOP_AT_BUSY_VICTIM) =>
                {
                    return;
                }
                Ok(None) => {
                    busy.push(victim.clone());
                    skipped.push(victim);
                }
                Ok(Some(Eviction::Pinned | Eviction::InUse)) => skipped.push(victim),
                Err(error) => {
                    let guarded = !self.mutant(Mutant::USER_ERROR_DROPPED_IN_UNWIND);
                    let error = Held::<_, M::Runtime>::new(error, guarded);
                    tracing::warn!(%victim, error = %error.get(), "byte-budget eviction failed");
                    return;
                }
            }
        }
    }

    /// [`Manager::evict_locked`], with the bytes this layer had recorded for the evicted model
    /// (0 if it was not evicted).
    pub(super) fn evict_sized(
        &self,
        guard: &LifecycleGuard<M::Model, M::Runtime>,
    ) -> Result<(Eviction, u64), ManagerError> {
        let id = guard.id();
        if self.book.with(|b| b.pinned.contains(id)) {
            return Ok((Eviction::Pinned, 0));
        }
        let settle = (!self.mutant(Mutant::QUEUE_SKIPPED_ON_PANIC)).then_some(Settle {
            cache: self,
            id,
            way: Settling::Remove,
        });
        let before = self.inner.removals();
        let evicted = self.inner.evict_locked(guard)?;
        let mut bytes = 0;
        if evicted == Eviction::Evicted {
            // Its slot is free now, which an add waiting for capacity is told at once.
            bytes = self.forget(id);
            self.reconciled_past_own(before);
        }
        // Under the lock, the outcome tells the registration: an evicted id was dropped from
        // the book above, one in use stays registered and queued. A pin below says nothing of
        // the registration (a layer's pins are its own), and an id found unregistered is the
        // guard's to drop: both ask the registry.
        match settle {
            Some(settle) if matches!(evicted, Eviction::Evicted | Eviction::InUse) => settle.settled(),
            settle => drop(settle),
        }
        Ok((evicted, bytes))
    }
}
