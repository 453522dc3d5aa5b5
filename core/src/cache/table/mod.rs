//! The record table of one device cache: which record occupies each key, what protects it from
//! eviction, its place in the LRU order, its device copy, the records replaced while still
//! held, and the cache's counters.
//!
//! Every decision a cache makes about its records is a method here that changes the table and
//! returns what to do: the records it took out ([`Gone`]) come back as values for the shell
//! ([`DeviceCache`](super::DeviceCache)) to drop and report once its lock is released. The table
//! takes no lock, reads no clock (the time comes in as an argument) and runs no user code: a
//! record's weights and its device copy are dropped by whoever receives them. Nothing outside
//! this folder reads or writes a slot's fields.
//!
//! # Invariants (each method keeps them)
//! - A record is taken out (evicted) only while free (no lock, hold or admission), or by a
//!   historical bug's flag; one that is protected is marked stale instead, and its last release
//!   takes it out ([`Table::release`]).
//! - Every change names its record by identity: a release, conversion or placement of a record
//!   that no longer occupies its key (replaced while stale) changes nothing in the map.
//! - A stale record is never handed out again ([`Table::get`], [`Table::admit_existing`]); an
//!   admission finding one replaces it, and the old record is detached: described, no longer
//!   resident in the stats, alive only through its holders, whose last release evicts it (it is
//!   counted and reported then, once, as a stale occupant's last release is).
//! - `stats.bytes_resident` is the sum of the bytes of the records in the map.

mod device_copy;
mod eviction;
mod historical;
mod slots;
mod stats;
#[cfg(test)]
mod tests;

use std::time::Duration;

use super::weights::CanonicalId;
pub(crate) use crate::hashed::hash as key_hash;
use crate::runtime::{Arc, Weak};
use slots::Slots;

pub(crate) use device_copy::{Copy, DeviceCopy, OnDevice};
pub use stats::{CacheStats, Resident};

/// What the table reads of a record: its key, its bytes, and whether its weights are shared.
pub(crate) trait Entry {
    /// The key it was admitted under.
    fn key(&self) -> &str;
    /// Its key's hash, as the table files it ([`key_hash`]): a record that keeps it saves
    /// hashing its key at every conversion and release.
    fn key_hash(&self) -> u64 {
        key_hash(self.key())
    }
    /// Its bytes in the RAM budget.
    fn bytes(&self) -> u64;
    /// The canonical it shares, or `None` for a private copy.
    fn canonical(&self) -> Option<CanonicalId>;
    /// Whether something besides this record keeps its shared canonical alive (a peer's
    /// record, a load in flight): then taking the record out gives no bytes back.
    fn shared_elsewhere(&self) -> bool;
}

/// Which counter of a record a handle holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Claim {
    Admitting,
    Hold,
    Lock,
}

/// A record in the map, with what protects it from eviction.
struct Slot<E> {
    record: Arc<E>,
    /// Live guards (locks).
    locks: usize,
    /// Live loaded handles that have not locked yet.
    holds: usize,
    /// Live admissions (between `put` and the loader's retrieval).
    admitting: usize,
    /// Evict at the last release (set by `drop_model`, `shutdown`, or at birth after shutdown).
    stale: bool,
    /// LRU clock of the last use.
    last_used: u64,
    /// Runtime time of its admission or of its last release (for keep-alive expiry; read only
    /// while it is free, and every release stamps it); `None` when released while no
    /// keep-alive was in force (no clock read then): it counts as idle from the next expiry
    /// pass on.
    idle_since: Option<Duration>,
    /// The record's copy on the cache's device.
    device: DeviceCopy,
}

impl<E> Slot<E> {
    /// Nothing protects it: no lock, no hold, no admission.
    fn free(&self) -> bool {
        self.locks == 0 && self.holds == 0 && self.admitting == 0
    }

