//! [`DeviceCache`]: the records resident for one device, their protection counters, and every
//! eviction path.
//!
//! # Lock order
//! `cache state` → `store` → `budget` (the budget is a leaf). A cache takes a *peer's* state
//! only with `try_with`; when that fails it leaves the peer a pending-reconcile flag (a leaf
//! monitor of its own).
//!
//! # The reconcile flag
//! A requester sets the flag *before* it tries the peer's lock, and the flag is cleared only
//! under that lock, in the same critical section as the reconcile it asks for. Every holder of
//! the lock checks the flag *after* releasing it (`with_state` does this for every operation), and
//! keeps reconciling while the flag reads set and the lock is free. So a request whose try failed
//! is seen by the holder that made it fail (no lost wakeup, C-R19), and a request that lands
//! while a reconcile runs survives that reconcile's clear (no set/clear race, C-R21).
//! Handles ([`Admission`], [`LoadedModel`], [`ModelGuard`]) re-enter the cache from `Drop`, so
//! cache code never drops one while it holds a lock. Evicted records and device copies are dropped
//! after the lock is released too, because dropping them runs the weights' destructors (user
//! code); an eviction loop counts the bytes its evictions will give back.
//!
//! # User code
//! User code — the weights' and device copies' `Drop`, eviction callbacks, `to_device` — never
//! runs inside a monitor closure (cache state, store, budget, reconcile flag), nor between
//! counting a claim (admission, hold, lock, move) and creating the handle that releases it: a
//! claim is counted in one critical section, its handle is built right after, and only then may
//! the thread honour reconcile requests or drop spare weights ([`DeviceCache::hand_out`]). A
//! panic in user code therefore drops a live handle, which releases its claim.
//!
//! # drop_model
//! [`CacheGroup::drop_model`] first invalidates the key and its submodels in the store, then
//! marks or evicts them in every cache of the group. An admission re-checks, in the critical
//! section that inserts its record, that the canonical it adopted or registered is still the
//! store's: if `drop_model` invalidated it meanwhile, the record is stale at birth. So an
//! admission that overlaps `drop_model` either ends stale or did not adopt the old canonical.

use std::collections::BTreeMap;
use std::fmt;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::time::Duration;

use super::budget::{CacheId, Reservation};
use super::group::CacheGroup;
use super::ledger::DeviceBudget;
use super::loaded::{Admission, Claim, LoadedModel};
use super::record::{DeviceCopy, Record, RecordSlot, Residency};
use super::weights::{CanonicalId, is_model_or_submodel};
use crate::deadline::{CallOptions, Deadline};
use crate::error::{CacheError, InvalidConfig};
use crate::id::ModelId;
use crate::mutants::Mutant;
use crate::runtime::{Arc, Monitor, Runtime, StdRuntime, Weak};
use crate::telemetry;

/// How to admit a model in [`DeviceCache::put`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PutOptions {
    /// Share the weights through the store (adopting a live canonical); else a private copy
    /// charged to this cache.
    pub shared: bool,
    /// Nobody will retrieve this admission right away (refused after shutdown).
    pub prefetch: bool,
}

impl Default for PutOptions {
    fn default() -> Self {
        Self { shared: true, prefetch: false }
    }
}

/// Counters of one cache.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CacheStats {
    /// `get` found the key.
    pub hits: u64,
    /// `get` did not find the key.
    pub misses: u64,
    /// Records evicted, by every path.
    pub evictions: u64,
    /// Bytes of the evicted records.
    pub bytes_evicted: u64,
    /// Bytes of the records resident now (a shared record counts its canonical's bytes here in
    /// every cache that uses it; the group's [`RamBudget`](super::RamBudget) counts it once).
    pub bytes_resident: u64,
    /// The most bytes resident at once since the cache was created.
    pub high_water: u64,
}

impl CacheStats {
    fn admitted(&mut self, bytes: u64) {
        self.bytes_resident = self.bytes_resident.saturating_add(bytes);
        self.high_water = self.high_water.max(self.bytes_resident);
    }

    fn left(&mut self, bytes: u64) {
        self.bytes_resident = self.bytes_resident.saturating_sub(bytes);
    }
}

/// One resident record, as [`DeviceCache::resident`] reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Resident {
    /// The key.
    pub key: String,
    /// The record's bytes.
    pub bytes: u64,
    /// Identity of the shared canonical it uses (equal for records sharing one), or `None` for a
    /// private copy.
    pub canonical: Option<CanonicalId>,
    /// Replaced in the map while stale; alive only through a handle.
    pub detached: bool,
}

/// A function called after every eviction with the key and the record's bytes.
pub type EvictionCallback = Box<dyn Fn(&str, u64) + Send + Sync>;

pub(crate) struct State<W, R: Runtime> {
    pub(crate) slots: BTreeMap<String, RecordSlot<W, R>>,
    /// Records replaced while stale and still held: alive (and counted) until their holders let
    /// go. Each is described when detached, so that reading them never takes a strong reference
    /// (which could make the reader the last holder, running the weights' `Drop` there).
    detached: Vec<(Weak<Record<W, R>>, Resident)>,
    clock: u64,
    shut_down: bool,
    keep_alive: Option<Duration>,
    /// How long a lock waits for another thread's move of the same record.
    move_wait: Duration,
    stats: CacheStats,
}

/// The default bound on a wait for another thread's move of the same record.
const DEFAULT_MOVE_WAIT: Duration = Duration::from_secs(60);

/// One evicted record and its device copy, out of the map. Dropped (and reported) once the
/// state lock is released: dropping them may run the weights' destructors, which are user code.
struct Gone<W, R: Runtime> {
    record: Arc<Record<W, R>>,
    device: DeviceCopy,
}

impl<W, R: Runtime> State<W, R> {
    /// Takes `old` (just replaced in the map while stale) out of the map: its record is
    /// remembered as detached; the returned record and device copy are dropped outside the
    /// lock (the copy counts against the device budget until its destructor has run).
    fn detach(&mut self, old: RecordSlot<W, R>) -> Gone<W, R> {
        self.detached.retain(|(w, _)| w.strong_count() > 0);
        self.detached.push((Arc::downgrade(&old.record), describe(&old.record, true)));
        self.stats.left(old.record.bytes);
        Gone { record: old.record, device: old.device }
    }
}

