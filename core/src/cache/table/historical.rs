//! The table's part of the historical bugs' switch bodies (see `crate::mutants`): what a
//! switched-on bug does to the records instead of what the table promises.

use super::{Claim, Entry, Resident, Table, decrement};
use crate::runtime::Arc;

impl<E: Entry> Table<E> {
    /// `inspection-upgrades-detached`: the records in the map described, and strong references
    /// to the detached ones still alive.
    pub(crate) fn resident_upgrading_detached(&mut self) -> (Vec<Resident>, Vec<Arc<E>>) {
        self.detached.retain(|d| d.record.strong_count() > 0);
        (self.described(), self.detached.iter().filter_map(|d| d.record.upgrade()).collect())
    }

    /// `hold-after-lookup`, its first step: the occupant of `key`, stale or not, no hold armed.
    pub(crate) fn peek(&self, key: &str) -> Option<Arc<E>> {
        self.slots.get(key).map(|slot| Arc::clone(&slot.record))
    }

    /// `hold-after-lookup`, its second step: a hold armed on `record` if it still occupies its
    /// key.
    pub(crate) fn hold(&mut self, record: &Arc<E>) {
        if let Some(slot) = self.occupant(record, false) {
            slot.holds += 1;
        }
    }

    /// `conversion-in-two-steps`, its first step: one `claim` on `record` released, if it still
    /// occupies its key, and nothing else (no eviction: the next critical section may find it
    /// free).
    pub(crate) fn uncount(&mut self, record: &Arc<E>, claim: Claim) {
        if let Some(slot) = self.occupant(record, false) {
            decrement(slot.counter(claim));
        }
    }

    /// `conversion-in-two-steps`, its second step: one `claim` on `record` counted and its use
    /// stamped, if it still occupies its key.
    pub(crate) fn count_again(&mut self, record: &Arc<E>, claim: Claim) {
        let clock = self.tick();
        if let Some(slot) = self.occupant(record, false) {
            *slot.counter(claim) += 1;
            slot.last_used = clock;
        }
    }

    /// `sibling-admission-clears-holds`: every record's holds forgotten.
    pub(crate) fn clear_holds(&mut self) {
        self.slots.values_mut().for_each(|slot| slot.holds = 0);
    }

    /// `detached-copy-uncounted`: device bytes of the copies in the map only.
    pub(crate) fn slot_device_bytes(&self) -> u64 {
        self.slots.values().fold(0, |sum, v| sum.saturating_add(v.device.resident_bytes()))
    }
}
