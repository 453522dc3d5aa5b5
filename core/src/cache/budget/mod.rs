//! [`RamBudget`]: one global RAM cap shared by every device cache.
//!
//! Accounting is truthful by construction: bytes are counted by RAII charges. A
//! [`SharedCharge`] lives inside each canonical set of CPU weights and is debited when the last
//! holder of those weights lets go; a [`NonSharedCharge`] lives inside each non-shared resident
//! record and is debited, against the cache that made it, when the record goes. Nothing else
//! moves the counters, so "bytes counted" always equals "bytes alive" (A1, A3).
//!
//! The cap is a hard limit (SPEC 3.11, A7): a [`Reservation`] counts the bytes of a load *before*
//! the loader allocates them, and becomes the load's charge on admission (or is released, on
//! every other path, by its `Drop`). Bytes in use plus bytes reserved never exceed the cap,
//! unless the opt-in overflow policy ([`RamBudget::set_overflow`]) lets admissions overshoot.
//!
//! The budget's monitor is a leaf: nothing is called while it is held, so a charge may be
//! dropped anywhere, under any other lock. Every debit (a charge or a reservation dropped) and
//! every [`RamBudget::room_changed`] notifies the threads waiting for room, with no extra
//! critical section when nobody waits; a release that leaves a record evictable
//! ([`RamBudget::room_freed`]) notifies the waits that watch ([`RamBudget::watch_room`]), as
//! every wait for room does, and costs a fence when none does.

use std::collections::BTreeMap;
use std::fmt;
use std::time::Duration;

use crate::error::InvalidConfig;
use crate::line::Line;
use crate::mutants::Mutant;
use crate::runtime::Ordering::Relaxed;
use crate::runtime::{Arc, AtomicWord, LineStep, Monitor, Runtime, Signal, StdRuntime, TimedOut, Watch};

mod seeking;

pub(crate) use seeking::Seeking;

mod charges;

pub use charges::{NonSharedCharge, Reservation, SharedCharge};

/// Identifies one device cache in the budget's per-cache accounting.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct CacheId(u64);

/// What the budget counts, and the loads in line for room (each with its waker `W`).
#[derive(Debug)]
struct Counters<W> {
    /// `shared` plus every `non_shared` count; every charge is checked against it, so no
    /// partial sum can overflow and no debit can underflow.
    total: u64,
    shared: u64,
    non_shared: BTreeMap<CacheId, u64>,
    /// Bytes reserved by loads that have not been admitted yet (not part of `total`).
    reserved: u64,
    /// The most `total + reserved` ever was.
    high_water: u64,
    caches: u64,
    /// Admissions may overshoot the cap (the opt-in overflow policy).
    overflow: bool,
    /// How long a reservation waits for room.
    room_wait: Duration,
    /// The cap ([`RamBudget::set_cap`] changes it while serving).
    cap: u64,
    /// Loads looking for room right now, in arrival order, from their first refusal until
    /// they return (waiting or not), each with the signal it waits on behind the first: only
    /// the first may reserve, and a room request deferred to a busy peer is honoured while any
    /// looks (C-B4, SPEC 2.14).
    line: Line<W>,
}

/// The default bound on a wait for room.
const DEFAULT_ROOM_WAIT: Duration = Duration::from_secs(10);

// ---- The counters -------------------------------------------------------------------------------

impl<W> Counters<W> {
    /// An empty count under `cap`.
    fn new(cap: u64) -> Self {
        Self {
            total: 0,
            shared: 0,
            non_shared: BTreeMap::new(),
            reserved: 0,
            high_water: 0,
            caches: 0,
            overflow: false,
            room_wait: DEFAULT_ROOM_WAIT,
            cap,
            line: Line::default(),
        }
    }

    fn in_use(&self) -> u64 {
        self.total
    }

    /// Bytes in use plus bytes reserved (never above `u64::MAX`: every addition is checked).
    fn committed(&self) -> u64 {
        self.total.saturating_add(self.reserved)
    }

    fn raise_high_water(&mut self) {
        self.high_water = self.high_water.max(self.committed());
    }

    /// Adds `bytes` to the total, or refuses (changing nothing) if the sum would overflow.
    fn add(&mut self, bytes: u64) -> Result<(), Overflow> {
        let total = self.total.checked_add(bytes).ok_or(Overflow)?;
        total.checked_add(self.reserved).ok_or(Overflow)?;
        self.total = total;
        self.raise_high_water();
        Ok(())
    }
}

/// Why [`RamBudget::reserve_or_why`] reserved nothing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum NoReservation {
    /// The overflow policy is on: nothing is reserved, admissions may overshoot.
    Overflow,
    /// The bytes exceed the whole cap.
    TooLarge {
        /// The cap when it was read.
        cap: u64,
    },
    /// The bytes do not fit next to what is in use and reserved.
    NoRoom,
    /// Loads that came earlier still look for room: theirs is the room that appears first.
    Behind,
}