/// What [`DeviceCache::resident`] reports of `record`.
fn describe<W, R: Runtime>(record: &Record<W, R>, detached: bool) -> Resident {
    Resident {
        key: record.key.clone(),
        bytes: record.bytes,
        canonical: record.shared().map(|c| c.id()),
        detached,
    }
}

/// Bytes the budget gets back when the map's reference to `record` is dropped: none while a
/// handle still holds the record or a peer's record shares its canonical. (A peer may adopt the
/// canonical at any moment, so this is what an eviction loop expects, not a promise; the budget
/// itself is exact by construction either way.)
fn frees<W, R: Runtime>(record: &Arc<Record<W, R>>) -> u64 {
    let shared_elsewhere = record.shared().is_some_and(|c| Arc::strong_count(c) > 1);
    if Arc::strong_count(record) > 1 || shared_elsewhere { 0 } else { record.bytes }
}

/// Where an admission's weights come from.
enum Source<W, R: Runtime> {
    /// A canonical alive in some peer.
    Adopted(Arc<super::weights::Canonical<W, R>>),
    /// The caller's weights, built after the key's drop epoch read `since` (if known).
    Fresh { weights: W, since: Option<u64> },
}

/// What a load prepared before it built the weights it admits.
pub(crate) struct Prepared<R: Runtime> {
    /// The room it reserved (`None`: reserve at admission, or the overflow policy).
    pub(crate) reservation: Option<Reservation<R>>,
    /// The deadline of its waits.
    pub(crate) deadline: Deadline,
    /// The key's [drop epoch](super::WeightStore::drop_epoch) before the weights were built:
    /// if it moved by admission, they may be dropped weights, admitted stale and never
    /// registered as the key's canonical (C-D6). `None`: not known (a plain `put`).
    pub(crate) since: Option<u64>,
}

/// Records [`DeviceCache::mark_dropped`] took out, still to be finished outside every lock.
pub(crate) struct Dropped<'a, W: Send + Sync + 'static, R: Runtime> {
    cache: &'a DeviceCache<W, R>,
    evicted: Vec<Gone<W, R>>,
}

impl<W: Send + Sync + 'static, R: Runtime> Dropped<'_, W, R> {
    /// Drops and reports the records, then honours pending reconcile requests; returns how many.
    pub(crate) fn finish(self) -> usize {
        let count = self.cache.finish_evictions(self.evicted, "dropped");
        self.cache.drain_requests();
        count
    }
}

/// The evictions of one critical section.
type Evicted<W, R> = Vec<Gone<W, R>>;

/// The models resident for one device. Created by [`CacheGroup::cache`].
pub struct DeviceCache<W: Send + Sync + 'static, R: Runtime = StdRuntime> {
    device: String,
    id: CacheId,
    group: Arc<CacheGroup<W, R>>,
    state: R::Monitor<State<W, R>>,
    device_budget: Arc<DeviceBudget<R>>,
    /// The room a peer asked for while this cache was busy (`Some(0)`: back to the cap).
    reconcile_pending: R::Monitor<Option<u64>>,
    on_evict: R::Monitor<Option<Arc<EvictionCallback>>>,
}

