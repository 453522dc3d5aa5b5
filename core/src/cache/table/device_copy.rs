//! The device copies in the table: where each record stands on the cache's device, and the
//! decisions of a placement (share, wait, offload, claim the move) and of a lowered budget.

use std::any::Any;

use super::{Entry, Slot, Table};
use crate::error::CacheError;
use crate::runtime::Arc;

/// A device copy as a slot keeps it: an `Arc<Placed<W::OnDevice, R>>`, type-erased.
pub(crate) type Copy = Arc<dyn Any + Send + Sync>;

/// Where a record stands on its cache's device.
pub(crate) enum DeviceCopy {
    /// Not on the device.
    Absent,
    /// A lock is moving it there; other lockers wait for that move.
    Moving,
    /// On the device: the copy (typed by the weights' `OnDevice`) and its device bytes.
    Resident { copy: Copy, bytes: u64 },
}

impl DeviceCopy {
    /// Device bytes of a resident copy (0 otherwise: a move in flight is charged by the ledger).
    pub(super) fn resident_bytes(&self) -> u64 {
        match self {
            DeviceCopy::Resident { bytes, .. } => *bytes,
            DeviceCopy::Absent | DeviceCopy::Moving => 0,
        }
    }
}

/// What a placement finds of its record's device copy.
pub(crate) enum OnDevice {
    /// Resident: share it.
    Ready(Copy),
    /// Another locker is moving it: wait for that move.
    Moving,
    /// Absent, and the record occupies its key.
    Absent,
    /// The record no longer occupies its key (replaced while stale): it moves for this use only.
    Detached,
}

impl<E: Entry> Table<E> {
    /// Where `record`'s device copy stands.
    pub(crate) fn on_device(&self, record: &Arc<E>) -> OnDevice {
        match self.slots.find(record.key_hash(), |v| Arc::ptr_eq(&v.record, record)) {
            None => OnDevice::Detached,
            Some(slot) => match &slot.device {
                DeviceCopy::Resident { copy, .. } => OnDevice::Ready(Arc::clone(copy)),
                DeviceCopy::Moving => OnDevice::Moving,
                DeviceCopy::Absent => OnDevice::Absent,
            },
        }
    }

    /// Marks `record`'s copy as moving, if it occupies its key.
    pub(crate) fn mark_moving(&mut self, record: &Arc<E>) {
        if let Some(slot) = self.occupant(record, false) {
            slot.device = DeviceCopy::Moving;
        }
    }

    /// Records a move's outcome on `record` if it still occupies its key (a detached record's
    /// copy lives with its guard only): the copy of `need` device bytes, or absent.
    pub(crate) fn settle_move(&mut self, record: &Arc<E>, need: u64, copy: Option<&Copy>) {
        if let Some(slot) = self.occupant(record, false) {
            slot.device = match copy {
                Some(copy) => DeviceCopy::Resident { copy: Arc::clone(copy), bytes: need },
                None => DeviceCopy::Absent,
            };
        }
    }

    /// Takes the device copies of unlocked records, smallest first, out of their slots until
    /// `need` more bytes would fit `cap` once they are dropped; refuses up front (taking
    /// nothing) when even offloading every one would not make room. `used` counts every live
    /// copy and move.
    pub(crate) fn offload_smallest(
        &mut self,
        key: &str,
        need: u64,
        cap: u64,
        mut used: u64,
    ) -> Result<Vec<Copy>, CacheError> {
        let freeable = self
            .slots
            .values()
            .filter(|v| v.locks == 0)
            .fold(0u64, |sum, v| sum.saturating_add(v.device.resident_bytes()));
        let pinned = used.saturating_sub(freeable);
        let full =
            |used: u64| CacheError::DeviceFull { key: key.to_owned(), needed: need, budget: cap, used };
        if need > cap.saturating_sub(pinned) {
            return Err(full(pinned));
        }
        // The candidates once, smallest first: every round takes the next, so the loop ends
        // after at most one round per candidate whatever the bytes say.
        let mut victims = self.unlocked_copies(|v| v.device.resident_bytes());
        victims.sort_unstable();
        let mut victims = victims.into_iter();
        let mut offloaded = Vec::new();
        while need > cap.saturating_sub(used) {
            let Some((bytes, victim)) = victims.next() else { return Err(full(used)) };
            offloaded.extend(self.offload(&victim).map(|(copy, _)| copy));
            used = used.saturating_sub(bytes);
        }
        Ok(offloaded)
    }

    /// Takes the device copies of unlocked records out of their slots, least recently used
    /// first, until `used` is within `cap` once they are dropped. Returns them and what `used`
    /// will be then.
    pub(crate) fn offload_lru(&mut self, cap: u64, mut used: u64) -> (Vec<Copy>, u64) {
        let mut idle = self.unlocked_copies(|v| v.last_used);
        idle.sort_unstable();
        let mut offloaded = Vec::new();
        for (_, key) in idle {
            if used <= cap {
                break;
            }
            if let Some((copy, bytes)) = self.offload(&key) {
                used = used.saturating_sub(bytes);
                offloaded.push(copy);
            }
        }
        (offloaded, used)
    }

    /// The keys whose device copies are resident or moving.
    pub(crate) fn keys_on_device(&self) -> Vec<String> {
        self.keys_where(|_, v| !matches!(v.device, DeviceCopy::Absent))
    }

    /// `(order(slot), key)` of each unlocked record with a resident device copy.
    fn unlocked_copies(&self, order: impl Fn(&Slot<E>) -> u64) -> Vec<(u64, String)> {
        let unlocked = self.slots.iter().filter(|(_, v)| v.locks == 0 && v.device.resident_bytes() > 0);
        unlocked.map(|(k, v)| (order(v), k.clone())).collect()
    }

    /// Takes `key`'s resident device copy out of its slot, with its bytes.
    fn offload(&mut self, key: &str) -> Option<(Copy, u64)> {
        let slot = self.slots.get_mut(key)?;
        match std::mem::replace(&mut slot.device, DeviceCopy::Absent) {
            DeviceCopy::Resident { copy, bytes } => Some((copy, bytes)),
            other => {
                slot.device = other;
                None
            }
        }
    }
}
