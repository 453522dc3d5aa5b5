//! [`Slot`]: a record in the table's map, with what protects it from eviction and where it
//! stands in the LRU order, the keep-alive and on the device.

use std::time::Duration;

use super::device_copy::DeviceCopy;
use super::{Claim, Entry};
use crate::runtime::Arc;

/// A record in the map, with what protects it from eviction: its admissions here, its holds
/// and locks in the record ([`Entry::claims`]).
pub(super) struct Slot<E> {
    pub(super) record: Arc<E>,
    /// Live admissions (between `put` and the loader's retrieval).
    pub(super) admitting: usize,
    /// Evict at the last release (set by `drop_model`, `shutdown`, or at birth after shutdown).
    pub(super) stale: bool,
    /// LRU clock of the last use (a lock's conversion, which ticks outside the monitor, is
    /// stamped at its release: the record is not free, nor unlocked, before).
    pub(super) last_used: u64,
    /// Runtime time of its admission or of its last release (for keep-alive expiry; read only
    /// while it is free, and every release stamps it); `None` when released while no
    /// keep-alive was in force (no clock read then): it counts as idle from the next expiry
    /// pass on.
    pub(super) idle_since: Option<Duration>,
    /// The record's copy on the cache's device.
    pub(super) device: DeviceCopy,
}

impl<E: Entry> Slot<E> {
    /// Nothing protects it: no lock, no hold, no admission.
    pub(super) fn free(&self) -> bool {
        self.admitting == 0 && !self.record.claims().any()
    }

    /// Whether an eviction path may take it (`admitting_is_free`: the C-R3/C-R23 mutant).
    pub(super) fn evictable(&self, admitting_is_free: bool) -> bool {
        self.free() || (admitting_is_free && !self.record.claims().any())
    }

    /// Its locks.
    pub(super) fn locks(&self) -> u64 {
        self.record.claims().read().1
    }

    /// Free but for holds (`ignore_holds`: the C-R7 mutant's notion of free).
    pub(super) fn free_ignoring_holds(&self) -> bool {
        self.admitting == 0 && self.locks() == 0
    }

    /// Counts one more `claim`.
    pub(super) fn count(&mut self, claim: Claim) {
        match claim {
            Claim::Admitting => self.admitting += 1,
            Claim::Hold | Claim::Lock => self.record.claims().count(claim == Claim::Lock),
        }
    }

    /// Releases one `claim`. A counter already at zero means a claim was lost (only mutants do
    /// that): it stays at zero.
    pub(super) fn release(&mut self, claim: Claim) {
        match claim {
            Claim::Admitting => self.admitting = self.admitting.saturating_sub(1),
            Claim::Hold | Claim::Lock => drop(self.record.claims().release(claim == Claim::Lock)),
        }
    }
}