impl<W: Send + Sync + 'static, R: Runtime> DeviceCache<W, R> {
    pub(crate) fn new(group: Arc<CacheGroup<W, R>>, device: &str) -> Arc<Self> {
        let rt = &group.runtime;
        let state = rt.monitor(State {
            slots: BTreeMap::new(),
            detached: Vec::new(),
            clock: 0,
            shut_down: false,
            keep_alive: None,
            move_wait: DEFAULT_MOVE_WAIT,
            stats: CacheStats::default(),
        });
        let (reconcile_pending, on_evict) = (rt.monitor(None), rt.monitor(None));
        let id = group.budget.register_cache();
        let device_budget = DeviceBudget::new(rt);
        let device = device.to_owned();
        Arc::new(Self { device, id, group, state, device_budget, reconcile_pending, on_evict })
    }

    /// The device this cache serves.
    pub fn device(&self) -> &str {
        &self.device
    }

    /// This cache's identity in the budget.
    pub fn id(&self) -> CacheId {
        self.id
    }

    /// Calls `callback(key, bytes)` after every eviction, whatever path evicts. It runs on the
    /// thread that evicted, outside the cache's locks, and any call on any cache of the group
    /// (a read-only one such as [`DeviceCache::stats`] included) may be that thread: it honours
    /// pending reconcile requests. Don't take a lock in the callback that a caller of the cache
    /// may hold.
    pub fn on_evict(&self, callback: impl Fn(&str, u64) + Send + Sync + 'static) {
        let callback: EvictionCallback = Box::new(callback);
        // The previous callback (and what it captured) is dropped outside the monitor.
        let previous = self.on_evict.with(|c| c.replace(Arc::new(callback)));
        drop(previous);
    }

    /// Admits `weights` (of `bytes`) under `key` and returns the admission the loader turns
    /// into a [`LoadedModel`]. A key already resident is admitted again (no second copy); with
    /// `shared`, a canonical alive in any peer is adopted. Keys follow the model-id rules (a
    /// `:sub` suffix names a submodel): a bad key is [`CacheError::InvalidKey`]; a size that
    /// would overflow the budget's sums is [`CacheError::SizeOverflow`]; both change nothing.
    ///
    /// Weights that are neither resident here nor adoptable need `bytes` of room: the budget is
    /// a hard limit, so `put` reserves them first ([`RamBudget`](super::RamBudget) explains how
    /// room is made and waited for) and fails with [`CacheError::NoRoom`] (dropping `weights`)
    /// when none comes in time, unless the budget's overflow policy is on. Prefer
    /// [`DeviceCache::get_or_put`], which reserves *before* the weights are built.
    pub fn put(
        self: &Arc<Self>,
        key: &str,
        weights: W,
        bytes: u64,
        how: PutOptions,
    ) -> Result<Admission<W, R>, CacheError> {
        self.put_with(key, weights, bytes, how, CallOptions::new())
    }

    /// [`DeviceCache::put`] with its wait for room bounded by `options` too (SPEC 1.10): the
    /// tighter of the budget's room wait and the call's own bound, then
    /// [`CacheError::NoRoom`], `weights` dropped, nothing admitted.
    pub fn put_with(
        self: &Arc<Self>,
        key: &str,
        weights: W,
        bytes: u64,
        how: PutOptions,
        options: CallOptions,
    ) -> Result<Admission<W, R>, CacheError> {
        let deadline = options.deadline(self.runtime());
        let deadline = if self.mutant(Mutant::DEADLINE_SKIPS_PUT) { Deadline::NONE } else { deadline };
        self.put_reserved(key, weights, bytes, how, Prepared { reservation: None, deadline, since: None })
    }

    /// [`DeviceCache::put`] of weights a load `prepared` for: charged out of its reservation
    /// (made before they were built); without one, fresh weights reserve their room here,
    /// waiting for it until its deadline at the latest. A reservation that is not needed (the
    /// key is resident or adoptable) is released once the admission exists. Weights built
    /// across a drop of the key are admitted stale ([`Prepared::since`]).
    pub(crate) fn put_reserved(
        self: &Arc<Self>,
        key: &str,
        weights: W,
        bytes: u64,
        how: PutOptions,
        prepared: Prepared<R>,
    ) -> Result<Admission<W, R>, CacheError> {
        let Prepared { reservation, deadline, since } = prepared;
        ModelId::validate(key)?;
        let cap = self.group.budget.cap();
        if bytes > cap {
            return Err(telemetry::cache_refused(CacheError::TooLarge { key: key.to_owned(), bytes, cap }));
        }
        self.expire_idle();
        if how.prefetch && self.with_state(|s| s.shut_down) {
            return Err(telemetry::cache_refused(CacheError::ShutDown { key: key.to_owned() }));
        }
        if let Some(record) = self.admit_existing(key) {
            // The caller's weights are not needed; they are dropped (user code) only once the
            // admission exists — never implicitly at return, where a panic would leak it.
            let admission = self.hand_out_then(
                || Admission { cache: Arc::clone(self), record: Some(record) },
                move || drop((weights, reservation)),
            );
            return Ok(admission);
        }
        if self.mutant(Mutant::SIBLING_ADMISSION_CLEARS_HOLDS) {
            self.with_state(|s| s.slots.values_mut().for_each(|slot| slot.holds = 0));
        }
        // Adopting a live canonical adds no bytes, so it needs no room.
        let adopted = if how.shared { self.group.store.adopt(key) } else { None };
        let (source, reservation) = match adopted {
            // The caller's weights (and the room reserved for them) are not needed: dropped now,
            // before any claim is counted.
            Some(canonical) => {
                drop((weights, reservation));
                (Source::Adopted(canonical), None)
            }
            None if reservation.is_some() => (Source::Fresh { weights, since }, reservation),
            None => match self.reserve_room(key, bytes, deadline) {
                Ok(reservation) => (Source::Fresh { weights, since }, reservation),
                Err(refused) => {
                    drop(weights);
                    return Err(refused);
                }
            },
        };
        self.admit(key, source, bytes, how, reservation)
    }

    /// Admits the canonical of `key` that is alive in some cache of the group, without weights of
    /// the caller's: `Ok(None)` when none is alive (the caller then loads the weights and calls
    /// [`DeviceCache::put`]). A key already resident here is admitted again. Unlike adopting by
    /// cloning the canonical's weights into a `put`, an adoption that races `drop_model` is
    /// stale at birth, so dropped weights are never registered anew.
    pub fn adopt(self: &Arc<Self>, key: &str) -> Result<Option<Admission<W, R>>, CacheError> {
        ModelId::validate(key)?;
        self.expire_idle();
        if let Some(record) = self.admit_existing(key) {
            return Ok(Some(self.hand_out(|| Admission { cache: Arc::clone(self), record: Some(record) })));
        }
        let Some(canonical) = self.group.store.adopt(key) else { return Ok(None) };
        let bytes = canonical.bytes();
        self.admit(key, Source::Adopted(canonical), bytes, PutOptions::default(), None).map(Some)
    }

    /// Registers the record of a `put` or an `adopt` and hands out its admission.
    fn admit(
        self: &Arc<Self>,
        key: &str,
        source: Source<W, R>,
        bytes: u64,
        how: PutOptions,
        mut reservation: Option<Reservation<R>>,
    ) -> Result<Admission<W, R>, CacheError> {
        let overflow = || CacheError::SizeOverflow { key: key.to_owned(), bytes, what: "RAM budget" };
        // An adopted canonical keeps the size it was charged with. Adoption upgrades the store's
        // weak reference under its lock; the insert re-checks for one that came alive meanwhile
        // (the C-R28 mutant does not). Refused weights are dropped here, outside every lock.
        let residency = match source {
            Source::Adopted(canonical) => Residency::Shared(canonical),
            Source::Fresh { weights, .. } if how.shared && self.mutant(Mutant::ADOPT_BY_PEEK) => {
                Residency::Shared(
                    self.group.store.insert_unchecked(key, weights, bytes).map_err(|_| overflow())?,
                )
            }
            Source::Fresh { weights, since } if how.shared => {
                let since = since.filter(|_| !self.mutant(Mutant::LOAD_ACROSS_DROP_REGISTERED));
                Residency::Shared(
                    self.group
                        .store
                        .insert_reserved(key, weights, bytes, reservation.as_mut(), since)
                        .map_err(|_| overflow())?
                        .0,
                )
            }
            Source::Fresh { weights, .. } => {
                let charge = self
                    .group
                    .budget
                    .charge_non_shared(self.id, bytes, reservation.as_mut())
                    .map_err(|_| overflow())?;
                Residency::Own { weights, _charge: charge }
            }
        };
        let bytes = residency.shared().map_or(bytes, |canonical| canonical.bytes());
        let fresh = Arc::new(Record { key: key.to_owned(), bytes, residency });
        let now = self.group.runtime.now();
        let recheck = !self.mutant(Mutant::ADOPT_ACROSS_DROP);
        let copy_under_lock = self.mutant(Mutant::STALE_COPY_DROPPED_LOCKED);
        let ignore_shutdown = self.mutant(Mutant::ADMISSION_IGNORES_SHUTDOWN);
        let (record, spare, replaced) = self.state.with(|s| {
            s.clock += 1;
            let clock = s.clock;
            match s.slots.get_mut(key) {
                // Admitted by someone else meanwhile: join that record.
                Some(slot) if !slot.stale => {
                    slot.admitting += 1;
                    (Arc::clone(&slot.record), Some(fresh), None)
                }
                // Absent, or a stale occupant (dropped or shut down while in use): the new record
                // takes the key; the old one is detached and its holders' releases act on it only.
                _ => {
                    // `drop_model` invalidated the canonical since it was adopted: born stale.
                    let dropped =
                        recheck && fresh.shared().is_some_and(|c| !self.group.store.is_current(key, c));
                    let slot = RecordSlot {
                        record: Arc::clone(&fresh),
                        locks: 0,
                        holds: 0,
                        admitting: 1,
                        stale: (s.shut_down && !ignore_shutdown) || dropped,
                        last_used: clock,
                        idle_since: now,
                        device: DeviceCopy::Absent,
                    };
                    s.stats.admitted(fresh.bytes);
                    let mut replaced = s.slots.insert(key.to_owned(), slot).map(|old| s.detach(old));
                    if copy_under_lock && let Some(gone) = replaced.as_mut() {
                        gone.device = DeviceCopy::Absent;
                    }
                    (fresh, None, replaced)
                }
            }
        });
        let device = &self.device;
        let admission = self.hand_out_then(
            || Admission { cache: Arc::clone(self), record: Some(record) },
            move || {
                drop((spare, replaced, reservation));
                tracing::debug!(%device, key, bytes, "admitted");
            },
        );
        if self.group.budget.excess() > 0 {
            for peer in self.group.peers(self) {
                peer.request_reconcile();
            }
        }
        Ok(admission)
    }

    fn admit_existing(&self, key: &str) -> Option<Arc<Record<W, R>>> {
        self.state.with(|s| {
            let slot = s.slots.get_mut(key).filter(|slot| !slot.stale)?;
            slot.admitting += 1;
            Some(Arc::clone(&slot.record))
        })
    }

    /// Builds the handle of a claim just counted, then honours pending reconcile requests (which
    /// may run user code: eviction callbacks, weights' `Drop`) — in that order, so that a panic
    /// there drops the handle and so releases the claim. The C-D4 mutant runs them first.
    pub(crate) fn hand_out<T>(&self, handle: impl FnOnce() -> T) -> T {
        self.hand_out_then(handle, || {})
    }

    /// [`DeviceCache::hand_out`], running `after` (user code too: dropping spare weights) once the
    /// handle exists.
    fn hand_out_then<T>(&self, handle: impl FnOnce() -> T, after: impl FnOnce()) -> T {
        if self.mutant(Mutant::CLAIM_BEFORE_HANDLE) {
            after();
            self.drain_requests();
            return handle();
        }
        let handle = handle();
        after();
        self.drain_requests();
        handle
    }

    /// The model resident under `key`, with its first-use hold armed in the same critical
    /// section as the lookup (so no eviction path can take it before its first lock). A stale
    /// occupant (dropped by `drop_model` or shut down while in use) is a miss: its weights are
    /// never handed out again.
    pub fn get(self: &Arc<Self>, key: &str) -> Option<LoadedModel<W, R>> {
        self.expire_idle();
        if self.mutant(Mutant::HOLD_AFTER_LOOKUP) {
            let record = self.with_state(|s| s.slots.get(key).map(|slot| Arc::clone(&slot.record)))?;
            self.with_state(|s| {
                if let Some(slot) = Self::occupant(s, &record, false) {
                    slot.holds += 1;
                }
            });
            return Some(LoadedModel { cache: Arc::clone(self), record: Some(record) });
        }
        let serve_stale = self.mutant(Mutant::GET_SERVES_STALE);
        let record = self.state.with(|s| {
            s.clock += 1;
            let clock = s.clock;
            match s.slots.get_mut(key).filter(|slot| serve_stale || !slot.stale) {
                Some(slot) => {
                    slot.holds += 1;
                    slot.last_used = clock;
                    s.stats.hits += 1;
                    Some(Arc::clone(&slot.record))
                }
                None => {
                    s.stats.misses += 1;
                    None
                }
            }
        });
        let hit = record.is_some();
        let report = || tracing::debug!(device = %self.device, key, hit, "get");
        if self.mutant(Mutant::REPORT_BEFORE_HANDLE) {
            report();
            return self.hand_out(|| {
                record.map(|record| LoadedModel { cache: Arc::clone(self), record: Some(record) })
            });
        }
        self.hand_out_then(
            || record.map(|record| LoadedModel { cache: Arc::clone(self), record: Some(record) }),
            report,
        )
    }

    /// Evicts unprotected records of this cache, least recently used first, until `bytes`
    /// more fit the global budget (re-reading the global total after each eviction); then asks
    /// each peer to do the same without waiting for it. Returns how many records this cache
    /// evicted.
    pub fn make_room(&self, bytes: u64) -> usize {
        self.expire_idle();
        let evicted = self.make_room_here(bytes);
        if !self.group.budget.fits(bytes) {
            for peer in self.group.peers(self) {
                peer.request_room(bytes);
            }
        }
        evicted
    }

    /// [`CacheGroup::drop_model`]: drops `key` and its submodels `key:*` from the store and from
    /// every cache of this cache's group. Returns how many records were evicted now.
    pub fn drop_model(&self, key: &str) -> usize {
        if self.mutant(Mutant::DROP_ONE_CACHE) {
            let evicted = self.drop_here(key);
            self.group.invalidate(key);
            return evicted;
        }
        self.group.drop_model(key)
    }

    /// This cache's part of `drop_model`: evicts the idle records of `key` and `key:*` now and
    /// marks the locked, held or admitting ones stale (their last release evicts them).
    pub(crate) fn drop_here(&self, key: &str) -> usize {
        let dropped = self.mark_dropped(key);
        dropped.finish()
    }

    /// The state half of [`DeviceCache::drop_here`]: marks and takes out the records, running no
    /// user code; the returned evictions are finished (dropped, reported) by the caller.
    pub(crate) fn mark_dropped(&self, key: &str) -> Dropped<'_, W, R> {
        let admitting = self.mutant(Mutant::ADMISSION_UNPROTECTED);
        let locked_is_free = self.mutant(Mutant::DROP_EVICTS_LOCKED);
        let evicted = self.state.with(|s| {
            let keys: Vec<String> =
                s.slots.keys().filter(|k| is_model_or_submodel(k, key)).cloned().collect();
            keys.iter()
                .filter_map(|k| {
                    if locked_is_free {
                        return Self::remove(s, k);
                    }
                    Self::evict_or_mark(s, k, admitting)
                })
                .collect::<Vec<_>>()
        });
        Dropped { cache: self, evicted }
    }

    /// Idempotent: evicts idle records now; marks locked, held or admitting ones stale, so that
    /// their last release evicts them. After shutdown an admission is stale at birth and a
    /// prefetch is refused.
    pub fn shutdown(&self) -> usize {
        self.mark_shut_down().finish()
    }

    /// The state half of [`DeviceCache::shutdown`]: marks the cache shut down and takes out its
    /// idle records, running no user code; the caller finishes the returned evictions.
    pub(crate) fn mark_shut_down(&self) -> Dropped<'_, W, R> {
        let admitting = self.mutant(Mutant::ADMISSION_UNPROTECTED);
        let (evicted, retained, cancelled) = self.with_state(|s| {
            s.shut_down = true;
            let cancelled = s.keep_alive.take().is_some();
            let keys: Vec<String> = s.slots.keys().cloned().collect();
            let evicted =
                keys.iter().filter_map(|k| Self::evict_or_mark(s, k, admitting)).collect::<Vec<_>>();
            (evicted, keys.into_iter().filter(|k| s.slots.contains_key(k)).collect::<Vec<_>>(), cancelled)
        });
        // The timer may sleep to one of this cache's deadlines, or be kept by it alone.
        if cancelled {
            self.group.timer.poke(None, Mutant::TIMER_NOT_CANCELLED);
        }
        tracing::debug!(device = %self.device, evicted = evicted.len(), stale = retained.len(), "shutdown");
        if self.mutant(Mutant::SHUTDOWN_RELEASES_WEIGHTS) {
            retained.iter().for_each(|key| self.group.store.invalidate(key));
        }
        Dropped { cache: self, evicted }
    }

    /// Evicts records that stayed unprotected for `keep_alive` on the runtime's clock, without
    /// any other call: the group's timer thread (started by the first keep-alive of the group,
    /// ended when no cache has one) sleeps to the earliest deadline. `None` turns expiry off.
    /// Refused (returns `false`) after [`DeviceCache::shutdown`], which cancels keep-alive for
    /// good.
    pub fn set_keep_alive(&self, keep_alive: Option<Duration>) -> bool {
        let set = self.with_state(|s| {
            if s.shut_down {
                return false;
            }
            s.keep_alive = keep_alive;
            true
        });
        if set && keep_alive.is_some() {
            self.group.timer.start(&self.group);
        } else if set {
            // The timer may exit now, if no other cache has a keep-alive.
            self.group.timer.poke(None, Mutant::LOST_WAKEUP_KEEP_ALIVE_SET);
        }
        set
    }

    /// The keep-alive in force (`None` after shutdown).
    pub fn keep_alive(&self) -> Option<Duration> {
        self.with_state(|s| s.keep_alive)
    }

    /// Evicts the records idle (unlocked, unheld, not admitting) for at least the keep-alive, on
    /// the runtime's clock, now. The group's keep-alive timer thread calls it when the earliest
    /// deadline passes, so nobody has to; every `put`, `get` and `make_room` runs it first too.
    /// Returns how many went.
    pub fn expire_idle(&self) -> usize {
        let now = self.group.runtime.now();
        let ignore_holds = self.mutant(Mutant::KEEP_ALIVE_EVICTS_HELD);
        let evicted = self.with_state(|s| {
            let Some(keep_alive) = s.keep_alive else { return Vec::new() };
            let expired: Vec<String> = s
                .slots
                .iter()
                .filter(|(_, v)| v.free() || (ignore_holds && v.locks == 0 && v.admitting == 0))
                .filter(|(_, v)| now.saturating_sub(v.idle_since) >= keep_alive)
                .map(|(k, _)| k.clone())
                .collect();
            expired.iter().filter_map(|k| Self::remove(s, k)).collect()
        });
        self.finish_evictions(evicted, "idle")
    }

    /// The keep-alive in force and the earliest deadline on the runtime's clock at which one of
    /// this cache's idle records expires: `None` without a keep-alive; `Some(None)` when no
    /// record is idle.
    pub(crate) fn next_expiry(&self) -> Option<Option<Duration>> {
        self.with_state(|s| {
            let keep_alive = s.keep_alive?;
            let idle = s.slots.values().filter(|v| v.free()).map(|v| v.idle_since).min();
            Some(idle.map(|since| since.saturating_add(keep_alive)))
        })
    }

    /// Whether `shutdown` ran.
    pub fn is_shut_down(&self) -> bool {
        self.with_state(|s| s.shut_down)
    }

    /// Keys resident now, in order.
    pub fn keys(&self) -> Vec<String> {
        self.with_state(|s| s.slots.keys().cloned().collect())
    }

    /// Hit, miss and eviction counters, bytes resident now and their high-water mark: the
    /// per-cache view beside the group's [`RamBudget`](super::RamBudget).
    pub fn stats(&self) -> CacheStats {
        self.with_state(|s| s.stats)
    }

    /// Bytes of the records resident in this cache that are not shared.
    pub fn non_shared_bytes(&self) -> u64 {
        self.group.budget.non_shared_bytes(self.id)
    }

    /// Records alive in this cache now, for accounting checks: the resident ones, and detached
    /// ones (replaced while stale) that a handle still holds.
    ///
    /// Runs no user code: it never takes a strong reference to a detached record, so a holder
    /// letting go meanwhile still drops the record itself.
    pub fn resident(&self) -> Vec<Resident> {
        if self.mutant(Mutant::INSPECTION_UPGRADES_DETACHED) {
            let (mut out, detached) = self.with_state(|s| {
                s.detached.retain(|(w, _)| w.strong_count() > 0);
                let out: Vec<Resident> = s.slots.values().map(|v| describe(&v.record, false)).collect();
                (out, s.detached.iter().filter_map(|(w, _)| w.upgrade()).collect::<Vec<_>>())
            });
            out.extend(detached.iter().map(|record| describe(record, true)));
            return out;
        }
        self.with_state(|s| {
            s.detached.retain(|(w, _)| w.strong_count() > 0);
            let resident = s.slots.values().map(|v| describe(&v.record, false));
            resident.chain(s.detached.iter().map(|(_, d)| d.clone())).collect()
        })
    }

    /// The records no eviction may take now (locked, held or admitting), with why: what holds
    /// the budget when a reservation finds no room.
    pub(crate) fn pinned(&self) -> Vec<String> {
        self.with_state(|s| self.list_pinned(s))
    }

    /// [`DeviceCache::pinned`] of a peer: never waits for its lock (SPEC 3.2); a busy peer is
    /// named as such instead. Having held the lock, it honours the reconcile requests that
    /// arrived meanwhile, as every release of the state does.
    pub(crate) fn pinned_if_free(&self) -> Vec<String> {
        let listed = self.state.try_with(|s| self.list_pinned(s));
        if listed.is_some() {
            self.drain_requests();
        }
        listed.unwrap_or_else(|| vec![format!("{} (busy)", self.device)])
    }

    fn list_pinned(&self, s: &State<W, R>) -> Vec<String> {
        let pinned = s.slots.iter().filter(|(_, v)| !v.free());
        let why = |v: &RecordSlot<W, R>| match (v.locks, v.holds) {
            (0, 0) => "admitting",
            (0, _) => "held",
            _ => "locked",
        };
        pinned.map(|(k, v)| format!("{k} ({} B, {}, {})", v.record.bytes, why(v), self.device)).collect()
    }

    /// Asks this cache to evict down to the budget: sets the pending flag first, then tries
    /// without waiting. If the cache is busy, the holder of its lock honours the flag.
    pub(crate) fn request_reconcile(&self) {
        self.request_room(0);
    }

    /// Like [`DeviceCache::request_reconcile`], evicting until `bytes` more fit: now if it can
    /// get the cache's lock right away, else at the holder's release (the request keeps the
    /// largest room asked for).
    pub(crate) fn request_room(&self, bytes: u64) {
        let set_after_try = self.mutant(Mutant::FLAG_SET_AFTER_TRY);
        if !set_after_try {
            self.set_pending(bytes);
        }
        match self.reconcile_now(bytes) {
            Some(evicted) => {
                self.finish_evictions(evicted, "room");
                self.drain_requests();
            }
            None if set_after_try => self.set_pending(bytes),
            None => {}
        }
    }

    /// One reconcile if the lock is free right now: clears the request and evicts until `room`
    /// (or the room the request asked for, if more) fits, in one critical section. `None` if the
    /// lock is held.
    fn reconcile_now(&self, room: u64) -> Option<Evicted<W, R>> {
        let (admitting, clear_late) =
            (self.mutant(Mutant::ADMISSION_UNPROTECTED), self.mutant(Mutant::FLAG_CLEARED_LATE));
        let evicted = self.state.try_with(|s| {
            let requested = if clear_late {
                self.reconcile_pending.with(|p| *p)
            } else {
                self.reconcile_pending.with(Option::take)
            };
            // Room a load asked for while this cache was busy is made only while a load still
            // looks for room (it may not wait yet: it may be asking other peers, C-B4): one
            // that got it elsewhere, or gave up, needs no more evictions. Without one the
            // request is a plain reconcile, down to the cap.
            let deferred = requested.unwrap_or(0);
            let looking = if self.mutant(Mutant::DEFERRED_ROOM_NEEDS_WAITER) {
                self.group.budget.room_waiters()
            } else {
                self.group.budget.room_seekers()
            };
            let deferred = if looking { deferred } else { 0 };
            Self::evict_lru_while(s, room.max(deferred), &self.group, admitting)
        })?;
        if clear_late {
            self.reconcile_pending.with(|p| *p = None);
        }
        Some(evicted)
    }

    /// Honours the pending flag after this thread released the state lock: reconciles while the
    /// flag reads set and the lock is free. When the lock is held, its holder checks after its
    /// own release.
    pub(crate) fn drain_requests(&self) {
        // A reconcile runs user code (weights' `Drop`, callbacks): never while unwinding, where a
        // second panic aborts. The flag stays set for the next holder.
        if self.mutant(Mutant::DEFERRED_RECONCILE_SKIPPED) || crate::runtime::panicking() {
            return;
        }
        while self.reconcile_pending.with(|p| p.is_some()) {
            let Some(evicted) = self.reconcile_now(0) else { return };
            self.finish_evictions(evicted, "room");
        }
    }

    /// Records a request for `room` bytes (merged with one already pending: the larger wins).
    fn set_pending(&self, room: u64) {
        self.reconcile_pending.with(|p| *p = Some(p.unwrap_or(0).max(room)));
    }

    /// Runs `f` under the state lock, then honours reconcile requests that arrived meanwhile.
    pub(crate) fn with_state<T>(&self, f: impl FnOnce(&mut State<W, R>) -> T) -> T {
        let out = self.state.with(f);
        self.drain_requests();
        out
    }

    /// Turns one claim on `record` into another, in one critical section, and hands out the new
    /// claim's handle (`build`): the report of the conversion (user code) comes once the
    /// handle exists, then reconcile requests are honoured ([`DeviceCache::hand_out`]).
    pub(crate) fn convert<T>(
        &self,
        record: Arc<Record<W, R>>,
        from: Claim,
        to: Claim,
        build: impl FnOnce(Arc<Record<W, R>>) -> T,
    ) -> T {
        let report = |record: &Record<W, R>| {
            tracing::debug!(device = %self.device, key = %record.key, ?from, ?to, "claim converted");
        };
        if self.mutant(Mutant::REPORT_BEFORE_HANDLE) {
            report(&record);
        }
        let now = self.group.runtime.now();
        self.state.with(|s| {
            s.clock += 1;
            let clock = s.clock;
            if let Some(slot) = Self::occupant(s, &record, self.mutant(Mutant::KEY_MATCH_RELEASE)) {
                decrement(Self::counter(slot, from));
                *Self::counter(slot, to) += 1;
                slot.last_used = clock;
                slot.idle_since = now;
            }
        });
        let reported = Arc::clone(&record);
        let after = || {
            if !self.mutant(Mutant::REPORT_BEFORE_HANDLE) {
                report(&reported);
            }
        };
        self.hand_out_then(|| build(record), after)
    }

    /// Releases one claim on `record`: evicts it if it is stale, still the occupant of its key,
    /// and now free; then, if the budget is over its cap, evicts this cache's free records
    /// (the excess may be this cache's own, C-R22).
    ///
    /// It runs in the `Drop` of handles: what it reports comes last (a subscriber is user code,
    /// and a panic of its must find the claim released and every waiter woken), and not at
    /// all while the thread unwinds.
    pub(crate) fn release(&self, record: &Arc<Record<W, R>>, claim: Claim) {
        if self.mutant(Mutant::REPORT_BEFORE_HANDLE) {
            tracing::debug!(device = %self.device, key = %record.key, ?claim, "claim released");
        }
        let ignore_holds = self.mutant(Mutant::STALE_UNLOCK_IGNORES_HOLDS);
        let now = self.group.runtime.now();
        let (evicted, freed, expires, copy_unlocked) = self.with_state(|s| {
            let keep_alive = s.keep_alive;
            let Some(slot) = Self::occupant(s, record, self.mutant(Mutant::KEY_MATCH_RELEASE)) else {
                return (None, false, None, false);
            };
            decrement(Self::counter(slot, claim));
            slot.idle_since = now;
            let copy_unlocked = slot.locks == 0 && slot.device.resident_bytes() > 0;
            let free = slot.free() || (ignore_holds && slot.locks == 0 && slot.admitting == 0);
            let evicted = (slot.stale && free).then(|| Self::remove(s, &record.key)).flatten();
            let expires = keep_alive.filter(|_| free && evicted.is_none()).map(|k| now.saturating_add(k));
            (evicted, free, expires, copy_unlocked && matches!(claim, Claim::Lock))
        });
        // An unlocked copy can be offloaded: room for a locker waiting for the device.
        if copy_unlocked {
            self.device_budget.copy_unlocked();
        }
        // A record that became evictable may be the room a load is waiting for, and an idle
        // record a deadline earlier than the one the keep-alive timer sleeps to.
        if freed {
            self.group.budget.room_changed(Mutant::LOST_WAKEUP_ROOM_RELEASE);
        }
        if let Some(deadline) = expires {
            self.group.timer.poke(Some(deadline), Mutant::LOST_WAKEUP_KEEP_ALIVE_RELEASE);
        }
        if let Some(gone) = evicted.as_ref().filter(|gone| gone.record.shared().is_some())
            && self.mutant(Mutant::MIS_DEBIT_SHARED)
            && self.is_shut_down()
        {
            self.group.budget.mis_debit(self.id, gone.record.bytes);
        }
        self.finish_evictions(evicted.into_iter().collect(), "dropped");
        let skip = [Mutant::NO_OWN_RECONCILE, Mutant::DEFERRED_RECONCILE_SKIPPED]
            .into_iter()
            .any(|m| self.mutant(m));
        if !skip && self.group.budget.excess() > 0 {
            self.make_room_here(0);
        }
        if !crate::runtime::panicking() && !self.mutant(Mutant::REPORT_BEFORE_HANDLE) {
            tracing::debug!(device = %self.device, key = %record.key, ?claim, "claim released");
        }
    }

    /// Bounds the waits of one [`LoadedModel::lock_on_device`] together (default 60 s): for
    /// another thread's move of the same record (then [`CacheError::DeviceMoveTimeout`]) and
    /// for device room (then [`CacheError::DeviceFull`]). A zero wait is refused;
    /// `Duration::MAX` (or any wait too long to represent as a deadline) means unbounded, as
    /// for every timeout of this crate.
    pub fn set_move_wait(&self, wait: Duration) -> Result<(), InvalidConfig> {
        if wait.is_zero() {
            return Err(InvalidConfig { field: "move_wait", reason: "must be greater than zero" });
        }
        self.with_state(|s| s.move_wait = wait);
        Ok(())
    }

    /// The bound on a wait for another thread's move.
    pub fn move_wait(&self) -> Duration {
        self.with_state(|s| s.move_wait)
    }

    /// Device bytes counted against this cache's device budget now: every device copy alive
    /// (resident, used through a detached record, or offloaded and not yet dropped) plus the
    /// moves in flight.
    pub fn device_bytes(&self) -> u64 {
        self.device_budget.used(true)
    }

    /// The device budget set by [`DeviceCache::set_device_budget`] (`None`: no limit).
    pub fn device_budget_cap(&self) -> Option<u64> {
        self.device_budget.cap()
    }

    /// The time on the group's runtime clock.
    pub(crate) fn now(&self) -> Duration {
        self.group.runtime.now()
    }

    /// The device budget's accounting.
    pub(crate) fn device_budget(&self) -> &Arc<DeviceBudget<R>> {
        &self.device_budget
    }

    pub(crate) fn state(&self) -> &R::Monitor<State<W, R>> {
        &self.state
    }

    fn counter(slot: &mut RecordSlot<W, R>, claim: Claim) -> &mut usize {
        match claim {
            Claim::Admitting => &mut slot.admitting,
            Claim::Hold => &mut slot.holds,
            Claim::Lock => &mut slot.locks,
        }
    }

    /// The slot of `record` if `record` is still the occupant of its key (identity, not key;
    /// `by_key` is the mutant that matches by key).
    fn occupant<'s>(
        s: &'s mut State<W, R>,
        record: &Arc<Record<W, R>>,
        by_key: bool,
    ) -> Option<&'s mut RecordSlot<W, R>> {
        s.slots.get_mut(&record.key).filter(|slot| by_key || Arc::ptr_eq(&slot.record, record))
    }

    /// Whether the historical bug `mutant` is on (never, on the production runtime).
    fn mutant(&self, mutant: Mutant) -> bool {
        self.group.runtime.mutant(mutant)
    }

    /// The runtime this cache runs on.
    pub(crate) fn runtime(&self) -> &R {
        &self.group.runtime
    }

    /// The group this cache belongs to.
    pub(crate) fn group(&self) -> &Arc<CacheGroup<W, R>> {
        &self.group
    }

    /// Mutant C-R6/C-R12: unused handles release nothing.
    pub(crate) fn leaks_unused_handles(&self) -> bool {
        self.mutant(Mutant::UNUSED_HANDLE_LEAKS)
    }

    fn remove(s: &mut State<W, R>, key: &str) -> Option<Gone<W, R>> {
        let slot = s.slots.remove(key)?;
        s.stats.left(slot.record.bytes);
        s.stats.evictions += 1;
        s.stats.bytes_evicted = s.stats.bytes_evicted.saturating_add(slot.record.bytes);
        Some(Gone { record: slot.record, device: slot.device })
    }

    fn evict_or_mark(s: &mut State<W, R>, key: &str, admitting_is_free: bool) -> Option<Gone<W, R>> {
        let slot = s.slots.get_mut(key)?;
        if evictable(slot, admitting_is_free) {
            Self::remove(s, key)
        } else {
            slot.stale = true;
            None
        }
    }

    /// Evicts this cache's free records until `room` more bytes fit the global budget.
    pub(crate) fn make_room_here(&self, room: u64) -> usize {
        let admitting = self.mutant(Mutant::ADMISSION_UNPROTECTED);
        let evicted = self.with_state(|s| Self::evict_lru_while(s, room, &self.group, admitting));
        self.finish_evictions(evicted, "room")
    }

    /// Evicts free records, least recently used first, until `room` more bytes fit the global
    /// budget, counting what the evictions so far will give back once they are dropped.
    fn evict_lru_while(
        s: &mut State<W, R>,
        room: u64,
        group: &CacheGroup<W, R>,
        admitting_is_free: bool,
    ) -> Evicted<W, R> {
        let mut evicted: Evicted<W, R> = Vec::new();
        let mut pending = 0;
        while !group.budget.fits_after(pending, room) {
            // Records that give bytes back first (least recently used among them): evicting one
            // whose canonical a peer shares frees nothing, so it goes only when nothing else can.
            let victim = s
                .slots
                .iter()
                .filter(|(_, v)| evictable(v, admitting_is_free))
                .min_by_key(|(_, v)| (frees(&v.record) == 0, v.last_used))
                .map(|(k, _)| k.clone());
            let Some(victim) = victim else { break };
            if let Some(gone) = Self::remove(s, &victim) {
                pending += frees(&gone.record);
                evicted.push(gone);
            }
        }
        evicted
    }

    /// Reports the evictions (outside every lock), counted as `by` in the metrics (`room`:
    /// made room for a load; `idle`: keep-alive expiry; `dropped`: `drop_model`, a shutdown, a
    /// stale record's last unlock); returns how many.
    ///
    /// Each drop and each callback is user code and may panic: every record is still dropped
    /// and reported, and the first panic then goes on unwinding, unless this thread is already
    /// unwinding (a guard dropped by another panic, C-P5): then the panic is dropped, since
    /// one leaving a `Drop` during an unwind aborts the process.
    fn finish_evictions(&self, evicted: Evicted<W, R>, by: &'static str) -> usize {
        let callback = if evicted.is_empty() { None } else { self.on_evict.with(|c| c.clone()) };
        let count = evicted.len();
        if self.mutant(Mutant::EVICTION_FORGETS_CANONICAL) {
            evicted.iter().for_each(|gone| self.group.store.invalidate(&gone.record.key));
        }
        let mut first_panic = None;
        for gone in evicted {
            let (key, bytes) = (gone.record.key.clone(), gone.record.bytes);
            let dropped = catch_unwind(AssertUnwindSafe(move || drop(gone)));
            // The report and the callback are user code, each caught on its own: a panicking
            // subscriber or recorder does not keep the callback from firing.
            let reported = catch_unwind(AssertUnwindSafe(|| {
                tracing::debug!(device = %self.device, key = %key, bytes, "evicted");
                telemetry::evicted(by, bytes);
            }));
            let called = match &callback {
                Some(callback) => catch_unwind(AssertUnwindSafe(|| callback(&key, bytes))),
                None => Ok(()),
            };
            for payload in [dropped.err(), reported.err(), called.err()].into_iter().flatten() {
                first_panic.get_or_insert(payload);
            }
        }
        if let Some(payload) = first_panic {
            if crate::runtime::panicking() && !self.mutant(Mutant::PANIC_ESCAPES_UNWINDING_DROP) {
                drop(payload);
            } else {
                self.group.runtime.resume_unwind(payload);
            }
        }
        count
    }
}

