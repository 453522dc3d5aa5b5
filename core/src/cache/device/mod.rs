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

mod admission;
mod claims;
mod eviction;
mod keep_alive;
mod requests;

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
            return self.resident_upgrading_detached();
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

    /// Runs `f` under the state lock, then honours reconcile requests that arrived meanwhile.
    pub(crate) fn with_state<T>(&self, f: impl FnOnce(&mut State<W, R>) -> T) -> T {
        let out = self.state.with(f);
        self.drain_requests();
        out
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

// Historical bugs: the bodies of the switches above (see `crate::mutants`).
impl<W: Send + Sync + 'static, R: Runtime> DeviceCache<W, R> {
    /// `inspection-upgrades-detached`: the inspection takes strong references to detached
    /// records, so a holder letting go meanwhile leaves their drop (user code) to it.
    fn resident_upgrading_detached(&self) -> Vec<Resident> {
        let (mut out, detached) = self.with_state(|s| {
            s.detached.retain(|(w, _)| w.strong_count() > 0);
            let out: Vec<Resident> = s.slots.values().map(|v| describe(&v.record, false)).collect();
            (out, s.detached.iter().filter_map(|(w, _)| w.upgrade()).collect::<Vec<_>>())
        });
        out.extend(detached.iter().map(|record| describe(record, true)));
        out
    }
}
