//! [`Signal`]: an event count over the runtime's [`Monitor`] — a waiter reads the epoch, looks
//! at whatever state it depends on, and waits for the epoch to move past what it read.

use std::fmt;
use std::time::Duration;

use super::{Monitor, Runtime, TimedOut};
use crate::mutants::Mutant;

#[derive(Debug, Default)]
struct State {
    epoch: u64,
    waiters: usize,
}

/// Counts state changes so that a thread can wait for "anything changed since I looked".
///
/// The protocol that makes it free of lost wakeups: a waiter calls [`Signal::epoch`] *before*
/// it inspects the state it waits on, then [`Signal::wait_past`] that epoch; a changer changes
/// the state first and [`Signal::bump`]s after. Either the inspection sees the change, or the
/// bump lands after the epoch was read and the wait returns at once.
pub struct Signal<R: Runtime> {
    state: R::Monitor<State>,
    runtime: R,
}

impl<R: Runtime> Signal<R> {
    /// A signal at epoch zero.
    pub fn new(runtime: &R) -> Self {
        Self { state: runtime.monitor(State::default()), runtime: runtime.clone() }
    }

    /// The current epoch: read it before inspecting the state a wait depends on.
    pub fn epoch(&self) -> u64 {
        self.state.with(|s| s.epoch)
    }

    /// Records a change and wakes the waiters; one short critical section and no wake-up call
    /// when nobody waits.
    pub fn bump(&self) {
        let waiting = self.state.with(|s| {
            s.epoch = s.epoch.wrapping_add(1);
            s.waiters > 0
        });
        if waiting {
            self.state.notify_all();
        }
    }

    /// [`Signal::bump`] from the notify site that `site` (its lost-wakeup mutant) switches off.
    pub(crate) fn bump_at(&self, site: Mutant) {
        if !self.runtime.mutant(site) {
            self.bump();
        }
    }

    /// Whether a thread waits on this signal right now (a hint: it may start or stop waiting
    /// at once).
    pub(crate) fn has_waiters(&self) -> bool {
        self.state.with(|s| s.waiters > 0)
    }

    /// The runtime the signal was created on.
    pub(crate) fn runtime(&self) -> &R {
        &self.runtime
    }

    /// Waits until the epoch differs from `seen`, at most `timeout` (`None`: unbounded).
    pub fn wait_past(&self, seen: u64, timeout: Option<Duration>) -> Result<(), TimedOut> {
        let must_wait = self.state.with(|s| {
            let must_wait = s.epoch == seen;
            s.waiters += usize::from(must_wait);
            must_wait
        });
        if !must_wait {
            return Ok(());
        }
        let waited = self.state.wait_until(timeout, |s| (s.epoch != seen).then_some(()));
        self.state.with(|s| s.waiters -= 1);
        waited
    }
}

impl<R: Runtime> fmt::Debug for Signal<R> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Signal").field("epoch", &self.epoch()).finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::runtime::StdRuntime;

    #[test]
    fn a_bump_after_the_read_ends_the_wait_and_none_times_out() {
        let signal = Signal::new(&StdRuntime::new());
        let seen = signal.epoch();
        assert_eq!(signal.wait_past(seen, Some(Duration::from_millis(1))), Err(TimedOut));
        signal.bump();
        assert_eq!(signal.wait_past(seen, None), Ok(()), "the bump landed after `seen` was read");
        assert_ne!(signal.epoch(), seen);
    }
}
