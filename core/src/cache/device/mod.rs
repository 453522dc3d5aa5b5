//! [`DeviceCache`]: the records resident for one device, their protection counters, and every
//! eviction path — a shell over its record table (`super::table`): each operation locks the
//! table, calls the one method that decides, then finishes outside the lock (builds the handle,
//! drops and reports what was taken out, honours peers' requests).
//!
//! # Lock order
//! `cache state` → `store` → `budget` (the budget is a leaf). A cache takes a *peer's* state
//! only with `try_with`; when that fails it leaves the peer a room request (a leaf monitor of
//! its own; `super::room_request` gives its protocol). Every release of the state lock honours
//! the requests left meanwhile (`with_state` does this for every operation).
//!
//! # Handles and drops
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
mod handles;
mod keep_alive;
mod membership;
mod requests;

use std::fmt;
use std::time::Duration;

use super::budget::{CacheId, Reservation};
use super::group::CacheGroup;
use super::ledger::DeviceBudget;
use super::record::{Record, Residency};
use super::room_request::RoomRequest;
pub use super::table::{CacheStats, Resident};
use super::table::{Claim, Gone, Inserted, Released, Table, describe};
use crate::deadline::{CallOptions, Deadline};
use crate::error::{CacheError, InvalidConfig};
use crate::first_panic::FirstPanic;
use crate::held::Held;
use crate::id::ModelId;
use crate::mutants::Mutant;
use crate::runtime::Ordering::Relaxed;
use crate::runtime::{Arc, AtomicWord, Monitor, Runtime, Signal, StdRuntime};
use crate::telemetry;
use crate::telemetry::EvictedBy;
pub use handles::{Admission, LoadedModel, ModelGuard};

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

/// A function called after every eviction with the key and the record's bytes.
pub type EvictionCallback = Box<dyn Fn(&str, u64) + Send + Sync>;

/// Where an admission's weights come from.
enum Source<W, R: Runtime> {
    /// A canonical alive in some peer.
    Adopted(Arc<super::weights::Canonical<W, R>>),
    /// The caller's weights, built after the key's drop epoch read `since` (if known).
    /// Held until they are registered or charged: the reports on the way are user code.
    Fresh { weights: Held<W, R>, since: Option<u64> },
}

/// What a load prepared before it built the weights it admits.
pub(crate) struct Prepared<R: Runtime> {
    /// The room it reserved (`None`: reserve at admission, or the overflow policy).
    pub(crate) reservation: Option<Reservation<R>>,
    /// The deadline of its waits.
    pub(crate) deadline: Deadline,
    /// A [drop mark](super::WeightStore::drop_mark) taken before the weights were built: if a
    /// drop covering the key came after it by admission, they may be dropped weights, admitted
    /// stale and never registered as the key's canonical (C-D6). `None`: not known (a plain
    /// `put`).
    pub(crate) since: Option<u64>,
}

// ---- Records taken out by a drop or a shutdown ---------------------------------------------------

/// Records [`DeviceCache::mark_dropped`] took out, still to be finished outside every lock.
pub(crate) struct Dropped<'a, W: Send + Sync + 'static, R: Runtime> {
    cache: &'a DeviceCache<W, R>,
    evicted: Evicted<W, R>,
    /// A shutdown's report: the records it left stale (in use).
    shutdown: Option<usize>,
}

