//! Requests between peers: a room or reconcile request left with a peer whose state lock is
//! busy, honoured by that peer at its next release (`crate::cache::room_request` gives the
//! protocol).

use super::*;
use crate::first_panic::FirstPanic;
use crate::telemetry::EvictedBy;

impl<W: Send + Sync + 'static, R: Runtime> DeviceCache<W, R> {
    /// Asks this cache to evict down to the budget: sets the pending flag first, then tries
    /// without waiting. If the cache is busy, the holder of its lock honours the flag.
    pub(crate) fn request_reconcile(&self) {
        let _ = self.request_room(0);
    }

    /// Like [`DeviceCache::request_reconcile`], evicting until `bytes` more fit: now if it can
    /// get the cache's lock right away, else at the holder's release (the request keeps the
    /// largest room asked for). How many records it evicted now.
    pub(crate) fn request_room(&self, bytes: u64) -> usize {
        let set_after_try = self.mutant(Mutant::FLAG_SET_AFTER_TRY);
        if !set_after_try {
            self.reconcile_pending.leave(bytes);
        }
        match self.reconcile_now(bytes) {
            Some(evicted) if self.mutant(Mutant::FINISH_SKIPS_DRAIN_ON_PANIC) => {
                let count = self.finish_evictions(evicted, EvictedBy::Room);
                self.drain_requests();
                count
            }
            Some(evicted) => self.finish_then_drain(|| self.finish_evictions(evicted, EvictedBy::Room)),
            None if set_after_try => {
                self.reconcile_pending.leave(bytes);
                0
            }
            None => 0,
        }
    }

    /// One reconcile if the lock is free right now: clears the request and evicts until `room`
    /// (or the room the request asked for, if more) fits, in one critical section. `None` if the
    /// lock is held.
    pub(super) fn reconcile_now(&self, room: u64) -> Option<Evicted<W, R>> {
        let (admitting, clear_late) =
            (self.mutant(Mutant::ADMISSION_UNPROTECTED), self.mutant(Mutant::FLAG_CLEARED_LATE));
        let evicted = self.state.try_with(|s| {
            let requested =
                if clear_late { self.reconcile_pending.peek() } else { self.reconcile_pending.take() };
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
            let room = room.max(deferred);
            s.evict_lru_while(|pending| self.fits_after(pending, room), admitting)
        })?;
        if clear_late {
            self.reconcile_pending.clear();
        }
        Some(evicted)
    }

    /// Runs `finish` (user code: finishing the evictions taken out under the lock just
    /// released), then honours the reconcile requests that arrived while the lock was held,
    /// even if `finish` panicked (its panic goes on after): in the other order, a panicking
    /// reconcile would leave those evictions to be dropped, unreported, in its unwind. How many
    /// `finish` evicted (none if it panicked and a checking runtime kept the thread going).
    pub(crate) fn finish_then_drain(&self, finish: impl FnOnce() -> usize) -> usize {
        let mut first = FirstPanic::<R>::new();
        let count = first.run(finish);
        first.run(|| self.drain_requests());
        first.resume_on(&self.group.runtime);
        count.unwrap_or(0)
    }

    /// Honours the pending flag after this thread released the state lock: reconciles while the
    /// flag reads set and the lock is free. When the lock is held, its holder checks after its
    /// own release.
    pub(crate) fn drain_requests(&self) {
        if self.mutant(Mutant::DEFERRED_RECONCILE_SKIPPED) {
            return;
        }
        // A reconcile runs user code (weights' `Drop`, callbacks): never while unwinding, where a
        // second panic aborts. The flag stays set, and the loads waiting for room are told to
        // look again: the one that left the request finds the lock free now and reconciles
        // itself (no later holder may come).
        if R::panicking() {
            if self.reconcile_pending.is_pending() {
                self.group.budget.room_changed(Mutant::LOST_WAKEUP_UNWINDING_RELEASE);
            }
            return;
        }
        // A panicking eviction (user code) ends the drain only once the requests left meanwhile
        // are honoured too; the first panic then goes on.
        let mut first = FirstPanic::<R>::new();
        while self.reconcile_pending.is_pending() {
            let Some(evicted) = self.reconcile_now(0) else { break };
            first.run(|| self.finish_evictions(evicted, EvictedBy::Room));
        }
        first.resume_on(&self.group.runtime);
    }
}