    /// Whether an eviction path may take it (`admitting_is_free`: the C-R3/C-R23 mutant).
    fn evictable(&self, admitting_is_free: bool) -> bool {
        self.free() || (admitting_is_free && self.locks == 0 && self.holds == 0)
    }

    fn counter(&mut self, claim: Claim) -> &mut usize {
        match claim {
            Claim::Admitting => &mut self.admitting,
            Claim::Hold => &mut self.holds,
            Claim::Lock => &mut self.locks,
        }
    }
}

/// One record taken out of the table, with its device copy. Dropped (and reported) once the
/// cache's lock is released: dropping them may run the weights' destructors, which are user
/// code.
pub(crate) struct Gone<E> {
    record: Arc<E>,
    device: DeviceCopy,
}

impl<E> Gone<E> {
    /// The record taken out.
    pub(crate) fn record(&self) -> &Arc<E> {
        &self.record
    }
}

/// What [`Table::release`] did.
pub(crate) struct Released<E> {
    /// The record, taken out: stale, and this was its last claim.
    pub(crate) evicted: Option<Gone<E>>,
    /// The record is free now (may be the room a load waits for).
    pub(crate) freed: bool,
    /// When the record expires, if it is idle under a keep-alive.
    pub(crate) expires: Option<Duration>,
    /// A lock ended on a record whose device copy is resident: the copy may be offloaded now.
    pub(crate) copy_unlocked: bool,
}

/// What [`Table::insert`] did.
pub(crate) struct Inserted<E> {
    /// The record admitted (the one found, if someone admitted the key meanwhile).
    pub(crate) record: Arc<E>,
    /// The new record, not needed: the key was admitted meanwhile (drop it outside the lock).
    pub(crate) spare: Option<Arc<E>>,
    /// The stale occupant the new record replaced (drop it outside the lock): evicted now if
    /// nothing claimed it any more (report it then), else at its holders' last release.
    pub(crate) replaced: Option<(Gone<E>, bool)>,
}

/// A record replaced while stale and still claimed: described when detached, so that reading
/// it never takes a strong reference (which could make the reader the last holder, running the
/// weights' `Drop` there); its last release evicts it.
struct Detached<E> {
    record: Weak<E>,
    described: Resident,
    /// Claims still held on it (conversions keep the count; nothing new claims it).
    claims: usize,
}

/// The records resident for one device and the cache's counters.
pub(crate) struct Table<E> {
    /// Hashed: a lookup by key finds its slot with one hash and one key compare, and a claim's
    /// conversion or release finds its record's slot with one hash and a pointer compare.
    /// Nothing depends on their order: whatever reports or acts on several keys sorts them
    /// first ([`Table::keys_where`]), and the LRU order is the slots' clock stamps.
    slots: Slots<Slot<E>>,
    /// Records replaced while stale and still claimed: alive (and counted by the budget) until
    /// their holders let go.
    detached: Vec<Detached<E>>,
    clock: u64,
    shut_down: bool,
    keep_alive: Option<Duration>,
    /// How long a lock waits for another thread's move of the same record.
    move_wait: Duration,
    stats: CacheStats,
}

// ---- Letting go of the table --------------------------------------------------------------------

impl<E> Table<E> {
    /// Its records, taken out (a dropped cache lets go of each under a catch of its own).
    pub(crate) fn into_records(self) -> impl Iterator<Item = Arc<E>> {
        self.slots.into_values().map(|slot| slot.record)
    }
}

// ---- Reading the table ----------------------------------------------------------------------

impl<E: Entry> Table<E> {
    /// An empty table whose moves wait at most `move_wait`.
    pub(crate) fn new(move_wait: Duration) -> Self {
        Self {
            slots: Slots::default(),
            detached: Vec::new(),
            clock: 0,
            shut_down: false,
            keep_alive: None,
            move_wait,
            stats: CacheStats::default(),
        }
    }

    /// Keys in the map, in order.
    pub(crate) fn keys(&self) -> Vec<String> {
        self.keys_where(|_, _| true)
    }

