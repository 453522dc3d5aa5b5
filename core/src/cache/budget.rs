//! [`RamBudget`]: one global RAM cap shared by every device cache.
//!
//! Accounting is truthful by construction: bytes are counted by RAII charges. A
//! [`SharedCharge`] lives inside each canonical set of CPU weights and is debited when the last
//! holder of those weights lets go; a [`NonSharedCharge`] lives inside each non-shared resident
//! record and is debited, against the cache that made it, when the record goes. Nothing else
//! moves the counters, so "bytes counted" always equals "bytes alive" (A1, A3).
//!
//! The budget's monitor is a leaf: nothing is called while it is held, so a charge may be
//! dropped anywhere, under any other lock.

use std::collections::BTreeMap;
use std::fmt;

use crate::error::InvalidConfig;
use crate::runtime::{Arc, Monitor, Runtime, StdRuntime};

/// Identifies one device cache in the budget's per-cache accounting.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct CacheId(u64);

#[derive(Debug, Default)]
struct Counters {
    /// `shared` plus every `non_shared` count; every charge is checked against it, so no
    /// partial sum can overflow and no debit can underflow.
    total: u64,
    shared: u64,
    non_shared: BTreeMap<CacheId, u64>,
    high_water: u64,
    caches: u64,
}

impl Counters {
    fn in_use(&self) -> u64 {
        self.total
    }

    /// Adds `bytes` to the total, or refuses (changing nothing) if the sum would overflow.
    fn add(&mut self, bytes: u64) -> Result<(), Overflow> {
        self.total = self.total.checked_add(bytes).ok_or(Overflow)?;
        self.high_water = self.high_water.max(self.total);
        Ok(())
    }
}

/// A charge would overflow the budget's byte sums; nothing was charged.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Overflow;

/// The global RAM cap, and what is counted against it right now.
pub struct RamBudget<R: Runtime = StdRuntime> {
    cap: u64,
    counters: R::Monitor<Counters>,
    runtime: R,
}

impl<R: Runtime> RamBudget<R> {
    /// A budget of `cap` bytes on `runtime`. A zero cap is refused.
    pub fn new(cap: u64, runtime: &R) -> Result<Arc<Self>, InvalidConfig> {
        if cap == 0 {
            return Err(InvalidConfig { field: "cap", reason: "must be greater than zero" });
        }
        Ok(Arc::new(Self { cap, counters: runtime.monitor(Counters::default()), runtime: runtime.clone() }))
    }

    /// The cap in bytes.
    pub fn cap(&self) -> u64 {
        self.cap
    }

    /// Bytes counted now: each live canonical once, plus every non-shared resident record.
    pub fn in_use(&self) -> u64 {
        self.counters.with(|c| c.in_use())
    }

    /// Bytes of live canonical weights (each counted once, however many records share it).
    pub fn shared_bytes(&self) -> u64 {
        self.counters.with(|c| c.shared)
    }

    /// Bytes of non-shared resident records charged to `cache`.
    pub fn non_shared_bytes(&self, cache: CacheId) -> u64 {
        self.counters.with(|c| c.non_shared.get(&cache).copied().unwrap_or(0))
    }

    /// Bytes above the cap (0 when within it).
    pub fn excess(&self) -> u64 {
        self.in_use().saturating_sub(self.cap)
    }

    /// Whether `bytes` more would still fit under the cap.
    pub fn fits(&self, bytes: u64) -> bool {
        self.in_use().saturating_add(bytes) <= self.cap
    }

    /// The most ever counted at once.
    pub fn high_water(&self) -> u64 {
        self.counters.with(|c| c.high_water)
    }

    /// A new cache identity for per-cache accounting.
    pub(crate) fn register_cache(&self) -> CacheId {
        self.counters.with(|c| {
            c.caches += 1;
            CacheId(c.caches)
        })
    }

    /// Mutant C-R2 only: subtracts `bytes` from `cache`'s non-shared count with no charge behind
    /// it (the historical mis-debit).
    pub(crate) fn mis_debit(&self, cache: CacheId, bytes: u64) {
        self.counters.with(|c| {
            if let Some(charged) = c.non_shared.get_mut(&cache) {
                let debit = bytes.min(*charged);
                *charged -= debit;
                c.total -= debit;
            }
        });
    }