/// A charge would overflow the budget's byte sums; nothing was charged.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Overflow;

// ---- The budget ---------------------------------------------------------------------------------

/// The global RAM cap, and what is counted against it right now.
pub struct RamBudget<R: Runtime = StdRuntime> {
    counters: R::Monitor<Counters<Arc<Signal<R>>>>,
    /// 1 while the committed bytes exceed the cap (kept by [`RamBudget::tally`]), else 0.
    over: R::Atomic,
    /// Bumped by every debit, every [`RamBudget::room_changed`] and, while a wait watches it,
    /// every [`RamBudget::room_freed`]: what the first load in line (and any other waiter for
    /// room) waits to see move.
    room: Signal<R>,
}

impl<R: Runtime> RamBudget<R> {
    /// A budget of `cap` bytes on `runtime`. A zero cap is refused.
    pub fn new(cap: u64, runtime: &R) -> Result<Arc<Self>, InvalidConfig> {
        if cap == 0 {
            return Err(InvalidConfig { field: "cap", reason: "must be greater than zero" });
        }
        let counters = Counters::new(cap);
        Ok(Arc::new(Self {
            counters: runtime.monitor(counters),
            over: runtime.atomic(0),
            room: Signal::new(runtime),
        }))
    }

    /// Lets admissions overshoot the cap (`true`), as before budgets were hard: a load that
    /// finds no room is admitted anyway with a warning, and the overshoot is evicted at the next
    /// releases (SPEC 3.2). Off by default: the cap is a hard limit. Switching it on wakes the
    /// loads waiting for room, which then go ahead under it (S-Z3).
    pub fn set_overflow(&self, overflow: bool) {
        let switched_on = self.tally(|c| overflow && !std::mem::replace(&mut c.overflow, overflow));
        if switched_on {
            self.room.bump_at(Mutant::LOST_WAKEUP_OVERFLOW_ON);
        }
    }

    /// Whether admissions may overshoot the cap.
    pub fn overflow(&self) -> bool {
        self.tally(|c| c.overflow)
    }

    /// Bounds how long a reservation waits for room once evicting found none (default 10 s).
    /// A zero wait refuses at once; `Duration::MAX` means unbounded.
    pub fn set_room_wait(&self, wait: Duration) {
        self.tally(|c| c.room_wait = wait);
    }

    /// How long a reservation waits for room.
    pub fn room_wait(&self) -> Duration {
        self.tally(|c| c.room_wait)
    }

    /// Bytes reserved by loads not admitted yet.
    pub fn reserved(&self) -> u64 {
        self.tally(|c| c.reserved)
    }

    /// Bytes in use plus bytes reserved: what A7 holds to the cap.
    pub fn committed(&self) -> u64 {
        self.tally(|c| c.committed())
    }

    /// Reserves `bytes` if they fit under the cap now (`None`, nothing changed, if not), for a
    /// caller in line with `ticket` (`None`: not in line). The reservation counts until it is
    /// dropped or becomes a charge.
    pub(crate) fn try_reserve(self: &Arc<Self>, bytes: u64, ticket: Option<u64>) -> Option<Reservation<R>> {
        self.reserve_or_why(bytes, ticket).ok()
    }

    /// Reserves `bytes` if they fit under the cap now; otherwise says why not, from the same
    /// look at the counters, the cap and the policy (so a wait for room re-reads all three on
    /// every round, in one step). Loads that look for room are served in arrival order (SPEC
    /// 2.14): while one with a ticket before `ticket` (any, for `None`) still looks, there is
    /// no room for this one, so the room a debit makes goes to the first in line. The order is
    /// strict: a first load that no eviction can serve (the rest pinned or reserved) holds the
    /// loads behind it, smaller ones too, until its own room wait ends.
    pub(crate) fn reserve_or_why(
        self: &Arc<Self>,
        bytes: u64,
        ticket: Option<u64>,
    ) -> Result<Reservation<R>, NoReservation> {
        let barge = self.room.runtime().mutant(Mutant::ROOM_SEEKERS_BARGE);
        let committed = self.tally(|c| {
            if c.overflow {
                return Err(NoReservation::Overflow);
            }
            if bytes > c.cap {
                return Err(NoReservation::TooLarge { cap: c.cap });
            }
            if !barge && c.line.ahead(ticket) {
                return Err(NoReservation::Behind);
            }
            if c.committed().checked_add(bytes).is_none_or(|after| after > c.cap) {
                return Err(NoReservation::NoRoom);
            }
            c.reserved += bytes;
            c.raise_high_water();
            self.room.runtime().observe_line(c.line.key(), LineStep::Served { ticket });
            Ok(c.committed())
        })?;
        let reservation = Reservation { budget: Arc::clone(self), bytes };
        tracing::debug!(bytes, committed, "reserved");
        Ok(reservation)
    }

