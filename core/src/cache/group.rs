//! [`CacheGroup`]: the device caches that share one [`WeightStore`] and one [`RamBudget`].

use std::fmt;

use super::budget::{CacheId, RamBudget};
use super::expiry::ExpiryTimer;
use super::member::{Marked, Member, Members};
use super::single_flight::Loads;
use super::weights::WeightStore;
use crate::deadline::CallOptions;
use crate::error::{CacheError, InvalidConfig};
use crate::first_panic::FirstPanic;
use crate::mutants::Mutant;
use crate::runtime::{Arc, Runtime, StdRuntime, Weak};
use crate::telemetry;

/// Peers: one cache per device over one store and one budget.
pub struct CacheGroup<W: Send + Sync + 'static, R: Runtime = StdRuntime> {
    pub(crate) runtime: R,
    pub(crate) budget: Arc<RamBudget<R>>,
    pub(crate) store: Arc<WeightStore<W, R>>,
    /// Its caches (which this type never names: the device caches join it).
    members: Arc<Members<R>>,
    /// Keys being loaded by `get_or_put` on any device of the group.
    pub(crate) loads: Loads<R>,
    /// The keep-alive timer (its thread runs while a cache of the group has a keep-alive).
    pub(crate) timer: Arc<ExpiryTimer<R>>,
}

impl<W: Send + Sync + 'static> CacheGroup<W> {
    /// A group with a global RAM cap of `cap` bytes, on the production runtime.
    pub fn new(cap: u64) -> Result<Arc<Self>, InvalidConfig> {
        Self::with_runtime(cap, StdRuntime::new())
    }
}

// ---- The group ----------------------------------------------------------------------------------

