//! The device copies in the record table: a placement shares a resident copy, waits for a move
//! in flight, or claims the move of an absent one (a detached record moves for its locker
//! only); a move's end is recorded on its record only while it occupies its key; making room
//! offloads unlocked copies only, smallest first, and just enough, or refuses without taking
//! any when even all of them would not do; lowering the budget offloads unlocked copies least
//! recently used first until the copies fit.

use proptest::prelude::*;

use super::{Claim, World};
use crate::cache::table::{Copy, OnDevice};
use crate::error::CacheError;
use crate::runtime::Arc;

/// The record a device copy of the program was made for.
fn copy_of(copy: &Copy) -> usize {
    *copy.downcast_ref::<usize>().expect("the program's copies name their record")
}

impl World {
    /// Device bytes of the copies resident in the map.
    fn device_used(&self) -> u64 {
        self.known.iter().filter(|k| k.attached).filter_map(|k| k.copy).sum()
    }

    /// Whether a lock protects record `id`.
    pub(super) fn locked(&self, id: usize) -> bool {
        self.handles.iter().any(|(r, claim)| r.id == id && *claim == Claim::Lock)
    }

    /// The records whose copies may be offloaded: in the map, unlocked, resident.
    fn unlocked_copies(&self) -> Vec<usize> {
        let ids = 0..self.known.len();
        ids.filter(|&id| self.known[id].attached && self.known[id].copy.is_some() && !self.locked(id))
            .collect()
    }

    pub(super) fn place(&mut self, h: usize) -> Result<(), TestCaseError> {
        let (record, claim) = (Arc::clone(&self.handles[h].0), self.handles[h].1);
        if claim != Claim::Lock {
            return Ok(());
        }
        let k = &self.known[record.id];
        let found = self.table.on_device(&record);
        match found {
            OnDevice::Detached => prop_assert!(!k.attached, "record {} found detached", record.id),
            OnDevice::Moving => prop_assert!(k.attached && k.moving, "record {} found moving", record.id),
            OnDevice::Ready(copy) => {
                prop_assert!(k.attached && k.copy.is_some(), "record {} found on the device", record.id);
                prop_assert_eq!(copy_of(&copy), record.id);
            }
            OnDevice::Absent => {
                prop_assert!(
                    k.attached && !k.moving && k.copy.is_none(),
                    "record {} found absent",
                    record.id
                );
                self.table.mark_moving(&record);
                // No use stamped: the lock the move is claimed under stamped it already.
                self.known[record.id].moving = true;
                self.moves.push(record);
            }
        }
        Ok(())
    }

    /// `get`, lock, place and release, as a served request does.
    pub(super) fn use_on_device(&mut self, key: &str, bytes: u64) -> Result<(), TestCaseError> {
        let handles = self.handles.len();
        self.get(key)?;
        if self.handles.len() == handles {
            return Ok(());
        }
        let (moves, last) = (self.moves.len(), self.handles.len() - 1);
        self.convert(last);
        self.place(last)?;
        if self.moves.len() > moves {
            self.settle_at(moves, bytes, false);
        }
        self.release(last)
    }

    pub(super) fn settle(&mut self, bytes: u64, fails: bool) {
        if !self.moves.is_empty() {
            self.settle_at(0, bytes, fails);
        }
    }

    fn settle_at(&mut self, at: usize, bytes: u64, fails: bool) {
        let record = self.moves.remove(at);
        let copy: Copy = Arc::new(record.id);
        self.table.settle_move(&record, bytes, (!fails).then_some(&copy));
        let k = &mut self.known[record.id];
        if k.attached {
            (k.moving, k.copy) = (false, (!fails).then_some(bytes));
        }
    }

    pub(super) fn make_device_room(&mut self, need: u64, cap: u64) -> Result<(), TestCaseError> {
        let used = self.device_used();
        let candidates = self.unlocked_copies();
        let freeable: u64 = candidates.iter().filter_map(|&id| self.known[id].copy).sum();
        let pinned = used - freeable;
        match self.table.offload_smallest("k", need, cap, used) {
            Err(CacheError::DeviceFull { used: reported, .. }) => {
                prop_assert!(need > cap.saturating_sub(pinned), "refused though offloading would make room");
                prop_assert_eq!(reported, pinned);
            }
            Err(other) => prop_assert!(false, "unexpected error {}", other),
            Ok(offloaded) => {
                prop_assert!(need <= cap.saturating_sub(pinned), "made room that cannot be made");
                let order: Vec<usize> = offloaded.iter().map(copy_of).collect();
                let rank = |id: &usize| (self.known[*id].copy, self.known[*id].key.clone());
                for pair in order.windows(2) {
                    prop_assert!(rank(&pair[0]) <= rank(&pair[1]), "offloaded out of order: {:?}", order);
                }
                let mut after = used;
                for (i, id) in order.iter().enumerate() {
                    prop_assert!(candidates.contains(id), "offloaded the copy of {}, locked or absent", id);
                    prop_assert!(
                        need > cap.saturating_sub(after),
                        "offloaded {} more than needed",
                        order.len() - i
                    );
                    after -= self.known[*id].copy.unwrap_or(0);
                }
                prop_assert!(need <= cap.saturating_sub(after), "offloaded too little");
                order.iter().for_each(|&id| self.known[id].copy = None);
            }
        }
        Ok(())
    }

    pub(super) fn lower_device(&mut self, cap: u64) -> Result<(), TestCaseError> {
        let used = self.device_used();
        let candidates = self.unlocked_copies();
        let (offloaded, after) = self.table.offload_lru(cap, used);
        let order: Vec<usize> = offloaded.iter().map(copy_of).collect();
        let freed: u64 = order.iter().filter_map(|&id| self.known[id].copy).sum();
        prop_assert_eq!(after, used - freed);
        for pair in order.windows(2) {
            prop_assert!(
                self.known[pair[0]].used_at < self.known[pair[1]].used_at,
                "not LRU first: {:?}",
                order
            );
        }
        let mut left = used;
        for id in &order {
            prop_assert!(candidates.contains(id), "offloaded the copy of {}, locked or absent", id);
            prop_assert!(left > cap, "offloaded past the budget");
            left -= self.known[*id].copy.unwrap_or(0);
        }
        let lru_left =
            candidates.iter().filter(|id| !order.contains(id)).map(|&id| self.known[id].used_at).min();
        if let (Some(last), Some(lru_left)) = (order.last(), lru_left) {
            prop_assert!(self.known[*last].used_at < lru_left, "a more recently used copy went first");
        }
        prop_assert!(after <= cap || order.len() == candidates.len(), "stopped over the budget");
        order.iter().for_each(|&id| self.known[id].copy = None);
        Ok(())
    }

    /// The keys whose copies are resident or moving.
    pub(super) fn check_device(&self) -> Result<(), TestCaseError> {
        let on = |id: &usize| {
            self.known[*id].attached && (self.known[*id].copy.is_some() || self.known[*id].moving)
        };
        let mut expected: Vec<String> =
            (0..self.known.len()).filter(on).map(|id| self.known[id].key.clone()).collect();
        expected.sort();
        prop_assert_eq!(self.table.keys_on_device(), expected);
        Ok(())
    }
}
