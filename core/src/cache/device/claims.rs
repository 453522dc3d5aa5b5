//! Claims: a record's protection counters (admission, hold, lock, move) — counted in one
//! critical section, with the handle that releases each built right after ([`DeviceCache::hand_out`])
//! — `get`, conversions between claims, and their release.

use super::handles::{Build, Parts};
use super::*;
use crate::telemetry::EvictedBy;

impl<W: Send + Sync + 'static, R: Runtime> DeviceCache<W, R> {
    /// Builds the handle of a claim just counted, then honours pending reconcile requests (which
    /// may run user code: eviction callbacks, weights' `Drop`) — in that order, so that a panic
    /// there drops the handle and so releases the claim. The C-D4 mutant runs them first.
    pub(crate) fn hand_out<T>(&self, handle: impl FnOnce() -> T) -> T {
        self.hand_out_then(handle, || {})
    }

    /// [`DeviceCache::hand_out`], running `after` (user code too: dropping spare weights) once the
    /// handle exists.
    pub(super) fn hand_out_then<T>(&self, handle: impl FnOnce() -> T, after: impl FnOnce()) -> T {
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
    ///
    /// It expires nothing itself (the keep-alive timer does, on time): a record past its
    /// keep-alive that the timer has not reached yet is still a hit.
    pub fn get(self: &Arc<Self>, key: &str) -> Option<LoadedModel<W, R>> {
        self.look_up(key, true)
    }

    /// [`DeviceCache::get`], counted as a hit or a miss only if `counted` (a `get_or_put` counts
    /// its first lookup, not the ones after a claim or a wait).
    pub(crate) fn look_up(self: &Arc<Self>, key: &str, counted: bool) -> Option<LoadedModel<W, R>> {
        if self.mutant(Mutant::HOLD_AFTER_LOOKUP) {
            return self.get_holding_after_lookup(key);
        }
        let serve_stale = self.mutant(Mutant::GET_SERVES_STALE);
        let record = self
            .state
            .with(|s| if counted { s.get(key, serve_stale) } else { s.get_again(key, serve_stale) });
        let hit = record.is_some();
        let report = || tracing::debug!(device = %self.device, key, hit, "get");
        let handle = || record.map(|record| LoadedModel::new(Arc::clone(self), record));
        if self.mutant(Mutant::REPORT_BEFORE_HANDLE) {
            report();
            return self.hand_out(handle);
        }
        self.hand_out_then(handle, report)
    }

    /// [`DeviceCache::get`] and [`LoadedModel::lock`] in one critical section: the model
    /// resident under `key`, locked (never evicted while the guard lives), or `None` on a miss.
    /// Counted as a hit or a miss like `get`.
    pub fn get_locked(self: &Arc<Self>, key: &str) -> Option<ModelGuard<W, R>> {
        if self.mutant(Mutant::HOLD_AFTER_LOOKUP) {
            return self.get_holding_after_lookup(key).map(LoadedModel::lock);
        }
        let serve_stale = self.mutant(Mutant::GET_SERVES_STALE);
        let record = self.state.with(|s| s.get_locked(key, serve_stale));
        let hit = record.is_some();
        let report = || tracing::debug!(device = %self.device, key, hit, "get_locked");
        let handle = || record.map(|record| ModelGuard::new(Arc::clone(self), record));
        self.hand_out_then(handle, report)
    }

    /// Turns one claim on `record` into another, in one critical section, and hands out the new
    /// claim's handle (`build`, which takes the cache's reference and the record's over: none
    /// is cloned) as [`DeviceCache::hand_out_then`] does: the report of the conversion (user
    /// code) comes once the handle exists, then reconcile requests are honoured. The report
    /// names the key through the handle (`parts`), so no second reference to the record lives
    /// beside the handle's: a panicking subscriber drops the handle, whose release may take the
    /// record out, and nothing else is left to drop its weights.
    pub(crate) fn convert<T>(
        cache: Arc<Self>,
        record: Arc<Record<W, R>>,
        (from, to): (Claim, Claim),
        (build, parts): (Build<W, R, T>, Parts<W, R, T>),
    ) -> T {
        let report = |cache: &Self, key: &str| {
            tracing::debug!(device = %cache.device, key = %key, ?from, ?to, "claim converted");
        };
        let report_first = cache.mutant(Mutant::REPORT_BEFORE_HANDLE);
        if report_first {
            report(&cache, &record.key);
        }
        let by_key = cache.mutant(Mutant::KEY_MATCH_RELEASE);
        let locking = to == Claim::Lock;
        if locking && cache.mutant(Mutant::CONVERSION_IN_TWO_STEPS) {
            cache.state.with(|s| s.uncount(&record, from));
            cache.state.with(|s| s.count_again(&record, to));
        } else {
            let unstamped = locking && cache.mutant(Mutant::LOCK_USE_UNSTAMPED);
            cache.state.with(|s| s.convert(&record, (from, to), (by_key, unstamped)));
        }
        if cache.mutant(Mutant::CLAIM_BEFORE_HANDLE) {
            let report = (!report_first).then_some(report);
            return Self::convert_handing_out_late(cache, record, report, build);
        }
        let handle = build(cache, record);
        let (cache, key) = parts(&handle);
        if !report_first {
            report(cache, key);
        }
        cache.drain_requests();
        handle
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
        let now = self.claim_time();
        let unreported = self.mutant(Mutant::REPLACED_STALE_UNREPORTED);
        let flags = (self.mutant(Mutant::KEY_MATCH_RELEASE), ignore_holds, unreported);
        // The reconcile requests that arrived meanwhile are honoured once the wake-ups are sent
        // and the release's own eviction is finished (both must survive a panicking reconcile).
        let Released { evicted, freed, expires, copy_unlocked } =
            self.state.with(|s| s.release(record, claim, now, flags));
        // An unlocked copy can be offloaded: room for a locker waiting for the device.
        if copy_unlocked {
            self.device_budget.copy_unlocked();
        }
        // A record that became evictable may be the room a load is waiting for, and an idle
        // record a deadline earlier than the one the keep-alive timer sleeps to.
        if freed {
            self.group.budget.room_freed(Mutant::LOST_WAKEUP_ROOM_RELEASE);
        }
        if let Some(deadline) = expires {
            self.group.timer.poke(Some(deadline), Mutant::LOST_WAKEUP_KEEP_ALIVE_RELEASE);
        }
        if let Some(gone) = evicted.as_ref().filter(|gone| gone.record().shared().is_some())
            && self.mutant(Mutant::MIS_DEBIT_SHARED)
            && self.is_shut_down()
        {
            self.group.budget.mis_debit(self.id, gone.record().bytes);
        }
        // Most releases evict nothing: no list to build and finish then.
        self.finish_then_drain(|| {
            evicted.map_or(0, |gone| self.finish_evictions(vec![gone], EvictedBy::Dropped))
        });
        let skip = [Mutant::NO_OWN_RECONCILE, Mutant::DEFERRED_RECONCILE_SKIPPED]
            .into_iter()
            .any(|m| self.mutant(m));
        if !skip && self.group.budget.maybe_over() && self.group.budget.excess() > 0 {
            self.make_room_here(0);
        }
        if !R::panicking() && !self.mutant(Mutant::REPORT_BEFORE_HANDLE) {
            tracing::debug!(device = %self.device, key = %record.key, ?claim, "claim released");
        }
    }
}

// Historical bugs: the bodies of the switches above (see `crate::mutants`).
impl<W: Send + Sync + 'static, R: Runtime> DeviceCache<W, R> {
    /// C-R5/C-R14 (`hold-after-lookup`): `get` arms the first-use hold in a second critical
    /// section after the lookup, and an eviction in between takes the record it hands out.
    fn get_holding_after_lookup(self: &Arc<Self>, key: &str) -> Option<LoadedModel<W, R>> {
        let record = self.with_state(|s| s.peek(key))?;
        self.with_state(|s| s.hold(&record));
        Some(LoadedModel::new(Arc::clone(self), record))
    }

    /// C-D4 (`claim-before-handle`) in a conversion, as [`DeviceCache::hand_out_then`] has it:
    /// the report and the reconcile requests (user code) run before the handle that releases
    /// the claim just counted exists.
    fn convert_handing_out_late<T>(
        cache: Arc<Self>,
        record: Arc<Record<W, R>>,
        report: Option<impl FnOnce(&Self, &str)>,
        build: Build<W, R, T>,
    ) -> T {
        if let Some(report) = report {
            report(&cache, &record.key);
        }
        cache.drain_requests();
        build(cache, record)
    }
}
