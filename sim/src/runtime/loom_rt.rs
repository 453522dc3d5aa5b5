//! [`LoomRuntime`]: loom's mutex, condition variable and atomics; a timer thread lets deadlines
//! pass.
//!
//! Waits block on a real loom condition variable (a polling wait multiplies loom's state space
//! far past what it can search). With timeouts on, every monitor registers a waker with the
//! runtime; the timer thread moves the clock past every deadline and then wakes each monitor
//! *under its mutex*, and a waiter checks the clock under that same mutex before it waits, so
//! the timeout cannot be a lost wakeup.

use std::fmt;
use std::time::Duration;

use loom::sync::atomic::{AtomicU64, Ordering};
use loom::sync::{Condvar, Mutex};
use resident::mutants::Mutant;
use resident::runtime::{Arc, Monitor, Runtime, TimedOut, Weak};

use super::SimRuntime;
use crate::mutant_set::MutantSet;

held_monitors!(loom);

/// The loom-backed runtime. Create one per execution, inside the checked closure.
#[derive(Clone)]
pub struct LoomRuntime {
    clock: Arc<AtomicU64>,
    timeouts: bool,
    mutants: Arc<MutantSet>,
    wakers: Arc<Mutex<Vec<Arc<dyn Wake>>>>,
}

/// Something the timer must wake when time passes.
trait Wake: Send + Sync {
    fn wake(&self);
}

impl fmt::Debug for LoomRuntime {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LoomRuntime").field("timeouts", &self.timeouts).finish()
    }
}

impl Runtime for LoomRuntime {
    type Monitor<T: Send + 'static> = LoomMonitor<T>;

    fn monitor<T: Send + 'static>(&self, value: T) -> LoomMonitor<T> {
        let inner = Arc::new(Inner { value: Mutex::new(value), changed: Condvar::new() });
        if self.timeouts {
            let waker: Arc<dyn Wake> = Arc::new(WakeMonitor(Arc::downgrade(&inner)));
            self.wakers.lock().unwrap_or_else(|p| p.into_inner()).push(waker);
        }
        LoomMonitor { inner, clock: Arc::clone(&self.clock) }
    }

    fn now(&self) -> Duration {
        Duration::from_nanos(self.clock.load(Ordering::SeqCst))
    }

    fn mutant(&self, mutant: Mutant) -> bool {
        self.mutants.contains(mutant)
    }

    fn defect(&self, what: &'static str) {
        crate::violation::Violation::record("defect", what.to_owned());
    }
}

struct Inner<T> {
    value: Mutex<T>,
    changed: Condvar,
}

impl<T> Inner<T> {
    fn lock(&self) -> loom::sync::MutexGuard<'_, T> {
        self.value.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

struct WakeMonitor<T>(Weak<Inner<T>>);

impl<T: Send + 'static> Wake for WakeMonitor<T> {
    fn wake(&self) {
        if let Some(inner) = self.0.upgrade() {
            let _guard = inner.lock();
            inner.changed.notify_all();
        }
    }
}

/// [`Monitor`] of the [`LoomRuntime`].
pub struct LoomMonitor<T> {
    inner: Arc<Inner<T>>,
    clock: Arc<AtomicU64>,
}

impl<T: Send> Monitor<T> for LoomMonitor<T> {
    fn with<U>(&self, f: impl FnOnce(&mut T) -> U) -> U {
        let mut guard = self.inner.lock();
        let _held = Held::enter();
        f(&mut guard)
    }

    fn try_with<U>(&self, f: impl FnOnce(&mut T) -> U) -> Option<U> {
        Held::try_run(self.inner.value.try_lock(), f)
    }

    fn notify_all(&self) {
        self.inner.changed.notify_all();
    }

    fn wait_until<U>(
        &self,
        timeout: Option<Duration>,
        mut f: impl FnMut(&mut T) -> Option<U>,
    ) -> Result<U, TimedOut> {
        let deadline = timeout.map(|t| {
            let nanos = u64::try_from(t.as_nanos()).unwrap_or(u64::MAX);
            self.clock.load(Ordering::SeqCst).saturating_add(nanos)
        });
        let mut guard = self.inner.lock();
        loop {
            let held = Held::enter();
            if let Some(done) = f(&mut guard) {
                return Ok(done);
            }
            drop(held);
            if deadline.is_some_and(|d| self.clock.load(Ordering::SeqCst) >= d) {
                return Err(TimedOut);
            }
            guard = self.inner.changed.wait(guard).unwrap_or_else(|poisoned| poisoned.into_inner());
        }
    }
}

checker_threads!(counter: loom);

impl SimRuntime for LoomRuntime {
    checker_threads!(threads: loom);

    fn for_execution(timeouts: bool, mutants: MutantSet) -> Self {
        Self {
            clock: Arc::new(AtomicU64::new(0)),
            timeouts,
            mutants: Arc::new(mutants),
            wakers: Arc::new(Mutex::new(Vec::new())),
        }
    }

    fn advance_clock(&self, by: Duration) {
        let nanos = u64::try_from(by.as_nanos()).unwrap_or(u64::MAX);
        let now = self.clock.load(Ordering::SeqCst);
        self.clock.store(now.saturating_add(nanos), Ordering::SeqCst);
    }

    fn start_time(&self) -> Option<Self::Handle<()>> {
        if !self.timeouts {
            return None;
        }
        let (clock, wakers) = (Arc::clone(&self.clock), Arc::clone(&self.wakers));
        // One event: time jumps past every deadline, set or yet to be set, and every waiter
        // re-checks. Monitors created later see the new clock before they ever wait.
        Some(self.spawn("timer", move || {
            clock.store(u64::MAX, Ordering::SeqCst);
            let wakers = wakers.lock().unwrap_or_else(|p| p.into_inner()).clone();
            for waker in wakers {
                waker.wake();
            }
        }))
    }

    fn monitors_held() -> usize {
        Held::count()
    }
}