impl<W: Send + Sync + 'static, R: Runtime> CacheGroup<W, R> {
    /// A group on an explicit runtime (the model checker's, in `resident-sim`).
    pub fn with_runtime(cap: u64, runtime: R) -> Result<Arc<Self>, InvalidConfig> {
        let budget = RamBudget::new(cap, &runtime)?;
        let store = WeightStore::new(Arc::clone(&budget), &runtime);
        let members = Members::new(&runtime);
        let loads = Loads::new(&runtime);
        let timer = ExpiryTimer::new(&runtime);
        Ok(Arc::new(Self { runtime, budget, store, members, loads, timer }))
    }

    /// Sets how long [`DeviceCache::get_or_put`](super::DeviceCache::get_or_put) waits for another device's load of the same
    /// key (default 60 s). A zero wait is refused.
    pub fn set_load_wait(&self, wait: std::time::Duration) -> Result<(), InvalidConfig> {
        if wait.is_zero() {
            return Err(InvalidConfig { field: "load_wait", reason: "must be greater than zero" });
        }
        self.loads.set_wait(wait);
        Ok(())
    }

    /// How long [`DeviceCache::get_or_put`](super::DeviceCache::get_or_put) waits for another device's load of the same key.
    pub fn load_wait(&self) -> std::time::Duration {
        self.loads.wait()
    }

    /// Changes the RAM cap while serving (SPEC 1.12). Raising it wakes the loads waiting for
    /// room. Lowering it holds for every later reservation at once, then evicts idle records
    /// down to it, least recently used first in every cache, waiting for records in use to be
    /// released at most the budget's room wait (and `options`); what is still over then is
    /// [`CacheError::OverCap`] (the new cap stays). `Ok` means the budget fit the new cap at
    /// some point of the call: one that does not lower it but finds the budget over it (another
    /// call's lowering still at work) evicts and waits too. Zero is
    /// [`CacheError::InvalidConfig`], and nothing changes.
    ///
    /// ```
    /// use resident::CallOptions;
    /// use resident::cache::CacheGroup;
    /// let group = CacheGroup::<Vec<u8>>::new(1_000)?;
    /// let cpu = group.cache("cpu");
    /// drop(cpu.get_or_put("a", 600, || Ok::<_, resident::CacheError>(vec![0; 600]))?);
    /// group.set_cap(500, CallOptions::new())?; // evicts the idle `a`
    /// assert_eq!(group.budget().in_use(), 0);
    /// assert!(group.set_cap(0, CallOptions::new()).is_err());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn set_cap(&self, cap: u64, options: CallOptions) -> Result<(), CacheError> {
        let budget = &self.budget;
        let lowered = budget.set_cap(cap)?;
        if self.runtime.mutant(Mutant::CAP_LOWERED_WITHOUT_EVICTING) {
            return Ok(());
        }
        // Reported once the budget fits (or the wait ran out): a panicking subscriber (user
        // code) must find the evictions done.
        let report_first = self.runtime.mutant(Mutant::RESIZE_REPORTED_FIRST);
        if report_first {
            tracing::info!(cap, lowered, "RAM cap changed");
        }
        let evicted = self.evict_to_cap(options);
        if !report_first {
            tracing::info!(cap, lowered, fits = evicted.is_ok(), "RAM cap changed");
        }
        evicted
    }

    /// Evicts idle records of every cache until the budget fits its cap, waiting (bounded by
    /// `options` and the room wait) for records in use to be let go.
    fn evict_to_cap(&self, options: CallOptions) -> Result<(), CacheError> {
        let budget = &self.budget;
        let rt = &self.runtime;
        let wait = options.deadline(rt).bound(rt, budget.room_wait(), Mutant::DEADLINE_SKIPS_ROOM);
        let deadline = rt.now().checked_add(wait);
        // Even when not lowered: a concurrent lowering may still be evicting, and `Ok` means the
        // budget fit the cap at some point of this call. Watched throughout: a release that
        // leaves a record evictable wakes only watched waits.
        let _watch = budget.watch_room();
        loop {
            let seen = budget.room_epoch();
            if budget.excess() == 0 {
                return Ok(());
            }
            self.make_room_everywhere();
            if budget.excess() == 0 {
                return Ok(());
            }
            if deadline.is_some_and(|d| rt.now() >= d) {
                let (in_use, reserved) = (budget.in_use(), budget.reserved());
                let over = CacheError::OverCap { cap: budget.cap(), in_use, reserved, waited: wait };
                return Err(telemetry::cache_refused(over));
            }
            let left = deadline.map_or(std::time::Duration::MAX, |d| d.saturating_sub(rt.now()));
            let _ = budget.wait_for_room(seen, left);
        }
    }

    /// One pass of evictions down to the cap over every cache. Each makes its room even if
    /// another's evictions panic (user code: callbacks, weights' `Drop`); the first panic goes
    /// on after the pass.
    fn make_room_everywhere(&self) {
        if self.runtime.mutant(Mutant::CAP_PASS_STOPS_AT_PANIC) {
            return self.make_room_everywhere_until_a_panic();
        }
        let mut first = FirstPanic::<R>::new();
        for cache in self.members.all() {
            // The last reference may be this one (its user dropped the cache meanwhile): its
            // drop is user code too, under the same catch.
            first.run(move || {
                cache.make_room_here(0);
                drop(cache);
            });
        }
        first.resume();
    }

    /// The shared RAM budget.
    pub fn budget(&self) -> &Arc<RamBudget<R>> {
        &self.budget
    }

    /// The shared weight store.
    pub fn store(&self) -> &Arc<WeightStore<W, R>> {
        &self.store
    }

    /// Adds a new cache to the group: a peer of every other one from now on. Returns whether
    /// the group is shut down already (then the new cache must shut down too).
    pub(crate) fn join(&self, member: Weak<dyn Member>) -> bool {
        self.members.join(member);
        self.loads.is_shut_down()
    }

    /// Shuts the whole group down (idempotent): a [`DeviceCache::get_or_put`](super::DeviceCache::get_or_put) that starts
    /// afterwards is refused ([`CacheError::ShutDown`](crate::CacheError::ShutDown)), and so is
    /// one waiting for another device's load or for RAM room (it is woken); then every cache is
    /// [shut down](super::DeviceCache::shutdown): idle records are evicted now, the ones in use are
    /// marked stale and go on their last release. Every cache is marked before any user code
    /// (weights' `Drop`, eviction callbacks) runs, so a panic there leaves no cache open. A call
    /// already past its checks finishes; its record is stale (at birth, or marked by its cache's
    /// shutdown), so once every handle is gone nothing stays resident or counted. Returns how
    /// many records were evicted now.
    pub fn shutdown(&self) -> usize {
        self.loads.shut_down();
        // The loads waiting for room hear it at once: the first is refused and, leaving the
        // line, wakes the next.
        self.budget.room_changed(Mutant::LOST_WAKEUP_ROOM_SHUTDOWN);
        let caches = self.members.all();
        let marked: Vec<_> = caches.iter().map(|cache| cache.mark_shut_down()).collect();
        finish_all::<R>(marked)
    }

    /// Whether [`CacheGroup::shutdown`] ran.
    pub fn is_shut_down(&self) -> bool {
        self.loads.is_shut_down()
    }

    /// Drops `key` and every submodel key `key:*`: invalidates them in the store first (a
    /// rebuild never adopts the old weights), then, in every cache of the group, evicts the idle
    /// records now and marks the locked, held or admitting ones stale (their last release evicts
    /// them; `get` misses them). The old bytes stay counted until their last holder lets go.
    /// An admission that overlaps it either ends stale or did not adopt the old canonical.
    /// Returns how many records were evicted now.
    ///
    /// A manager whose loader holds a record of `key` (through [`DeviceCache::get_or_put`](super::DeviceCache::get_or_put), as
    /// `burn::SharedLoader` does) still has the model registered: it keeps serving the old
    /// weights, resident and locked, until the model is removed from that manager (or evicted
    /// by it). The next load of `key`, on any device, reads fresh weights.
    pub fn drop_model(&self, key: &str) -> usize {
        self.invalidate(key);
        let caches = self.members.all();
        // Every cache is marked before any user code (weights' `Drop`, callbacks) runs, so a
        // panic there cannot leave a peer serving the dropped weights.
        let dropped: Vec<_> = caches.iter().map(|cache| cache.mark_dropped(key)).collect();
        finish_all::<R>(dropped)
    }

    /// The store side of `drop_model` (the C-D2 mutant forgets `key` alone).
    pub(crate) fn invalidate(&self, key: &str) {
        if self.runtime.mutant(Mutant::DROP_KEY_ONLY) {
            self.store.invalidate(key);
        } else {
            self.store.invalidate_model(key);
        }
    }

    /// Whether the group's keep-alive timer thread runs: from the first
    /// [`DeviceCache::set_keep_alive`](super::DeviceCache::set_keep_alive) until no cache of the group has a keep-alive (a cache's
    /// shutdown cancels its own, a dropped cache takes its own along).
    pub fn keep_alive_timer_running(&self) -> bool {
        self.timer.running()
    }

    /// The live caches other than `except`.
    pub(crate) fn peers(&self, except: CacheId) -> Vec<Arc<dyn Member>> {
        self.members.peers(except)
    }

    /// Starts the keep-alive timer (or makes the running one look again): a keep-alive was set.
    pub(crate) fn start_timer(&self) {
        self.timer.start(&self.members);
    }
}

/// Finishes every cache's evictions, even when user code panics in one of them (the first panic
/// is re-raised once all are done, so no eviction is dropped while unwinding). Returns how many.
fn finish_all<R: Runtime>(marked: Vec<Marked<'_>>) -> usize {
    let mut first = FirstPanic::<R>::new();
    let evicted = marked.into_iter().filter_map(|finish| first.run(finish)).sum();
    first.resume();
    evicted
}

impl<W: Send + Sync + 'static, R: Runtime> fmt::Debug for CacheGroup<W, R> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CacheGroup").field("budget", &self.budget).finish_non_exhaustive()
    }
}

// Historical bugs: the bodies of the switches above (see `crate::mutants`).
impl<W: Send + Sync + 'static, R: Runtime> CacheGroup<W, R> {
    /// C-P6w (`cap-pass-stops-at-panic`): a lowered cap's pass over the caches ends at the
    /// first whose evictions panic.
    fn make_room_everywhere_until_a_panic(&self) {
        for cache in self.members.all() {
            cache.make_room_here(0);
        }
    }
}
