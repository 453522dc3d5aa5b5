//! A lock that can be acquired with a timeout, built on the runtime's [`Monitor`].

use std::fmt;
use std::time::Duration;

use super::{Monitor, Runtime, TimedOut};
use crate::mutants::Mutant;

/// A mutual-exclusion lock without data, acquired with a bound on the wait: the lock a layer
/// holds across a call to the layer below (the manager's per-model lifecycle lock is one).
///
/// Unlike a [`Monitor`], it may be held while user code runs (a loader, the layer below, a
/// callback): only its own short state change runs under the runtime's monitor, so a
/// model-checking runtime explores the threads that wait for it as blocked on it, and a
/// deadlock through it is reported as one. A lock of `std` or `parking_lot` held that way
/// would block every checker thread on their one OS thread instead.
///
/// ```
/// use std::time::Duration;
/// use resident::runtime::{StdRuntime, TimedLock};
///
/// let lock = TimedLock::new(&StdRuntime::new());
/// let held = lock.lock();
/// assert!(lock.lock_until(resident::Deadline::after(&StdRuntime::new(), Duration::ZERO)).is_err());
/// assert!(lock.try_lock().is_none());
/// assert!(lock.lock_for(Duration::from_millis(1)).is_err(), "held: the bounded wait times out");
/// drop(held);
/// assert!(lock.try_lock().is_some());
/// ```
pub struct TimedLock<R: Runtime> {
    held: R::Monitor<Held>,
    runtime: R,
}

/// The lock's state.
#[derive(Debug, Default)]
struct Held {
    held: bool,
    /// Someone found it held and wants to hear of its release ([`TimedLock::is_held_noting`]).
    wanted: bool,
}

/// Holding a [`TimedLock`]: dropping it releases the lock (also while unwinding).
#[must_use = "the lock is released when the guard drops"]
pub struct TimedLockGuard<'a, R: Runtime> {
    lock: &'a TimedLock<R>,
}

impl<R: Runtime> Drop for TimedLockGuard<'_, R> {
    fn drop(&mut self) {
        self.lock.release();
    }
}

impl<R: Runtime> fmt::Debug for TimedLockGuard<'_, R> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("TimedLockGuard")
    }
}

impl<R: Runtime> TimedLock<R> {
    /// Creates an unlocked lock on `runtime`.
    pub fn new(runtime: &R) -> Self {
        Self { held: runtime.monitor(Held::default()), runtime: runtime.clone() }
    }

    /// Takes the lock, waiting as long as it takes.
    pub fn lock(&self) -> TimedLockGuard<'_, R> {
        let taken = self.held.wait_until(None, |s| (!s.held).then(|| s.held = true));
        let () = taken.expect("an unbounded wait never times out");
        TimedLockGuard { lock: self }
    }

    /// Takes the lock, waiting at most `timeout` on the runtime's clock.
    pub fn lock_for(&self, timeout: Duration) -> Result<TimedLockGuard<'_, R>, TimedOut> {
        self.acquire(timeout).0.map(|()| TimedLockGuard { lock: self })
    }

    /// Takes the lock, waiting until `deadline` at most (a call's own deadline, as a layer's
    /// guard carries it); [`Deadline::NONE`](crate::Deadline::NONE) waits as long as it takes.
    pub fn lock_until(&self, deadline: crate::Deadline) -> Result<TimedLockGuard<'_, R>, TimedOut> {
        match deadline.at() {
            None => Ok(self.lock()),
            Some(at) => self.lock_for(at.saturating_sub(self.runtime.now())),
        }
    }

    /// Takes the lock if it is free right now.
    pub fn try_lock(&self) -> Option<TimedLockGuard<'_, R>> {
        self.try_acquire().then(|| TimedLockGuard { lock: self })
    }

    /// Acquires the lock, waiting at most `timeout`. Also says since when (on the runtime's
    /// clock) it waited, if it had to (it was held when first tried): the clock is read only
    /// then, so the uncontended path reads none.
    pub(crate) fn acquire(&self, timeout: Duration) -> (Result<(), TimedOut>, Option<Duration>) {
        let mut waited_since = None;
        let acquired = self.held.wait_until(Some(timeout), |s| {
            let free = !s.held;
            if free {
                s.held = true;
            } else if waited_since.is_none() {
                waited_since = Some(self.runtime.now());
            }
            free.then_some(())
        });
        (acquired, waited_since)
    }

    /// Acquires the lock if it is free right now. A caller that finds it held is noted as
    /// wanting to hear of its release, as by [`TimedLock::is_held_noting`] (it may wait for the
    /// stack to change before it tries again).
    pub(crate) fn try_acquire(&self) -> bool {
        self.held.with(|s| {
            s.wanted |= s.held;
            !std::mem::replace(&mut s.held, true)
        })
    }

    /// Releases the lock and wakes one waiter (they all wait for the lock to be free: the one
    /// woken takes it, or finds it taken by a caller that did not wait, whose release wakes the
    /// next). Only the holder may call it. Returns whether someone found it held with
    /// [`TimedLock::is_held_noting`] since it was taken.
    pub(crate) fn release(&self) -> bool {
        let wanted = self.held.with(|s| {
            debug_assert!(s.held, "released a TimedLock that was not held");
            s.held = false;
            std::mem::take(&mut s.wanted)
        });
        if !self.runtime.mutant(Mutant::LOST_WAKEUP_LOCK_RELEASE) {
            self.held.notify_one();
        }
        wanted
    }

    /// Whether some thread holds the lock right now (a hint: it may change at once).
    pub fn is_held(&self) -> bool {
        self.held.with(|s| s.held)
    }

    /// [`TimedLock::is_held`], noting that the caller wants to hear of the release if it is:
    /// the holder's [`TimedLock::release`] then says so, in the same step as it frees the lock.
    pub(crate) fn is_held_noting(&self) -> bool {
        self.held.with(|s| {
            s.wanted |= s.held;
            s.held
        })
    }
}

impl<R: Runtime> fmt::Debug for TimedLock<R> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TimedLock").field("held", &self.is_held()).finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::runtime::StdRuntime;

    #[test]
    fn acquire_release_and_try() {
        let lock = TimedLock::new(&StdRuntime::new());
        assert_eq!(lock.acquire(Duration::from_millis(10)), (Ok(()), None), "free: no wait");
        assert!(lock.is_held());
        assert!(!lock.try_acquire(), "a held lock is not free");
        let (timed_out, waited_since) = lock.acquire(Duration::from_millis(5));
        assert_eq!(timed_out, Err(TimedOut));
        assert!(waited_since.is_some(), "a held lock is waited for");
        lock.release();
        assert!(lock.try_acquire());
        lock.release();
        assert!(!lock.is_held());
    }
}
