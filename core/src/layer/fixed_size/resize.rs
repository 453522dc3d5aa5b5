//! Resizing: `set_max_size`, which evicts idle models down to a lowered limit (SPEC 1.12) and
//! wakes the adds waiting for capacity when it is raised.

use super::FixedSizeCache;
use super::plans::{self, Lowering, Stack};
use super::queue::PinnedBelow;
use crate::deadline::CallOptions;
use crate::error::{InvalidConfig, ManagerError};
use crate::held::Held;
use crate::manager::Manager;
use crate::mutants::Mutant;
use crate::runtime::Runtime;
use crate::telemetry;

impl<M: Manager> FixedSizeCache<M> {
    /// Changes the capacity while serving (SPEC 1.12). Raising it wakes the adds waiting for
    /// room. Lowering it takes effect for every admission at once, then evicts down to it:
    /// idle least-recently-used models first (never a pinned one, nor one in use or being
    /// changed), waiting for leases to end and locks to be released at most the capacity wait
    /// (and `options`); what is still over then is [`ManagerError::OverLimit`], naming the
    /// models that held it (the new capacity stays, and later adds respect it). `Ok` means the
    /// stack fit the new capacity at some point of the call: one that does not lower it but
    /// finds the stack over it (another call's lowering still at work) evicts and waits too.
    /// Zero is [`ManagerError::InvalidConfig`], and nothing changes.
    ///
    /// ```
    /// use resident::{BoxError, CallOptions, FixedSizeCache, FixedSizeConfig, Loader, Manager, ManagerExt, Model, ModelId, ModelManager};
    /// # struct M; impl Model for M { fn size_bytes(&self) -> u64 { 1 } }
    /// # struct L; impl Loader for L { type Model = M; fn load(&self, _: &ModelId) -> Result<M, BoxError> { Ok(M) } }
    /// let cache = FixedSizeCache::new(ModelManager::new(L), FixedSizeConfig::new(3))?;
    /// for id in ["a", "b", "c"] {
    ///     cache.add_model(id, None)?;
    /// }
    /// cache.set_max_size(1, CallOptions::new())?; // evicts a and b
    /// assert_eq!(cache.queue(), [ModelId::new("c")?]);
    /// assert!(cache.set_max_size(0, CallOptions::new()).is_err());
    /// assert_eq!(cache.max_size(), 1);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn set_max_size(&self, max_size: usize, options: CallOptions) -> Result<(), ManagerError> {
        if max_size == 0 {
            return Err(InvalidConfig { field: "max_size", reason: "must be greater than zero" }.into());
        }
        let lowered = self.book.with(|b| {
            let lowered = max_size < b.max_size;
            b.max_size = max_size;
            b.version += 1;
            lowered
        });
        if !lowered {
            // Room for the adds waiting for it (before the report: a subscriber is user code).
            self.inner.changes().bump_at(Mutant::LOST_WAKEUP_MAX_SIZE);
        }
        // Reported once the stack fits (or the wait ran out): a panicking subscriber (user
        // code) must find the evictions done.
        let report_first = self.mutant(Mutant::RESIZE_REPORTED_FIRST);
        if report_first {
            tracing::info!(max_size, lowered, "max_size changed");
        }
        if self.mutant(Mutant::RESIZE_DOES_NOT_EVICT) {
            return Ok(());
        }
        // Even when not lowered: a concurrent lowering may still be evicting, and `Ok` means
        // the stack fit the limit at some point of this call.
        // Held across the report (user code): an unload's error in it is user code too.
        let guarded = !self.mutant(Mutant::USER_ERROR_DROPPED_IN_UNWIND);
        let evicted = Held::<_, M::Runtime>::new(self.evict_down(options), guarded);
        if !report_first {
            tracing::info!(max_size, lowered, fits = evicted.get().is_ok(), "max_size changed");
        }
        evicted.into_inner()
    }

    /// After a lowered capacity: evicts idle LRU models until the registered ones and the loads
    /// in flight fit, waiting (bounded) for the others to become idle.
    pub(super) fn evict_down(&self, options: CallOptions) -> Result<(), ManagerError> {
        let rt = self.inner.runtime();
        let changes = self.inner.changes();
        let wait =
            options.deadline(rt).bound(rt, self.config.capacity_wait(), Mutant::DEADLINE_SKIPS_CAPACITY);
        let deadline = rt.now().checked_add(wait);
        let mut pinned_below = PinnedBelow::default();
        let over_limit = || {
            let (max_size, held, loading) =
                self.book.ordered(|b| (b.max_size, b.queue.iter().cloned().collect(), b.loading));
            telemetry::refused(ManagerError::OverLimit { max_size, held, loading, waited: wait })
        };
        // Before the first look: the end of a lease is announced only while watched.
        let _watch = changes.watch();
        loop {
            let epoch = changes.epoch();
            // Ids a layer below removed hold no slot: never evicted for, nor waited on.
            if !self.mutant(Mutant::LOWERING_COUNTS_REMOVED_BELOW) {
                self.reconcile_below(None);
            }
            let Lowering { over, victims, seen } =
                self.book.ordered(|b| plans::lowering(b, &mut pinned_below, &Stack(&self.inner)));
            if over == 0 {
                return Ok(());
            }
            if !victims.is_empty() {
                // No report per round: a panicking subscriber (user code) would abandon the
                // lowering half-way; the change's report comes once it is over.
                match self.evict_all(&victims)? {
                    None => continue,
                    // Left out of the next plan (which may find other victims) until the queue, the
                    // pins or the counts below change: evicting them again would find them pinned.
                    Some((pinned, counts)) if !pinned.is_empty() => {
                        let spin = self.mutant(Mutant::RESIZE_RETRIES_PINNED_BELOW);
                        pinned_below.remember(seen, counts, pinned.into_iter().filter(|_| !spin));
                        // Bounded here too: a queue that keeps changing forgets the pins found
                        // below, and every round could find them again.
                        if !spin && deadline.is_some_and(|d| rt.now() >= d) {
                            return Err(over_limit());
                        }
                        continue;
                    }
                    Some(_) => {}
                }
            }
            if deadline.is_some_and(|d| rt.now() >= d) {
                return Err(over_limit());
            }
            let left = deadline.map(|d| d.saturating_sub(rt.now()));
            let _ = changes.wait_past(epoch, left);
        }
    }
}