    /// Counts the caller among the waiters for room until the watch is dropped: take it before
    /// the first [`RamBudget::room_epoch`] and keep it until done waiting, or a release's
    /// [`RamBudget::room_freed`], which wakes only watched waits, may pass it by.
    pub(crate) fn watch_room(&self) -> Watch<'_, R> {
        self.room.watch()
    }

    /// The room epoch: read it *before* looking for room, then [`RamBudget::wait_for_room`]
    /// past it (the protocol of [`Signal`](crate::runtime::Signal)), under a
    /// [`RamBudget::watch_room`].
    pub(crate) fn room_epoch(&self) -> u64 {
        self.room.epoch()
    }

    /// Waits until a debit, a [`RamBudget::room_changed`] or (under a
    /// [`RamBudget::watch_room`]) a [`RamBudget::room_freed`] happened since `seen` was read, at
    /// most `timeout`.
    pub(crate) fn wait_for_room(&self, seen: u64, timeout: Duration) -> Result<(), TimedOut> {
        self.room.wait_past(seen, Some(timeout))
    }

    /// Whether some load is waiting for room now.
    pub(crate) fn room_waiters(&self) -> bool {
        self.room.has_waiters()
    }

    /// Tells the threads waiting for room that something they could use changed (a record
    /// became evictable); `site` is the lost-wakeup mutant of the caller's notify site.
    pub(crate) fn room_changed(&self, site: Mutant) {
        self.room.bump_at(site);
    }

    /// [`RamBudget::room_changed`] for the release of a claim that left a record evictable:
    /// wakes the watched waits only ([`RamBudget::watch_room`]), so that a release nobody waits
    /// for costs a fence and a load, not the signal's monitor (every release of every cache of
    /// the group would take it).
    pub(crate) fn room_freed(&self, site: Mutant) {
        self.room.bump_if_watched_at(site);
    }

    /// Runs `f` on the counters under their monitor, and keeps `over` in step.
    fn tally<U>(&self, f: impl FnOnce(&mut Counters<Arc<Signal<R>>>) -> U) -> U {
        self.counters.with(|c| {
            let out = f(c);
            let over = u64::from(c.committed() > c.cap);
            if self.over.load(Relaxed) != over {
                self.over.store(over, Relaxed);
            }
            out
        })
    }

    /// Whether the committed bytes may exceed the cap, read without the counters' monitor: a
    /// change made before this call is seen, one made concurrently may not be.
    pub(crate) fn maybe_over(&self) -> bool {
        self.over.load(Relaxed) != 0
    }

    /// Runs a debit, then wakes the waiters for room (the
    /// [`Mutant::LOST_WAKEUP_BUDGET_DEBIT`] mutant forgets to).
    fn debit<T>(&self, f: impl FnOnce(&mut Counters<Arc<Signal<R>>>) -> T) -> T {
        let out = self.tally(f);
        self.room.bump_at(Mutant::LOST_WAKEUP_BUDGET_DEBIT);
        out
    }

    /// The cap in bytes.
    pub fn cap(&self) -> u64 {
        self.tally(|c| c.cap)
    }

    /// Changes the cap (SPEC 1.12); `true` if it was lowered. Either way it wakes the loads
    /// waiting for room: a raise may let them in, and one that no longer fits is refused. Lowering it holds for every later reservation at once; what is
    /// already in use is evicted down to it by
    /// [`CacheGroup::set_cap`](super::CacheGroup::set_cap), which calls this. The high-water
    /// mark stays the peak since the budget was made. Zero is refused and changes nothing.
    pub fn set_cap(&self, cap: u64) -> Result<bool, InvalidConfig> {
        if cap == 0 {
            return Err(InvalidConfig { field: "cap", reason: "must be greater than zero" });
        }
        // The loads behind the first are told of a lowering too (one may be too large now),
        // each through its own signal, read with the change.
        let (lowered, behind) = self.tally(|c| {
            let lowered = std::mem::replace(&mut c.cap, cap) > cap;
            let behind: Vec<Arc<Signal<R>>> =
                if lowered { c.line.behind_first().map(Arc::clone).collect() } else { Vec::new() };
            (lowered, behind)
        });
        // Both ways wake the loads waiting for room: a raise may let them in, a lowering may
        // make them too large for the budget, which they must hear at once (S-Z2).
        self.room.bump_at(if lowered {
            Mutant::LOST_WAKEUP_CAP_LOWERED
        } else {
            Mutant::LOST_WAKEUP_CAP_RAISED
        });
        for seeker in behind {
            seeker.bump_at(Mutant::LOST_WAKEUP_CAP_LOWERED_BEHIND);
        }
        Ok(lowered)
    }

    /// Bytes counted now: each live canonical once, plus every non-shared resident record.
    pub fn in_use(&self) -> u64 {
        self.tally(|c| c.in_use())
    }

    /// Bytes of live canonical weights (each counted once, however many records share it).
    pub fn shared_bytes(&self) -> u64 {
        self.tally(|c| c.shared)
    }

    /// Bytes of non-shared resident records charged to `cache`.
    pub fn non_shared_bytes(&self, cache: CacheId) -> u64 {
        self.tally(|c| c.non_shared.get(&cache).copied().unwrap_or(0))
    }

    /// Bytes in use plus reserved above the cap (0 when within it; only the overflow policy
    /// goes above).
    pub fn excess(&self) -> u64 {
        self.tally(|c| c.committed().saturating_sub(c.cap))
    }

    /// Whether `bytes` more would fit under the cap once `pending` bytes (evictions decided,
    /// not yet debited) are given back: one read of the counters and the cap together.
    pub(crate) fn fits_after(&self, pending: u64, bytes: u64) -> bool {
        self.tally(|c| c.committed().saturating_sub(pending).saturating_add(bytes) <= c.cap)
    }

    /// Whether `bytes` more would still fit under the cap, next to what is in use and reserved.
    pub fn fits(&self, bytes: u64) -> bool {
        self.tally(|c| c.committed().saturating_add(bytes) <= c.cap)
    }

    /// The most ever counted at once, reservations included.
    pub fn high_water(&self) -> u64 {
        self.tally(|c| c.high_water)
    }

    /// A new cache identity for per-cache accounting.
    pub(crate) fn register_cache(&self) -> CacheId {
        self.tally(|c| {
            c.caches += 1;
            CacheId(c.caches)
        })
    }

    /// Counts `bytes` of canonical weights until the returned charge is dropped; refused if the
    /// budget's sums would overflow. With a `reservation`, the charge takes its place in the
    /// same critical section (up to its bytes; what the reservation holds beyond is released
    /// when it is dropped).
    ///
    /// The store calls it inside its own monitor, so it reports nothing (a `tracing`
    /// subscriber is user code): the admission that asked for it reports it.
    pub(crate) fn charge_shared(
        self: &Arc<Self>,
        bytes: u64,
        reservation: Option<&mut Reservation<R>>,
    ) -> Result<SharedCharge<R>, Overflow> {
        self.tally(|c| {
            Self::settle(c, reservation, bytes);
            c.add(bytes)?;
            c.shared += bytes;
            Ok(())
        })?;
        Ok(SharedCharge { budget: Arc::clone(self), bytes })
    }

    /// Moves up to `bytes` of `reservation` out of the reserved count (the caller charges them).
    fn settle(c: &mut Counters<Arc<Signal<R>>>, reservation: Option<&mut Reservation<R>>, bytes: u64) {
        if let Some(reservation) = reservation {
            let moved = reservation.bytes.min(bytes);
            reservation.bytes -= moved;
            c.reserved -= moved;
        }
    }

    /// Counts `bytes` of a non-shared record of `cache` until the returned charge is dropped;
    /// refused if the budget's sums would overflow.
    pub(crate) fn charge_non_shared(
        self: &Arc<Self>,
        cache: CacheId,
        bytes: u64,
        reservation: Option<&mut Reservation<R>>,
    ) -> Result<NonSharedCharge<R>, Overflow> {
        let committed = self.tally(|c| {
            Self::settle(c, reservation, bytes);
            c.add(bytes)?;
            *c.non_shared.entry(cache).or_default() += bytes;
            Ok(c.committed())
        })?;
        let charge = NonSharedCharge { budget: Arc::clone(self), cache, bytes };
        tracing::debug!(bytes, committed, "charged non-shared");
        Ok(charge)
    }
}

impl<R: Runtime> fmt::Debug for RamBudget<R> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RamBudget").field("cap", &self.cap()).field("in_use", &self.in_use()).finish()
    }
}

// Historical bugs: the bodies of the switches above (see `crate::mutants`).
impl<R: Runtime> RamBudget<R> {
    /// Mutant C-R2 only: subtracts `bytes` from `cache`'s non-shared count with no charge behind
    /// it (the historical mis-debit).
    pub(crate) fn mis_debit(&self, cache: CacheId, bytes: u64) {
        self.tally(|c| {
            if let Some(charged) = c.non_shared.get_mut(&cache) {
                let debit = bytes.min(*charged);
                *charged -= debit;
                c.total -= debit;
            }
        });
    }
}

#[cfg(test)]
mod tests;
