//! [`ManualClock`]: the production runtime with a clock the test moves by hand.

use std::time::Duration;

use parking_lot::Mutex;
use resident::runtime::{Arc, Runtime, StdRuntime};

/// [`StdRuntime`] with a clock the test moves by hand.
#[derive(Debug, Clone, Default)]
pub(crate) struct ManualClock {
    inner: StdRuntime,
    now: Arc<Mutex<Duration>>,
    /// Refuse to start background threads (a keep-alive timer): the test alone moves things.
    no_background: bool,
}

impl ManualClock {
    /// A clock whose runtime refuses to start background threads.
    pub(crate) fn without_background() -> Self {
        Self { no_background: true, ..Self::default() }
    }

    /// Moves the clock on by `by`.
    pub(crate) fn advance(&self, by: Duration) {
        *self.now.lock() += by;
    }
}

impl Runtime for ManualClock {
    type RwLock<T: Send + Sync + 'static> = <StdRuntime as Runtime>::RwLock<T>;

    fn rw_lock<T: Send + Sync + 'static>(&self, value: T) -> Self::RwLock<T> {
        self.inner.rw_lock(value)
    }

    type Atomic = <StdRuntime as Runtime>::Atomic;

    fn atomic(&self, value: u64) -> Self::Atomic {
        self.inner.atomic(value)
    }

    type Monitor<T: Send + 'static> = <StdRuntime as Runtime>::Monitor<T>;

    fn monitor<T: Send + 'static>(&self, value: T) -> Self::Monitor<T> {
        self.inner.monitor(value)
    }

    fn now(&self) -> Duration {
        *self.now.lock()
    }

    fn spawn_background(&self, name: &str, f: Box<dyn FnOnce() + Send + 'static>) -> std::io::Result<()> {
        if self.no_background {
            return Err(std::io::Error::other(format!("{name}: no background threads in this test")));
        }
        self.inner.spawn_background(name, f)
    }
}
