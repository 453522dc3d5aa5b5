//! [`DeviceCache::reserve_room`]: how a load gets room under the hard RAM budget (SPEC 3.11).
//!
//! Loads looking for room stand in line, from their first refusal until they return, and only
//! the first may reserve (SPEC 2.14): room that a debit makes goes to the load that has waited
//! longest, never to one that came later (a stream of later loads cannot starve it), and the
//! first leaving the line wakes the next. A load behind another waits for just that (or a
//! lowered cap, which may make it too large): the debits that wake the first are not its to
//! use, so they do not wake it.
//!
//! In order, until the bytes fit: reserve if they fit now; evict this cache's idle records
//! (least recently used first); ask every peer to evict its own, without ever waiting for a
//! peer's lock (a busy peer honours the request at its next release, for as long as some load
//! still looks for room: from its first refusal until it returns, waiting or not); then wait, bounded by
//! the budget's room wait, for something to change — a debit (a charge or a reservation
//! dropped), a release that left a record evictable or the group's shutdown (which refuses
//! it), all of which notify (a release only the waits that watch: this one watches from before
//! its first look) — and start over.
//! The wait reads the room epoch *before* looking, so a change that lands while it looks ends
//! the wait at once (no lost wakeup). Each round's first look reads the cap and the overflow
//! policy with the counters: a load never sleeps past a change of either (both notify).

use super::DeviceCache;
use super::budget::{NoReservation, Reservation, Seeking};
use crate::deadline::Deadline;
use crate::error::CacheError;
use crate::mutants::Mutant;
use crate::runtime::{Arc, Runtime};
use crate::telemetry;

/// How many times one round evicts here, and asks its peers, while an eviction gave nothing
/// back: each pass evicts at least one record, but peers re-adopting the weights of what it
/// takes out could keep it going; past that, the round waits for room like any other.
const LOOKS: usize = 4;

// ---- Reserving room for a load -------------------------------------------------------------------

