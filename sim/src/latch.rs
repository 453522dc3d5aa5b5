//! [`Latch`]: a count that scenario threads wait on by blocking, never by polling.

use resident::runtime::Monitor;

use crate::runtime::SimRuntime;

/// A monotone count on a sim monitor: [`Latch::add`] notifies, [`Latch::wait_for`] blocks until
/// the count reaches a value. A scenario's own sync points use it, so that a thread waiting on
/// one counts as blocked (and a forgotten `add` shows as a deadlock, not a livelock).
pub struct Latch<R: SimRuntime> {
    count: R::Monitor<usize>,
}

impl<R: SimRuntime> Latch<R> {
    /// A latch at zero.
    pub fn new(rt: &R) -> Self {
        Self { count: rt.monitor(0) }
    }

    /// Adds `n` and wakes the waiters.
    pub fn add(&self, n: usize) {
        self.count.with(|c| *c += n);
        self.count.notify_all();
    }

    /// The count now.
    pub fn get(&self) -> usize {
        self.count.with(|c| *c)
    }

    /// Blocks until the count is at least `n`.
    pub fn wait_for(&self, n: usize) {
        let _ = self.count.wait_until(None, |c| (*c >= n).then_some(()));
    }

    /// Blocks until the count is at least `n` or `timeout` has passed on the runtime's clock;
    /// whether the count got there.
    pub fn wait_for_within(&self, n: usize, timeout: std::time::Duration) -> bool {
        self.count.wait_until(Some(timeout), |c| (*c >= n).then_some(())).is_ok()
    }
}