    /// The keys of the slots `keep` selects, in order.
    fn keys_where(&self, keep: impl Fn(&str, &Slot<E>) -> bool) -> Vec<String> {
        let mut keys: Vec<String> =
            self.slots.iter().filter(|(k, v)| keep(k, v)).map(|(k, _)| k.clone()).collect();
        keys.sort_unstable();
        keys
    }

    /// The records in the map described, in key order.
    fn described(&self) -> Vec<Resident> {
        let mut resident: Vec<Resident> = self.slots.values().map(|v| describe(&*v.record, false)).collect();
        resident.sort_unstable_by(|a, b| a.key.cmp(&b.key));
        resident
    }

    /// The cache's counters.
    pub(crate) fn stats(&self) -> CacheStats {
        self.stats
    }

    /// Whether the cache was shut down.
    pub(crate) fn is_shut_down(&self) -> bool {
        self.shut_down
    }

    /// The keep-alive in force.
    pub(crate) fn keep_alive(&self) -> Option<Duration> {
        self.keep_alive
    }

    /// The bound on a wait for another thread's move.
    pub(crate) fn move_wait(&self) -> Duration {
        self.move_wait
    }

    /// Sets the bound on a wait for another thread's move.
    pub(crate) fn set_move_wait(&mut self, wait: Duration) {
        self.move_wait = wait;
    }

    /// The records in the map, then the detached ones still held (forgetting those let go).
    pub(crate) fn resident(&mut self) -> Vec<Resident> {
        self.detached.retain(|d| d.record.strong_count() > 0);
        let mut resident = self.described();
        resident.extend(self.detached.iter().map(|d| d.described.clone()));
        resident
    }

    /// The records no eviction may take now (locked, held or admitting), with why, on `device`.
    pub(crate) fn pinned(&self, device: &str) -> Vec<String> {
        let mut pinned: Vec<_> = self.slots.iter().filter(|(_, v)| !v.free()).collect();
        pinned.sort_unstable_by_key(|(k, _)| *k);
        let why = |v: &Slot<E>| match (v.locks, v.holds) {
            (0, 0) => "admitting",
            (0, _) => "held",
            _ => "locked",
        };
        pinned
            .into_iter()
            .map(|(k, v)| format!("{k} ({} B, {}, {device})", v.record.bytes(), why(v)))
            .collect()
    }

    /// The slot of `record` if `record` is still the occupant of its key (identity, not key;
    /// `by_key` is the mutant that matches by key).
    fn occupant(&mut self, record: &Arc<E>, by_key: bool) -> Option<&mut Slot<E>> {
        if by_key {
            return self.slots.get_mut(record.key());
        }
        self.slots.find_mut(record.key_hash(), |slot| Arc::ptr_eq(&slot.record, record))
    }

    fn tick(&mut self) -> u64 {
        self.clock += 1;
        self.clock
    }
}

// ---- Claims ---------------------------------------------------------------------------------

impl<E: Entry> Table<E> {
    /// A lookup: the occupant of `key` with a first-use hold armed and its use stamped, unless
    /// it is stale (`serve_stale`: the C-D1 mutant). Counts a hit or a miss.
    pub(crate) fn get(&mut self, key: &str, serve_stale: bool) -> Option<Arc<E>> {
        self.look_up(key, serve_stale, Claim::Hold).map(|slot| Arc::clone(&slot.record))
    }

    /// [`Table::get`] for a caller whose lookup was counted already (`get_or_put` looking again
    /// after a claim or a wait): one call, one hit or one miss.
    pub(crate) fn get_again(&mut self, key: &str, serve_stale: bool) -> Option<Arc<E>> {
        let counted = (self.stats.hits, self.stats.misses);
        let found = self.get(key, serve_stale);
        (self.stats.hits, self.stats.misses) = counted;
        found
    }

