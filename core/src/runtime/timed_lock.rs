//! A lock that can be acquired with a timeout, built on the runtime's [`Monitor`].

use std::fmt;
use std::time::Duration;

use super::{Monitor, Runtime, TimedOut};
use crate::mutants::Mutant;

/// A mutual-exclusion lock without data, acquired with a bound on the wait.
///
/// Unlike a mutex guard, holding it is a plain state: [`TimedLock::release`] must be called by
/// the holder exactly once, which the callers in this crate do from RAII guards.
pub(crate) struct TimedLock<R: Runtime> {
    held: R::Monitor<bool>,
    runtime: R,
}

impl<R: Runtime> TimedLock<R> {
    /// Creates an unlocked lock on `runtime`.
    pub(crate) fn new(runtime: &R) -> Self {
        Self { held: runtime.monitor(false), runtime: runtime.clone() }
    }

    /// Acquires the lock, waiting at most `timeout`; `Ok(true)` if it had to wait (it was
    /// held when first tried).
    pub(crate) fn acquire(&self, timeout: Duration) -> Result<bool, TimedOut> {
        let mut tries = 0u32;
        let acquired = self.held.wait_until(Some(timeout), |held| {
            tries += 1;
            (!*held).then(|| *held = true)
        });
        acquired.map(|()| tries > 1)
    }

    /// Acquires the lock if it is free right now.
    pub(crate) fn try_acquire(&self) -> bool {
        self.held.with(|held| !std::mem::replace(held, true))
    }

    /// Releases the lock and wakes the waiters. Only the holder may call it.
    pub(crate) fn release(&self) {
        self.held.with(|held| {
            debug_assert!(*held, "released a TimedLock that was not held");
            *held = false;
        });
        if !self.runtime.mutant(Mutant::LOST_WAKEUP_LOCK_RELEASE) {
            self.held.notify_all();
        }
    }

    /// Whether some thread holds the lock right now (a hint: it may change at once).
    pub(crate) fn is_held(&self) -> bool {
        self.held.with(|held| *held)
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
        assert_eq!(lock.acquire(Duration::from_millis(10)), Ok(false), "free: no wait");
        assert!(lock.is_held());
        assert!(!lock.try_acquire(), "a held lock is not free");
        assert_eq!(lock.acquire(Duration::from_millis(5)), Err(TimedOut));
        lock.release();
        assert!(lock.try_acquire());
        lock.release();
        assert!(!lock.is_held());
    }
}
