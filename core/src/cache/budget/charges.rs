//! The handles that keep bytes counted in a [`RamBudget`]: a shared canonical's charge, a
//! non-shared record's, and a reservation made before a load.

use std::fmt;

use super::{CacheId, RamBudget};
use crate::runtime::{Arc, Runtime, StdRuntime};

/// Bytes of one canonical set of weights, counted until dropped.
pub struct SharedCharge<R: Runtime = StdRuntime> {
    pub(super) budget: Arc<RamBudget<R>>,
    pub(super) bytes: u64,
}

impl<R: Runtime> Drop for SharedCharge<R> {
    fn drop(&mut self) {
        self.budget.debit(|c| {
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
    pub(super) budget: Arc<RamBudget<R>>,
    pub(super) cache: CacheId,
    pub(super) bytes: u64,
}

impl<R: Runtime> Drop for NonSharedCharge<R> {
    fn drop(&mut self) {
        let underflow = self.budget.debit(|c| {
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
            self.budget.room.runtime().defect("non-shared bytes debited twice");
        }
    }
}

/// Bytes of a load not admitted yet, counted against the cap from before the loader allocates
/// them until they become the load's charge or the reservation is dropped (on error, panic or
/// cancellation alike).
pub struct Reservation<R: Runtime = StdRuntime> {
    pub(super) budget: Arc<RamBudget<R>>,
    pub(super) bytes: u64,
}

impl<R: Runtime> Reservation<R> {
    /// Bytes still reserved.
    pub fn bytes(&self) -> u64 {
        self.bytes
    }
}

impl<R: Runtime> Drop for Reservation<R> {
    fn drop(&mut self) {
        if self.bytes > 0 {
            self.budget.debit(|c| c.reserved -= self.bytes);
        }
    }
}

impl<R: Runtime> fmt::Debug for Reservation<R> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Reservation").field("bytes", &self.bytes).finish()
    }
}

impl<R: Runtime> fmt::Debug for NonSharedCharge<R> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("NonSharedCharge").field("cache", &self.cache).field("bytes", &self.bytes).finish()
    }
}
