//! [`ShuttleRuntime`]: shuttle's mutex and atomics; timeouts drawn from shuttle's RNG.

use std::fmt;
use std::time::Duration;

use resident::mutants::Mutant;
use resident::runtime::{Arc, Monitor, Runtime, TimedOut};
use shuttle::rand::RngCore;
use shuttle::sync::Mutex;
use shuttle::sync::atomic::{AtomicU64, Ordering};

use super::SimRuntime;
use crate::mutant_set::MutantSet;

held_monitors!(shuttle);

/// One poll of a bounded wait times out with probability 1 / `TIMEOUT_ODDS`.
const TIMEOUT_ODDS: u64 = 4;

/// The shuttle-backed runtime. Create one per execution, inside the checked closure.
#[derive(Clone)]
pub struct ShuttleRuntime {
    clock: Arc<AtomicU64>,
    timeouts: bool,
    mutants: Arc<MutantSet>,
}

impl fmt::Debug for ShuttleRuntime {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ShuttleRuntime").field("timeouts", &self.timeouts).finish()
    }
}

impl ShuttleRuntime {
    /// Whether a bounded wait expires at this poll; advances the logical clock if it does.
    fn expires(&self, timeout: Duration) -> bool {
        if !self.timeouts || !shuttle::rand::thread_rng().next_u64().is_multiple_of(TIMEOUT_ODDS) {
            return false;
        }
        let nanos = u64::try_from(timeout.as_nanos()).unwrap_or(u64::MAX);
        self.clock.fetch_add(nanos.min(u64::MAX / 4), Ordering::SeqCst);
        true
    }
}

impl Runtime for ShuttleRuntime {
    type Monitor<T: Send + 'static> = ShuttleMonitor<T>;

    fn monitor<T: Send + 'static>(&self, value: T) -> ShuttleMonitor<T> {
        ShuttleMonitor { value: Mutex::new(value), runtime: self.clone() }
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

/// [`Monitor`] of the [`ShuttleRuntime`].
pub struct ShuttleMonitor<T> {
    value: Mutex<T>,
    runtime: ShuttleRuntime,
}

impl<T: Send> Monitor<T> for ShuttleMonitor<T> {
    fn with<U>(&self, f: impl FnOnce(&mut T) -> U) -> U {
        let mut guard = self.value.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        let _held = Held::enter();
        f(&mut guard)
    }

    fn try_with<U>(&self, f: impl FnOnce(&mut T) -> U) -> Option<U> {
        Held::try_run(self.value.try_lock(), f)
    }

    fn notify_all(&self) {}

    fn wait_until<U>(
        &self,
        timeout: Option<Duration>,
        mut f: impl FnMut(&mut T) -> Option<U>,
    ) -> Result<U, TimedOut> {
        loop {
            if let Some(done) = self.with(&mut f) {
                return Ok(done);
            }
            if timeout.is_some_and(|t| self.runtime.expires(t)) {
                return Err(TimedOut);
            }
            shuttle::thread::yield_now();
        }
    }
}

checker_threads!(counter: shuttle);

impl SimRuntime for ShuttleRuntime {
    checker_threads!(threads: shuttle);

    fn for_execution(timeouts: bool, mutants: MutantSet) -> Self {
        Self { clock: Arc::new(AtomicU64::new(0)), timeouts, mutants: Arc::new(mutants) }
    }

    fn advance_clock(&self, by: Duration) {
        let nanos = u64::try_from(by.as_nanos()).unwrap_or(u64::MAX);
        let now = self.clock.load(Ordering::SeqCst);
        self.clock.store(now.saturating_add(nanos), Ordering::SeqCst);
    }

    fn start_time(&self) -> Option<Self::Handle<()>> {
        None
    }

    fn monitors_held() -> usize {
        Held::count()
    }
}
