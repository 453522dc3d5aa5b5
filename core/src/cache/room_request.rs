//! The request for room a cache leaves with a peer whose lock is busy, and the protocol that
//! makes sure one is never lost.
//!
//! A cache never waits for a peer's lock (SPEC 3.2). To ask a peer for room (or to reconcile
//! down to the cap, a request for zero bytes), it *leaves* the request first and then tries the
//! peer's lock; a request is *taken* only under that lock, in the same critical section as the
//! eviction it asks for. Every holder of the lock looks for a request *after* releasing it, and
//! keeps reconciling while one is pending and the lock is free. Hence:
//! - a request whose try failed is seen by the holder that made it fail (no lost wakeup, C-R19);
//! - a request that lands while a reconcile runs survives that reconcile's take (no set/clear
//!   race, C-R21): it is left after the take or taken by it, never cleared unseen;
//! - two requests pending at once merge into the larger (one eviction pass serves both).
//!
//! The request is a leaf monitor: nothing is taken while it is held. Whether one is pending is
//! also a flag, written under that monitor and read without it, so that the look every release
//! makes costs no lock: the requester passes a fence between leaving its request and trying
//! the lock, the holder one between releasing the lock and reading the flag, so of the two at
//! least one sees the other's write (the try fails only on a holder that then sees the flag).

use crate::runtime::Ordering::Relaxed;
use crate::runtime::{AtomicWord, Monitor, Runtime};

/// A cache's pending room request (`Some(0)`: back to the cap).
pub(crate) struct RoomRequest<R: Runtime> {
    pending: R::Monitor<Option<u64>>,
    /// 1 while a request is pending (written under `pending`).
    flag: R::Atomic,
    runtime: R,
}

impl<R: Runtime> RoomRequest<R> {
    /// No request pending.
    pub(crate) fn new(runtime: &R) -> Self {
        Self { pending: runtime.monitor(None), flag: runtime.atomic(0), runtime: runtime.clone() }
    }

    /// Leaves a request for `room` bytes, merged with one pending (the larger wins), before the
    /// caller tries the cache's lock.
    pub(crate) fn leave(&self, room: u64) {
        self.pending.with(|p| {
            *p = Some(p.unwrap_or(0).max(room));
            self.flag.store(1, Relaxed);
        });
        self.runtime.fence();
    }

    /// Takes the pending request: only under the cache's lock, in the critical section that
    /// serves it.
    pub(crate) fn take(&self) -> Option<u64> {
        self.pending.with(|p| {
            self.flag.store(0, Relaxed);
            p.take()
        })
    }

    /// Whether a request is pending, after the caller released the cache's lock; no monitor.
    pub(crate) fn is_pending(&self) -> bool {
        self.runtime.fence();
        self.flag.load(Relaxed) != 0
    }
}

// Historical bugs: the request's part of the switches' bodies (see `crate::mutants`).
impl<R: Runtime> RoomRequest<R> {
    /// `flag-cleared-late`, its first step: the pending request read and left in place.
    pub(crate) fn peek(&self) -> Option<u64> {
        self.pending.with(|p| *p)
    }

    /// `flag-cleared-late`, its second step: the request cleared after the reconcile, whatever
    /// landed meanwhile.
    pub(crate) fn clear(&self) {
        self.pending.with(|p| {
            *p = None;
            self.flag.store(0, Relaxed);
        });
    }
}