impl<W: Send + Sync + 'static, R: Runtime> Drop for DeviceCache<W, R> {
    /// A cache dropped without `shutdown` takes its keep-alive with it: the timer may exit.
    fn drop(&mut self) {
        if self.state.with(|s| s.keep_alive.is_some()) {
            self.group.timer.poke(None, Mutant::LOST_WAKEUP_TIMER_CACHE_DROP);
        }
    }
}

impl<W: Send + Sync + 'static, R: Runtime> fmt::Debug for DeviceCache<W, R> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DeviceCache").field("device", &self.device).field("keys", &self.keys()).finish()
    }
}

/// Whether an eviction path may take this record (`admitting_is_free`: the C-R3/C-R23 mutant).
fn evictable<W, R: Runtime>(slot: &RecordSlot<W, R>, admitting_is_free: bool) -> bool {
    slot.free() || (admitting_is_free && slot.locks == 0 && slot.holds == 0)
}

/// Releases one claim. A counter already at zero means a claim was lost (only mutants do that).
fn decrement(counter: &mut usize) {
    *counter = counter.saturating_sub(1);
}

/// Bytes of the device copies of resident records (what the C-P2 mutant counts instead of
/// every live copy).
pub(crate) fn slot_device_bytes<W, R: Runtime>(s: &State<W, R>) -> u64 {
    s.slots.values().fold(0, |sum, v| sum.saturating_add(v.device.resident_bytes()))
}