impl<W: Send + Sync + 'static, R: Runtime> DeviceCache<W, R> {
    /// Reserves `bytes` of the group's RAM budget for a load of `key`, making room and waiting
    /// for it as the module explains; [`CacheError::NoRoom`] once the room wait is over, and
    /// [`CacheError::ShutDown`] instead of a wait once the group is shut down.
    ///
    /// Under the overflow policy nothing is reserved (`Ok(None)`): this cache's idle records
    /// make what room they can, and the admission may overshoot, with a warning; its peers are
    /// asked to reconcile once it is charged (SPEC 3.2).
    ///
    /// Every round reads the cap and the policy again, in the same step as the counters: a
    /// policy switched on lets a waiting load go ahead, and a cap lowered below `bytes`
    /// refuses it with [`CacheError::TooLarge`]; both changes wake the wait (S-Z2, S-Z3).
    pub(crate) fn reserve_room(
        self: &Arc<Self>,
        key: &str,
        bytes: u64,
        deadline: Deadline,
    ) -> Result<Option<Reservation<R>>, CacheError> {
        let budget = Arc::clone(self.group().budget());
        let wait = deadline.bound(self.runtime(), budget.room_wait(), Mutant::DEADLINE_SKIPS_ROOM);
        let start = self.now();
        // The historical bug reads the policy and the cap once, before the first round.
        let once = self.runtime().mutant(Mutant::ROOM_WAIT_READS_LIMITS_ONCE);
        let ignore_shutdown = self.runtime().mutant(Mutant::ROOM_WAIT_IGNORES_SHUTDOWN);
        let mut first = true;
        let mut seeking = None;
        // Before the first look: a release wakes only watched waits (`RamBudget::room_freed`).
        let watch_late = self.runtime().mutant(Mutant::ROOM_WATCH_LATE);
        let mut watch = (!watch_late).then(|| budget.watch_room());
        loop {
            // Both read before looking: a change that lands while it looks ends the wait. (A
            // load that joins the line in this round starts its own signal at epoch zero.)
            let (seen, turn) = (budget.room_epoch(), seeking.as_ref().map_or(0, Seeking::epoch));
            let round = self.try_reserve_making_room(bytes, &mut seeking);
            let behind = matches!(round, Err(NoReservation::Behind));
            match round {
                Ok(reservation) => return Ok(Some(reservation)),
                Err(NoReservation::Overflow) if first || !once => {
                    self.overflow_admission(key, bytes);
                    return Ok(None);
                }
                Err(NoReservation::TooLarge { cap }) if first || !once => {
                    return Err(telemetry::cache_refused(CacheError::TooLarge {
                        key: key.to_owned(),
                        bytes,
                        cap,
                    }));
                }
                Err(_) => {}
            }
            first = false;
            let left = wait.saturating_sub(self.now().saturating_sub(start));
            if left.is_zero() {
                return Err(self.no_room(key, bytes, wait));
            }
            // The group shut down: refused rather than waiting (read after `seen`, which a
            // shutdown moves once it is shut down: one landing later ends the wait at once).
            if !ignore_shutdown && self.group().is_shut_down() {
                return Err(telemetry::cache_refused(CacheError::ShutDown { key: key.to_owned() }));
            }
            if watch_late {
                watch.get_or_insert_with(|| budget.watch_room());
            }
            // A timeout goes round once more: the last look decides. Behind another load, only
            // its leaving the line (or a lowered cap) can change this one's answer.
            let _ = match seeking.as_ref().filter(|_| behind) {
                Some(seeking) => seeking.wait_for_turn(turn, left),
                None => budget.wait_for_room(seen, left),
            };
        }
    }

    /// The overflow policy's admission: this cache's idle records make what room they can,
    /// and what does not fit overshoots, with a warning.
    fn overflow_admission(self: &Arc<Self>, key: &str, bytes: u64) {
        let budget = self.group().budget();
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
    }

    /// One round: reserve if `bytes` fit; else evict here, then ask the peers, trying after each.
    /// The first look decides whether to go on at all: under the overflow policy, or for bytes
    /// above the cap, it says why not and nothing is evicted. From the first refusal on, the
    /// load counts as looking for room (`seeking`, until it returns), so that a peer busy now
    /// honours its request at its next release (C-B4).
    fn try_reserve_making_room(
        self: &Arc<Self>,
        bytes: u64,
        seeking: &mut Option<Seeking<R>>,
    ) -> Result<Reservation<R>, NoReservation> {
        let budget = self.group().budget();
        let ticket = match seeking {
            Some(seeking) => seeking.ticket(),
            None => {
                match budget.reserve_or_why(bytes, None) {
                    Err(NoReservation::NoRoom | NoReservation::Behind) => {}
                    decided => return decided,
                }
                seeking.insert(budget.seek_room()).ticket()
            }
        };
        // In line, it looks (again) in one step with the cap and the policy: a change made
        // before it joined is seen here, one made after reaches it through its signal. Behind
        // another, the room it would make is the first one's to take (this one asks once it is
        // first, woken when the one before it leaves the line).
        match budget.reserve_or_why(bytes, Some(ticket)) {
            Err(NoReservation::NoRoom) => {}
            decided => return decided,
        }
        // The historical policy waits for every debit instead, and races the first for it.
        if self.runtime().mutant(Mutant::ROOM_SEEKERS_BARGE) && !budget.first_in_line(ticket) {
            return Err(NoReservation::NoRoom);
        }
        // An eviction's bytes are a guess (a peer may adopt the weights of a record taken out
        // before they are dropped, which then gives nothing back): while this cache evicted
        // something and the bytes still do not fit, it looks again, rather than wait for a
        // change that may never come.
        for _ in 0..LOOKS {
            if self.make_room_here(bytes) == 0 {
                break;
            }
            if let Some(reservation) = budget.try_reserve(bytes, Some(ticket)) {
                return Ok(reservation);
            }
            if self.runtime().mutant(Mutant::ROOM_ROUND_TRUSTS_ITS_GUESS) {
                break;
            }
        }
        if let Some(reservation) = budget.try_reserve(bytes, Some(ticket)) {
            return Ok(reservation);
        }
        // The peers' evictions are guesses too: asked again while one evicted something and
        // the bytes still do not fit.
        for _ in 0..LOOKS {
            let evicted: usize =
                self.group().peers(self.id()).iter().map(|peer| peer.request_room(bytes)).sum();
            if let Some(reservation) = budget.try_reserve(bytes, Some(ticket)) {
                return Ok(reservation);
            }
            if evicted == 0 || self.runtime().mutant(Mutant::ROOM_ROUND_TRUSTS_ITS_GUESS) {
                break;
            }
        }
        Err(NoReservation::NoRoom)
    }

    /// The refusal of a load of `key` that found no room: the bytes it needed, the cap, and what
    /// holds the rest.
    fn no_room(self: &Arc<Self>, key: &str, bytes: u64, waited: std::time::Duration) -> CacheError {
        let budget = self.group().budget();
        let mut pinned = self.pinned();
        for peer in self.group().peers(self.id()) {
            pinned.extend(peer.pinned_if_free());
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