impl<'a, W: Send + Sync + 'static, R: Runtime> Dropped<'a, W, R> {
    pub(crate) fn new(cache: &'a DeviceCache<W, R>, evicted: Evicted<W, R>) -> Self {
        Self { cache, evicted, shutdown: None }
    }

    /// How many records were taken out.
    pub(crate) fn len(&self) -> usize {
        self.evicted.len()
    }

    /// Reports the shutdown that took them out, leaving `stale` records stale, once finished.
    pub(crate) fn report_shutdown(&mut self, stale: usize) {
        self.shutdown = Some(stale);
    }

    /// Drops and reports the records, honours pending reconcile requests (even if that user
    /// code panicked), then reports a shutdown (last: a panicking subscriber finds everything
    /// else done); returns how many records went.
    pub(crate) fn finish(self) -> usize {
        let Self { cache, evicted, shutdown } = self;
        // A request left while the records were marked is honoured even if their user code
        // panics (the panic goes on after): no later holder of the lock may come.
        let count = if cache.mutant(Mutant::FINISH_SKIPS_DRAIN_ON_PANIC) {
            let count = cache.finish_evictions(evicted, EvictedBy::Dropped);
            cache.drain_requests();
            count
        } else {
            cache.finish_then_drain(|| cache.finish_evictions(evicted, EvictedBy::Dropped))
        };
        if let Some(stale) = shutdown {
            tracing::debug!(device = %cache.device, evicted = count, stale, "shutdown");
        }
        count
    }
}

/// The default bound on a wait for another thread's move of the same record.
const DEFAULT_MOVE_WAIT: Duration = Duration::from_secs(60);

/// The evictions of one critical section.
type Evicted<W, R> = Vec<Gone<Record<W, R>>>;

// ---- The cache ----------------------------------------------------------------------------------

/// The models resident for one device. Created by [`CacheGroup::cache`].
pub struct DeviceCache<W: Send + Sync + 'static, R: Runtime = StdRuntime> {
    device: String,
    id: CacheId,
    group: Arc<CacheGroup<W, R>>,
    state: R::Monitor<Table<Record<W, R>>>,
    device_budget: Arc<DeviceBudget<R>>,
    /// The room a peer asked for while this cache was busy (`Some(0)`: back to the cap).
    reconcile_pending: RoomRequest<R>,
    on_evict: R::Monitor<Option<Arc<EvictionCallback>>>,
    /// 1 while a keep-alive is set: only then do releases read the clock (a release that misses
    /// a keep-alive set concurrently leaves its record untimed, and the timer's next pass times
    /// it).
    timed: R::Atomic,
    /// Bumped when a move to the device settles: a placement waits for another's move of its
    /// record here, outside the state lock (whose every release honours pending requests).
    moves: Signal<R>,
}

