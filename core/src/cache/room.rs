//! [`DeviceCache::reserve_room`]: how a load gets room under the hard RAM budget (SPEC 3.11).
//!
//! In order, until the bytes fit: reserve if they fit now; evict this cache's idle records
//! (least recently used first); ask every peer to evict its own, without ever waiting for a
//! peer's lock (a busy peer honours the request at its next release); then wait, bounded by
//! the budget's room wait, for something to change — a debit (a charge or a reservation
//! dropped) or a release that left a record evictable, both of which notify — and start over.
//! The wait reads the room epoch *before* looking, so a change that lands while it looks ends
//! the wait at once (no lost wakeup).

use super::DeviceCache;
use super::budget::Reservation;
use crate::deadline::Deadline;
use crate::error::CacheError;
use crate::mutants::Mutant;
use crate::runtime::{Arc, Runtime};
use crate::telemetry;

impl<W: Send + Sync + 'static, R: Runtime> DeviceCache<W, R> {
    /// Reserves `bytes` of the group's RAM budget for a load of `key`, making room and waiting
    /// for it as the module explains; [`CacheError::NoRoom`] once the room wait is over.
    ///
    /// Under the overflow policy nothing is reserved (`Ok(None)`): this cache's idle records
    /// make what room they can, and the admission may overshoot, with a warning; its peers are
    /// asked to reconcile once it is charged (SPEC 3.2).
    pub(crate) fn reserve_room(
        self: &Arc<Self>,
        key: &str,
        bytes: u64,
        deadline: Deadline,
    ) -> Result<Option<Reservation<R>>, CacheError> {
        let budget = Arc::clone(self.group().budget());
        if budget.overflow() {
            self.make_room_here(bytes);
            if !budget.fits(bytes) {
                tracing::warn!(
                    key,
                    bytes,
                    cap = budget.cap(),
                    committed = budget.committed(),
                    "no room: admitting past the RAM budget (overflow policy)"
                );
            }
            return Ok(None);
        }
        let wait = deadline.bound(self.runtime(), budget.room_wait(), Mutant::DEADLINE_SKIPS_ROOM);
        let start = self.now();
        loop {
            let seen = budget.room_epoch();
            if let Some(reservation) = self.try_reserve_making_room(bytes) {
                return Ok(Some(reservation));
            }
            let left = wait.saturating_sub(self.now().saturating_sub(start));
            if left.is_zero() {
                return Err(self.no_room(key, bytes, wait));
            }
            // A timeout goes round once more: the last look decides.
            let _ = budget.wait_for_room(seen, left);
        }
    }

    /// One round: reserve if `bytes` fit; else evict here, then ask the peers, trying after each.
    fn try_reserve_making_room(self: &Arc<Self>, bytes: u64) -> Option<Reservation<R>> {
        let budget = self.group().budget();
        if let Some(reservation) = budget.try_reserve(bytes) {
            return Some(reservation);
        }
        self.make_room_here(bytes);
        if let Some(reservation) = budget.try_reserve(bytes) {
            return Some(reservation);
        }
        for peer in self.group().peers(self) {
            peer.request_room(bytes);
        }
        budget.try_reserve(bytes)
    }

    /// The refusal of a load of `key` that found no room: the bytes it needed, the cap, and what
    /// holds the rest.
    fn no_room(self: &Arc<Self>, key: &str, bytes: u64, waited: std::time::Duration) -> CacheError {
        let budget = self.group().budget();
        let mut pinned = self.pinned();
        for peer in self.group().peers(self) {
            pinned.extend(peer.pinned());
        }
        let (in_use, reserved) = (budget.in_use(), budget.reserved());
        tracing::warn!(key, bytes, cap = budget.cap(), in_use, reserved, "no room in the RAM budget");
        telemetry::cache_refused(CacheError::NoRoom {
            key: key.to_owned(),
            needed: bytes,
            cap: budget.cap(),
            in_use,
            reserved,
            waited,
            holders: if pinned.is_empty() { "nothing pinned".to_owned() } else { pinned.join(", ") },
        })
    }
}
