//! [`DeviceBudget`]: the device bytes of one cache, counted by construction.
//!
//! Every device copy lives inside a [`Placed`] whose last field is a [`DeviceCharge`]: the copy
//! is dropped first (its `Drop` is user code, and frees the device memory), then the charge
//! debits the budget. So a copy counts from the moment its move was claimed until its
//! destructor has finished — whether it is resident in a slot, used through a detached record,
//! offloaded and not yet dropped, or evicted with its record — and "device bytes counted" is
//! never less than the device bytes alive. The budget's monitor is a leaf, like the RAM budget's.

use std::fmt;
use std::ops::Deref;

use std::time::Duration;

use crate::mutants::Mutant;
use crate::runtime::{Arc, Monitor, Runtime, Signal, TimedOut};

#[derive(Debug, Default)]
struct Counters {
    cap: Option<u64>,
    /// Bytes of device copies alive (their `Placed` not yet dropped).
    live: u64,
    /// Bytes of moves claimed and not yet settled.
    moving: u64,
}

/// One cache's device budget and what counts against it.
pub(crate) struct DeviceBudget<R: Runtime> {
    counters: R::Monitor<Counters>,
    /// Bumped by every change that can end a wait for device room: a debit, a changed cap, a
    /// record unlocked with its copy resident (so it can be offloaded).
    room: Signal<R>,
}

impl<R: Runtime> DeviceBudget<R> {
    pub(crate) fn new(runtime: &R) -> Arc<Self> {
        Arc::new(Self { counters: runtime.monitor(Counters::default()), room: Signal::new(runtime) })
    }

    pub(crate) fn cap(&self) -> Option<u64> {
        self.counters.with(|c| c.cap)
    }

    /// Sets the cap; `true` if it was lowered (below the old one, or a cap where there was
    /// none). Every change wakes the lockers waiting for room: a raised cap may fit them, a
    /// lowered one may refuse them at once.
    pub(crate) fn set_cap(&self, cap: Option<u64>) -> bool {
        let lowered = self.counters.with(|c| match (std::mem::replace(&mut c.cap, cap), cap) {
            (Some(old), Some(new)) => new < old,
            (None, new) => new.is_some(),
            (Some(_), None) => false,
        });
        self.room.bump_at(Mutant::LOST_WAKEUP_DEVICE_BUDGET_RAISED);
        lowered
    }

    /// The room epoch: read it before deciding, then [`DeviceBudget::wait_for_room`] past it.
    pub(crate) fn room_epoch(&self) -> u64 {
        self.room.epoch()
    }

    /// Waits, at most `timeout`, until something that can make room happened since `seen`.
    pub(crate) fn wait_for_room(&self, seen: u64, timeout: Option<Duration>) -> Result<(), TimedOut> {
        self.room.wait_past(seen, timeout)
    }

    /// A record was unlocked with its copy resident: the copy can be offloaded now.
    pub(crate) fn copy_unlocked(&self) {
        self.room.bump_at(Mutant::LOST_WAKEUP_DEVICE_UNLOCK);
    }

    /// Runs a debit, then wakes the lockers waiting for room.
    fn debit(&self, f: impl FnOnce(&mut Counters)) {
        self.counters.with(f);
        self.room.bump_at(Mutant::LOST_WAKEUP_DEVICE_DEBIT);
    }

    /// Bytes of live copies and, unless `moves` is false (the C-P1 mutant), moves in flight.
    pub(crate) fn used(&self, moves: bool) -> u64 {
        self.counters.with(|c| c.live.saturating_add(if moves { c.moving } else { 0 }))
    }

    /// Bytes of moves in flight.
    pub(crate) fn moving(&self) -> u64 {
        self.counters.with(|c| c.moving)
    }

    /// Charges a move of `bytes` until it settles; `None` (nothing charged) if the sum of live
    /// and moving bytes would overflow.
    pub(crate) fn claim_move(&self, bytes: u64) -> Option<()> {
        self.counters.with(|c| {
            c.live.checked_add(c.moving)?.checked_add(bytes)?;
            c.moving += bytes;
            Some(())
        })
    }

    /// Releases the charge of a move that produced no copy.
    pub(crate) fn end_move(&self, bytes: u64) {
        self.debit(|c| c.moving = c.moving.saturating_sub(bytes));
    }

    /// Turns a settled move's charge into the charge of its copy, in one step.
    pub(crate) fn place<T>(self: &Arc<Self>, copy: T, bytes: u64) -> Placed<T, R> {
        self.counters.with(|c| {
            c.moving = c.moving.saturating_sub(bytes);
            c.live += bytes;
        });
        Placed { copy: Some(copy), _charge: DeviceCharge { budget: Arc::clone(self), bytes } }
    }
}

/// Device bytes of one copy, counted until dropped.
pub(crate) struct DeviceCharge<R: Runtime> {
    budget: Arc<DeviceBudget<R>>,
    bytes: u64,
}

impl<R: Runtime> Drop for DeviceCharge<R> {
    fn drop(&mut self) {
        self.budget.debit(|c| c.live = c.live.saturating_sub(self.bytes));
    }
}

/// A device copy and its charge. Fields drop in order: the copy (user code), then the charge.
pub(crate) struct Placed<T, R: Runtime> {
    /// `Some` until dropped.
    copy: Option<T>,
    _charge: DeviceCharge<R>,
}

impl<T, R: Runtime> Deref for Placed<T, R> {
    type Target = T;

    fn deref(&self) -> &T {
        self.copy.as_ref().expect("a live copy")
    }
}

/// The copy's `Drop` is user code: while the thread unwinds another panic, a panic of its is
/// caught and dropped (one leaving a `Drop` during an unwind aborts the process). The charge
/// is released after it either way.
impl<T, R: Runtime> Drop for Placed<T, R> {
    fn drop(&mut self) {
        let copy = self.copy.take();
        if R::panicking() {
            let _ = R::catch_unwind(move || drop(copy));
        } else {
            drop(copy);
        }
    }
}

impl<T, R: Runtime> fmt::Debug for Placed<T, R> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Placed").field("bytes", &self._charge.bytes).finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::runtime::StdRuntime;

    #[test]
    fn a_copy_counts_from_its_claim_until_it_is_dropped() {
        let budget = DeviceBudget::new(&StdRuntime::new());
        budget.claim_move(60).unwrap();
        assert_eq!((budget.used(true), budget.used(false)), (60, 0));
        let copy = budget.place(7u8, 60);
        assert_eq!((budget.used(true), budget.used(false)), (60, 60));
        assert_eq!(*copy, 7);
        drop(copy);
        assert_eq!(budget.used(true), 0);
        budget.claim_move(10).unwrap();
        budget.end_move(10);
        assert_eq!(budget.used(true), 0);
    }

    #[test]
    fn a_move_that_would_overflow_is_not_charged() {
        let budget = DeviceBudget::new(&StdRuntime::new());
        budget.claim_move(u64::MAX / 2 + 1).unwrap();
        assert!(budget.claim_move(u64::MAX / 2 + 1).is_none());
        assert_eq!(budget.used(true), u64::MAX / 2 + 1);
    }
}
