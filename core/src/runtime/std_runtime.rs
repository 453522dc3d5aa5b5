//! The production runtime: parking_lot locks and condition variables, `std::time` for deadlines.

use std::fmt;
use std::time::{Duration, Instant};

use parking_lot::{Condvar, Mutex};

use super::{Monitor, Runtime, TimedOut};

/// The production [`Runtime`]: parking_lot primitives and the monotonic wall clock.
///
/// This is the default runtime parameter of every public type, so users never name it.
#[derive(Clone, Copy)]
pub struct StdRuntime {
    origin: Instant,
}

impl StdRuntime {
    /// Creates a runtime whose clock starts now.
    pub fn new() -> Self {
        Self { origin: Instant::now() }
    }
}

impl Default for StdRuntime {
    fn default() -> Self {
        Self::new()
    }
}

impl fmt::Debug for StdRuntime {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("StdRuntime").finish_non_exhaustive()
    }
}

impl Runtime for StdRuntime {
    type Monitor<T: Send + 'static> = StdMonitor<T>;

    fn monitor<T: Send + 'static>(&self, value: T) -> StdMonitor<T> {
        StdMonitor { value: Mutex::new(value), changed: Condvar::new() }
    }

    type RwLock<T: Send + Sync + 'static> = parking_lot::RwLock<T>;

    #[inline]
    fn rw_lock<T: Send + Sync + 'static>(&self, value: T) -> Self::RwLock<T> {
        parking_lot::RwLock::new(value)
    }

    type Atomic = std::sync::atomic::AtomicU64;

    #[inline]
    fn atomic(&self, value: u64) -> Self::Atomic {
        std::sync::atomic::AtomicU64::new(value)
    }

    fn now(&self) -> Duration {
        self.origin.elapsed()
    }

    fn spawn_background(&self, name: &str, f: Box<dyn FnOnce() + Send + 'static>) -> std::io::Result<()> {
        std::thread::Builder::new().name(name.to_owned()).spawn(f).map(drop)
    }
}

/// [`Monitor`] of the [`StdRuntime`]: a parking_lot mutex and condition variable.
pub struct StdMonitor<T> {
    value: Mutex<T>,
    changed: Condvar,
}

impl<T> fmt::Debug for StdMonitor<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("StdMonitor").finish_non_exhaustive()
    }
}

impl<T: Send> Monitor<T> for StdMonitor<T> {
    fn with<U>(&self, f: impl FnOnce(&mut T) -> U) -> U {
        f(&mut self.value.lock())
    }

    fn try_with<U>(&self, f: impl FnOnce(&mut T) -> U) -> Option<U> {
        self.value.try_lock().map(|mut guard| f(&mut guard))
    }

    fn notify_all(&self) {
        self.changed.notify_all();
    }

    fn notify_one(&self) {
        self.changed.notify_one();
    }

    fn wait_until<U>(
        &self,
        timeout: Option<Duration>,
        mut f: impl FnMut(&mut T) -> Option<U>,
    ) -> Result<U, TimedOut> {
        let mut guard = self.value.lock();
        if let Some(done) = f(&mut guard) {
            // The uncontended pass reads no clock.
            return Ok(done);
        }
        // A deadline too far away to represent is no deadline at all.
        let deadline = timeout.and_then(|d| Instant::now().checked_add(d));
        loop {
            match deadline {
                None => self.changed.wait(&mut guard),
                Some(deadline) => {
                    if self.changed.wait_until(&mut guard, deadline).timed_out() {
                        return f(&mut guard).ok_or(TimedOut);
                    }
                }
            }
            if let Some(done) = f(&mut guard) {
                return Ok(done);
            }
        }
    }
}