    /// The occupant of `key` locked (`get` and `lock` in one step), unless absent or stale
    /// (`serve_stale`: the C-D1 mutant). No idle time is stamped: a locked record is not idle,
    /// and the release that frees it stamps its own.
    pub(crate) fn get_locked(&mut self, key: &str, serve_stale: bool) -> Option<Arc<E>> {
        self.look_up(key, serve_stale, Claim::Lock).map(|slot| Arc::clone(&slot.record))
    }

    /// A hit or a miss on `key`, counted: the occupant, claimed once more by `claim`, unless
    /// absent or stale (`serve_stale`: the C-D1 mutant).
    fn look_up(&mut self, key: &str, serve_stale: bool, claim: Claim) -> Option<&mut Slot<E>> {
        let clock = self.tick();
        let Some(slot) = self.slots.get_mut(key).filter(|slot| serve_stale || !slot.stale) else {
            self.stats.misses += 1;
            return None;
        };
        *slot.counter(claim) += 1;
        slot.last_used = clock;
        self.stats.hits += 1;
        Some(slot)
    }

    /// The occupant of `key`, admitted again (one more admission), unless absent or stale.
    pub(crate) fn admit_existing(&mut self, key: &str) -> Option<Arc<E>> {
        let slot = self.slots.get_mut(key).filter(|slot| !slot.stale)?;
        slot.admitting += 1;
        Some(Arc::clone(&slot.record))
    }

    /// Admits `fresh` under its key at `now`: joins the occupant if one is live (then `fresh` is
    /// spare); else `fresh` takes the key, stale at birth after shutdown (unless
    /// `ignore_shutdown`, the C-R9 mutant) or if `born_dropped` says its canonical was dropped
    /// meanwhile, and a stale occupant is detached. `drop_copy_here` is the mutant that drops
    /// the detached record's device copy in here, under the cache's lock.
    pub(crate) fn insert(
        &mut self,
        fresh: Arc<E>,
        now: Duration,
        born_dropped: impl FnOnce(&E) -> bool,
        (ignore_shutdown, drop_copy_here): (bool, bool),
    ) -> Inserted<E> {
        let clock = self.tick();
        let key = fresh.key().to_owned();
        if let Some(slot) = self.slots.get_mut(&key).filter(|slot| !slot.stale) {
            slot.admitting += 1;
            return Inserted { record: Arc::clone(&slot.record), spare: Some(fresh), replaced: None };
        }
        let dropped = born_dropped(&fresh);
        let slot = Slot {
            record: Arc::clone(&fresh),
            locks: 0,
            holds: 0,
            admitting: 1,
            stale: (self.shut_down && !ignore_shutdown) || dropped,
            last_used: clock,
            idle_since: Some(now),
            device: DeviceCopy::Absent,
        };
        self.stats.admitted(fresh.bytes());
        let mut replaced = self.slots.insert(key, slot).map(|old| self.detach(old));
        if drop_copy_here && let Some((gone, _)) = replaced.as_mut() {
            gone.device = DeviceCopy::Absent;
        }
        Inserted { record: fresh, spare: None, replaced }
    }

    /// Takes `old` (just replaced in the map while stale) out: its record is remembered as
    /// detached until its last claim is released, which evicts it; the returned record and
    /// device copy are dropped outside the lock (the copy counts against the device budget
    /// until its destructor has run). Claimed by nothing (only a historical bug leaves such a
    /// stale occupant), it is evicted now: `true`.
    fn detach(&mut self, old: Slot<E>) -> (Gone<E>, bool) {
        self.detached.retain(|d| d.record.strong_count() > 0);
        let claims = old.locks + old.holds + old.admitting;
        self.stats.left(old.record.bytes(), claims == 0);
        if claims > 0 {
            let (record, described) = (Arc::downgrade(&old.record), describe(&*old.record, true));
            self.detached.push(Detached { record, described, claims });
        }
        (Gone { record: old.record, device: old.device }, claims == 0)
    }