    /// Counts `bytes` of canonical weights until the returned charge is dropped; refused if the
    /// budget's sums would overflow.
    pub(crate) fn charge_shared(self: &Arc<Self>, bytes: u64) -> Result<SharedCharge<R>, Overflow> {
        self.counters.with(|c| {
            c.add(bytes)?;
            c.shared += bytes;
            Ok(())
        })?;
        Ok(SharedCharge { budget: Arc::clone(self), bytes })
    }

    /// Counts `bytes` of a non-shared record of `cache` until the returned charge is dropped;
    /// refused if the budget's sums would overflow.
    pub(crate) fn charge_non_shared(
        self: &Arc<Self>,
        cache: CacheId,
        bytes: u64,
    ) -> Result<NonSharedCharge<R>, Overflow> {
        self.counters.with(|c| {
            c.add(bytes)?;
            *c.non_shared.entry(cache).or_default() += bytes;
            Ok(())
        })?;
        Ok(NonSharedCharge { budget: Arc::clone(self), cache, bytes })
    }
}

impl<R: Runtime> fmt::Debug for RamBudget<R> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RamBudget").field("cap", &self.cap).field("in_use", &self.in_use()).finish()
    }
}

/// Bytes of one canonical set of weights, counted until dropped.
pub struct SharedCharge<R: Runtime = StdRuntime> {
    budget: Arc<RamBudget<R>>,
    bytes: u64,
}

impl<R: Runtime> Drop for SharedCharge<R> {
    fn drop(&mut self) {
        self.budget.counters.with(|c| {
            c.shared -= self.bytes;
            c.total -= self.bytes;
        });
    }
}

impl<R: Runtime> fmt::Debug for SharedCharge<R> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SharedCharge").field("bytes", &self.bytes).finish()
    }
}

/// Bytes of one non-shared resident record of one cache, counted until dropped.
pub struct NonSharedCharge<R: Runtime = StdRuntime> {
    budget: Arc<RamBudget<R>>,
    cache: CacheId,
    bytes: u64,
}

impl<R: Runtime> Drop for NonSharedCharge<R> {
    fn drop(&mut self) {
        let underflow = self.budget.counters.with(|c| {
            let charged = c.non_shared.entry(self.cache).or_default();
            // Only the C-R2 mutant can make this underflow; saturate, and report it outside.
            let underflow = *charged < self.bytes;
            let debit = self.bytes.min(*charged);
            *charged -= debit;
            c.total -= debit;
            if *charged == 0 {
                c.non_shared.remove(&self.cache);
            }
            underflow
        });
        if underflow {
            self.budget.runtime.defect("non-shared bytes debited twice");
        }
    }
}

impl<R: Runtime> fmt::Debug for NonSharedCharge<R> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("NonSharedCharge").field("cache", &self.cache).field("bytes", &self.bytes).finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn charges_count_until_dropped() {
        let budget = RamBudget::new(100, &StdRuntime::new()).unwrap();
        let cache = budget.register_cache();
        let shared = budget.charge_shared(40).unwrap();
        let own = budget.charge_non_shared(cache, 70).unwrap();
        assert_eq!((budget.in_use(), budget.excess(), budget.high_water()), (110, 10, 110));
        assert!(!budget.fits(1));
        drop(shared);
        assert_eq!((budget.shared_bytes(), budget.non_shared_bytes(cache)), (0, 70));
        drop(own);
        assert_eq!((budget.in_use(), budget.high_water()), (0, 110));
    }

    #[test]
    fn a_charge_that_would_overflow_is_refused_and_changes_nothing() {
        let budget = RamBudget::new(u64::MAX, &StdRuntime::new()).unwrap();
        let cache = budget.register_cache();
        let half = u64::MAX / 2 + 1;
        let first = budget.charge_shared(half).unwrap();
        assert_eq!(budget.charge_non_shared(cache, half).unwrap_err(), Overflow);
        assert_eq!(budget.charge_shared(half).unwrap_err(), Overflow);
        assert_eq!((budget.in_use(), budget.non_shared_bytes(cache), budget.high_water()), (half, 0, half));
        let rest = budget.charge_non_shared(cache, u64::MAX - half).unwrap();
        assert_eq!(budget.in_use(), u64::MAX);
        drop((first, rest));
        assert_eq!(budget.in_use(), 0);
    }

    #[test]
    fn a_zero_cap_is_refused() {
        assert_eq!(RamBudget::new(0, &StdRuntime::new()).unwrap_err().field, "cap");
    }
}