impl<W: Send + Sync + 'static, R: Runtime> DeviceCache<W, R> {
    pub(crate) fn new(group: Arc<CacheGroup<W, R>>, device: &str) -> Arc<Self> {
        let rt = &group.runtime;
        let state = rt.monitor(Table::new(DEFAULT_MOVE_WAIT));
        let (reconcile_pending, on_evict) = (RoomRequest::new(rt), rt.monitor(None));
        let id = group.budget.register_cache();
        let device_budget = DeviceBudget::new(rt);
        let device = device.to_owned();
        let (timed, moves) = (rt.atomic(0), Signal::new(rt));
        Arc::new(Self { device, id, group, state, device_budget, reconcile_pending, on_evict, timed, moves })
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
        self.with_state(|s| s.is_shut_down())
    }

    /// Keys resident now, in order.
    pub fn keys(&self) -> Vec<String> {
        self.with_state(|s| s.keys())
    }

    /// Hit, miss and eviction counters, bytes resident now and their high-water mark: the
    /// per-cache view beside the group's [`RamBudget`](super::RamBudget).
    pub fn stats(&self) -> CacheStats {
        self.with_state(|s| s.stats())
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
        self.with_state(Table::resident)
    }

    /// The records no eviction may take now (locked, held or admitting), with why: what holds
    /// the budget when a reservation finds no room.
    pub(crate) fn pinned(&self) -> Vec<String> {
        self.with_state(|s| s.pinned(&self.device))
    }

    /// [`DeviceCache::pinned`] of a peer: never waits for its lock (SPEC 3.2); a busy peer is
    /// named as such instead. Having held the lock, it honours the reconcile requests that
    /// arrived meanwhile, as every release of the state does.
    pub(crate) fn pinned_if_free(&self) -> Vec<String> {
        let listed = self.state.try_with(|s| s.pinned(&self.device));
        if listed.is_some() {
            self.drain_requests();
        }
        listed.unwrap_or_else(|| vec![format!("{} (busy)", self.device)])
    }

    /// Runs `f` under the state lock, then honours reconcile requests that arrived meanwhile.
    pub(crate) fn with_state<T>(&self, f: impl FnOnce(&mut Table<Record<W, R>>) -> T) -> T {
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
        self.with_state(|s| s.set_move_wait(wait));
        Ok(())
    }

    /// The bound on a wait for another thread's move.
    pub fn move_wait(&self) -> Duration {
        self.with_state(|s| s.move_wait())
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

    /// The time a claim is released at, for keep-alive expiry (a claim taken or converted
    /// stamps none: the record is not idle): read only while a keep-alive is set.
    pub(crate) fn claim_time(&self) -> Option<Duration> {
        (self.timed.load(Relaxed) != 0).then(|| self.group.runtime.now())
    }

    /// The device budget's accounting.
    pub(crate) fn device_budget(&self) -> &Arc<DeviceBudget<R>> {
        &self.device_budget
    }

    /// Bumped when a move to the device settles (a placement waits for another's move there).
    pub(crate) fn moves(&self) -> &Signal<R> {
        &self.moves
    }

    /// The record table, under the cache's state lock: a caller that releases it honours
    /// pending requests after ([`DeviceCache::drain_requests`]).
    pub(crate) fn state(&self) -> &R::Monitor<Table<Record<W, R>>> {
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

// ---- Dropping the cache -------------------------------------------------------------------------

impl<W: Send + Sync + 'static, R: Runtime> Drop for DeviceCache<W, R> {
    /// A cache dropped without `shutdown` takes its keep-alive with it: the timer may exit.
    ///
    /// Its records (their weights' and device copies' `Drop`) and its eviction callback are user
    /// code: each is dropped under a catch of its own, so that a panic of one never drops the
    /// rest in its unwind, where a second panic would abort the process (C-P8), also when the
    /// cache's last reference goes in an unwind (a handle let go by a panic).
    fn drop(&mut self) {
        let (timed, table) = self
            .state
            .with(|s| (s.keep_alive().is_some(), std::mem::replace(s, Table::new(DEFAULT_MOVE_WAIT))));
        if timed {
            self.group.timer.poke(None, Mutant::LOST_WAKEUP_TIMER_CACHE_DROP);
        }
        let callback = self.on_evict.with(Option::take);
        if self.mutant(Mutant::CACHE_DROPPED_IN_UNWIND) {
            return drop((table, callback));
        }
        // Each record and the callback under a catch of its own: a panic of one leaves the
        // others dropped after it, never in its unwind, where a second panic would abort. The
        // first goes on once all are dropped, unless this drop runs in an unwind already.
        let mut first = FirstPanic::<R>::new();
        for record in table.into_records() {
            first.run(move || drop(record));
        }
        first.run(move || drop(callback));
        if R::panicking() {
            drop(first.into_payload());
        } else {
            first.resume_on(&self.group.runtime);
        }
    }
}

impl<W: Send + Sync + 'static, R: Runtime> fmt::Debug for DeviceCache<W, R> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DeviceCache").field("device", &self.device).field("keys", &self.keys()).finish()
    }
}

// Historical bugs: the bodies of the switches above (see `crate::mutants`).
impl<W: Send + Sync + 'static, R: Runtime> DeviceCache<W, R> {
    /// `inspection-upgrades-detached`: the inspection takes strong references to detached
    /// records, so a holder letting go meanwhile leaves their drop (user code) to it.
    fn resident_upgrading_detached(&self) -> Vec<Resident> {
        let (mut out, detached) = self.with_state(Table::resident_upgrading_detached);
        out.extend(detached.iter().map(|record| describe(&**record, true)));
        out
    }
}
