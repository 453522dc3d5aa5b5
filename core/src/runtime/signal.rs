//! [`Signal`]: an event count over the runtime's [`Monitor`] — a waiter reads the epoch, looks
//! at whatever state it depends on, and waits for the epoch to move past what it read.

use std::fmt;
use std::sync::atomic::Ordering::{Relaxed, Release};
use std::time::Duration;

use super::{AtomicWord, Monitor, Runtime, TimedOut};
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
///
/// Some changes are announced only while someone [watches](Signal::watch): the end of a
/// model's last lease, and a cache's release that leaves a record evictable, which are on the
/// hottest paths there are and almost never awaited. A thread that waits for such a change
/// holds a [`Watch`] from before its first look at the state until it stops waiting.
pub struct Signal<R: Runtime> {
    state: R::Monitor<State>,
    /// Live [`Watch`]es.
    watchers: R::Atomic,
    runtime: R,
}

/// A thread's declared interest in the changes its signal announces only while watched (the
/// end of a lease, a release that frees room): from its creation, which must come before the thread first looks at the
/// state it waits on, until it is dropped.
#[must_use = "a watch lasts only while it lives"]
pub struct Watch<'a, R: Runtime> {
    signal: &'a Signal<R>,
}

impl<R: Runtime> Drop for Watch<'_, R> {
    fn drop(&mut self) {
        self.signal.watchers.fetch_sub(1, Release);
    }
}

impl<R: Runtime> fmt::Debug for Watch<'_, R> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Watch").finish_non_exhaustive()
    }
}

impl<R: Runtime> Signal<R> {
    /// A signal at epoch zero.
    pub fn new(runtime: &R) -> Self {
        Self {
            state: runtime.monitor(State::default()),
            watchers: runtime.atomic(0),
            runtime: runtime.clone(),
        }
    }

    /// Watches the signal for the changes it announces only while watched (see the type's
    /// docs): take it before the first look at the state, keep it until done waiting.
    ///
    /// The count and a fence, paired with the fence a changer passes before it reads the
    /// count: of a watcher that counts itself and then looks at the state, and a changer that
    /// changes the state and then reads the count, at least one sees the other's write.
    pub fn watch(&self) -> Watch<'_, R> {
        self.watchers.fetch_add(1, Relaxed);
        self.runtime.fence();
        Watch { signal: self }
    }

    /// [`Signal::bump_at`] only while a [`Watch`] lives: a change nobody outside a watch waits
    /// for (the end of a lease, a release that frees room), made before this call.
    pub(crate) fn bump_if_watched_at(&self, site: Mutant) {
        self.runtime.fence();
        if self.watchers.load(Relaxed) > 0 {
            self.bump_at(site);
        }
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
