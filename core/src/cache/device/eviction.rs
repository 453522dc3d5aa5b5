//! Eviction: taking records out of the cache — least recently used first for room, by key for
//! `drop_model`, all of them at shutdown — and finishing evictions outside the lock (their
//! callbacks and destructors are user code).

use super::*;
use crate::first_panic::FirstPanic;
use crate::telemetry::EvictedBy;

impl<W: Send + Sync + 'static, R: Runtime> DeviceCache<W, R> {
    /// Evicts unprotected records of this cache, least recently used first, until `bytes`
    /// more fit the global budget (re-reading the global total after each eviction); then asks
    /// each peer to do the same without waiting for it. Returns how many records this cache
    /// evicted.
    ///
    /// A peer whose lock is busy at that moment is left the request, and honours it at its
    /// holder's release only while some load looks for room (a load waiting in the RAM line);
    /// otherwise it reconciles down to the cap then, and evicts no further for this call.
    pub fn make_room(&self, bytes: u64) -> usize {
        self.expire_idle();
        let evicted = self.make_room_here(bytes);
        if !self.group.budget.fits(bytes) {
            for peer in self.group.peers(self.id) {
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
        let evicted = self.state.with(|s| s.mark_dropped(key, (admitting, locked_is_free)));
        Dropped::new(self, evicted)
    }

    /// Idempotent: evicts idle records now; marks locked, held or admitting ones stale, so that
    /// their last release evicts them. After shutdown an admission is stale at birth and a
    /// prefetch is refused.
    pub fn shutdown(&self) -> usize {
        self.mark_shut_down().finish()
    }

    /// The state half of [`DeviceCache::shutdown`]: marks the cache shut down and takes out its
    /// idle records, running no user code (its report and the peers' room requests wait for
    /// [`Dropped::finish`], so that a group marks every cache before either runs); the caller
    /// finishes the returned evictions.
    pub(crate) fn mark_shut_down(&self) -> Dropped<'_, W, R> {
        let admitting = self.mutant(Mutant::ADMISSION_UNPROTECTED);
        let while_marking = self.mutant(Mutant::SHUTDOWN_REPORTS_WHILE_MARKING);
        let mark = |s: &mut Table<Record<W, R>>| {
            self.timed.store(0, Relaxed);
            s.mark_shut_down(admitting)
        };
        let (evicted, retained, cancelled) =
            if while_marking { self.with_state(mark) } else { self.state.with(mark) };
        // The timer may sleep to one of this cache's deadlines, or be kept by it alone.
        if cancelled {
            self.group.timer.poke(None, Mutant::TIMER_NOT_CANCELLED);
        }
        if self.mutant(Mutant::SHUTDOWN_RELEASES_WEIGHTS) {
            retained.iter().for_each(|key| self.group.store.invalidate(key));
        }
        let stale = retained.len();
        let mut dropped = Dropped::new(self, evicted);
        if while_marking {
            tracing::debug!(device = %self.device, evicted = dropped.len(), stale, "shutdown");
        } else {
            dropped.report_shutdown(stale);
        }
        dropped
    }

    /// Evicts this cache's free records until `room` more bytes fit the global budget.
    pub(crate) fn make_room_here(&self, room: u64) -> usize {
        let admitting = self.mutant(Mutant::ADMISSION_UNPROTECTED);
        let evicted =
            self.state.with(|s| s.evict_lru_while(|pending| self.fits_after(pending, room), admitting));
        self.finish_then_drain(|| self.finish_evictions(evicted, EvictedBy::Room))
    }

    /// Whether `room` more bytes fit the global budget once `pending` bytes (of evictions not
    /// yet dropped) are given back.
    pub(super) fn fits_after(&self, pending: u64, room: u64) -> bool {
        self.group.budget.fits_after(pending, room)
    }

    /// Reports the evictions (outside every lock), counted as `by` in the metrics (`room`:
    /// made room for a load; `idle`: keep-alive expiry; `dropped`: `drop_model`, a shutdown, a
    /// stale record's last unlock); returns how many.
    ///
    /// Each drop and each callback is user code and may panic: every record is still dropped
    /// and reported, and the first panic then goes on unwinding, unless this thread is already
    /// unwinding (a guard dropped by another panic, C-P5): then the panic is dropped, since
    /// one leaving a `Drop` during an unwind aborts the process.
    pub(super) fn finish_evictions(&self, evicted: Evicted<W, R>, by: EvictedBy) -> usize {
        let callback = if evicted.is_empty() { None } else { self.on_evict.with(|c| c.clone()) };
        let count = evicted.len();
        if self.mutant(Mutant::EVICTION_FORGETS_CANONICAL) {
            evicted.iter().for_each(|gone| self.group.store.invalidate(&gone.record().key));
        }
        let mut first = FirstPanic::<R>::new();
        for gone in evicted {
            let (key, bytes) = (gone.record().key.clone(), gone.record().bytes);
            first.run(move || drop(gone));
            // The report and the callback are user code, each caught on its own: a panicking
            // subscriber or recorder does not keep the callback from firing.
            first.run(|| {
                tracing::debug!(device = %self.device, key = %key, bytes, "evicted");
                telemetry::evicted(by, bytes);
            });
            if let Some(callback) = &callback {
                first.run(|| callback(&key, bytes));
            }
        }
        if let Some(payload) = first.into_payload() {
            if R::panicking() && !self.mutant(Mutant::PANIC_ESCAPES_UNWINDING_DROP) {
                drop(payload);
            } else {
                self.group.runtime.resume_unwind(payload);
            }
        }
        count
    }
}