    /// Releases one claim on `record`, detached: its last evicts it (counted now; `unreported`:
    /// the mutant that counts and reports nothing). No device copy comes with it: the slot's
    /// left when it was detached.
    fn release_detached(&mut self, record: &Arc<E>, unreported: bool) -> Option<Gone<E>> {
        let at = self.detached.iter().position(|d| std::ptr::eq(d.record.as_ptr(), Arc::as_ptr(record)))?;
        let detached = &mut self.detached[at];
        decrement(&mut detached.claims);
        if detached.claims > 0 {
            return None;
        }
        self.detached.swap_remove(at);
        if unreported {
            return None;
        }
        self.stats.evicted(record.bytes());
        Some(Gone { record: Arc::clone(record), device: DeviceCopy::Absent })
    }

    /// Turns one claim on `record` into another, stamping its use, if it still occupies its key
    /// (`by_key`: the mutant that matches by key; `unstamped`: the C-R5s one, which leaves the
    /// use unstamped). No idle time is stamped: the record is claimed before and after, and the
    /// release that frees it stamps its own.
    pub(crate) fn convert(
        &mut self,
        record: &Arc<E>,
        (from, to): (Claim, Claim),
        (by_key, unstamped): (bool, bool),
    ) {
        let clock = self.tick();
        if let Some(slot) = self.occupant(record, by_key) {
            decrement(slot.counter(from));
            *slot.counter(to) += 1;
            if !unstamped {
                slot.last_used = clock;
            }
        }
    }

    /// Releases one claim on `record` at `now`: takes the record out if it is stale, still the
    /// occupant of its key, and now free, or detached and this was its last claim
    /// (`ignore_holds`: the C-R7 mutant, which counts a held record free; `unreported`: the
    /// C-R4 one, which leaves a detached record's eviction unreported).
    pub(crate) fn release(
        &mut self,
        record: &Arc<E>,
        claim: Claim,
        now: Option<Duration>,
        (by_key, ignore_holds, unreported): (bool, bool, bool),
    ) -> Released<E> {
        let keep_alive = self.keep_alive;
        let Some(slot) = self.occupant(record, by_key) else {
            let evicted = self.release_detached(record, unreported);
            return Released { evicted, freed: false, expires: None, copy_unlocked: false };
        };
        decrement(slot.counter(claim));
        // An idle time only while a keep-alive is set: a release that read the clock before a
        // `set_keep_alive(None)` must not bring back the idle time that call forgot.
        slot.idle_since = now.filter(|_| keep_alive.is_some());
        let copy_unlocked = claim == Claim::Lock && slot.locks == 0 && slot.device.resident_bytes() > 0;
        let freed = slot.free() || (ignore_holds && slot.locks == 0 && slot.admitting == 0);
        let stale = slot.stale;
        let evicted = (stale && freed).then(|| self.take_out(record.key())).flatten();
        // Released untimed under a keep-alive (set meanwhile): the timer's next pass times it.
        let expires = keep_alive
            .filter(|_| freed && evicted.is_none())
            .map(|k| now.map_or(Duration::ZERO, |now| now.saturating_add(k)));
        Released { evicted, freed, expires, copy_unlocked }
    }
}

/// What [`Table::resident`] reports of `record`.
pub(crate) fn describe<E: Entry>(record: &E, detached: bool) -> Resident {
    Resident { key: record.key().to_owned(), bytes: record.bytes(), canonical: record.canonical(), detached }
}

/// Bytes the budget gets back when the map's reference to `record` is dropped: none while a
/// handle still holds the record or something else shares its canonical. (A peer may adopt the
/// canonical at any moment, so this is what an eviction loop expects, not a promise; the budget
/// itself is exact by construction either way.)
fn frees<E: Entry>(record: &Arc<E>) -> u64 {
    if Arc::strong_count(record) > 1 || record.shared_elsewhere() { 0 } else { record.bytes() }
}

/// Releases one claim. A counter already at zero means a claim was lost (only mutants do that).
fn decrement(counter: &mut usize) {
    *counter = counter.saturating_sub(1);
}
