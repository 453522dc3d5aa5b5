//! The keep-alive timer of a [`CacheGroup`](super::CacheGroup): records idle longer than their cache's keep-alive
//! are evicted without any other call (SPEC 3.8).
//!
//! # Why core starts a thread
//! Expiry used to run only inside `put`, `get` and `make_room`, so an idle process never gave
//! memory back and every application had to run [`DeviceCache::expire_idle`](super::DeviceCache::expire_idle) from a timer of
//! its own — the one thing every user of keep-alive needs and none gets right by default. So
//! the group owns one timer thread, started through the runtime facade
//! ([`Runtime::spawn_background`]) the first time a cache of the group sets a keep-alive. It is built to
//! be invisible:
//!
//! - It holds only a [`Weak`] reference to its group's caches (the list the group owns) and a
//!   strong one to this timer's state:
//!   it never keeps a group, a cache or a record alive. While it sleeps it holds no reference
//!   to the group at all.
//! - It sleeps until the earliest idle deadline of the group's caches (or, with no idle record,
//!   until something changes), then runs [`DeviceCache::expire_idle`](super::DeviceCache::expire_idle) on every cache with a
//!   keep-alive. User code it runs that way (eviction callbacks, weights' `Drop`) may panic:
//!   the panic is logged and the timer goes on.
//! - It exits as soon as no cache of the group has a keep-alive (a cache's `shutdown` cancels
//!   its own for good, and a dropped cache takes its keep-alive with it) — so at the latest when
//!   the group is dropped, which needs every cache dropped first. The next keep-alive starts a
//!   new one.
//!
//! # The wake-up rule
//! Every change that can bring the earliest deadline forward wakes the sleeping timer: a
//! release that leaves a record idle (when its deadline is earlier than the one the timer sleeps
//! to — usually it is not, and then nothing is notified: the release reads that deadline from
//! an atomic, without the timer's monitor, and the timer publishes "looking" before each look,
//! W-11l), a keep-alive set or changed, a
//! shutdown, a cache with a keep-alive dropped. The timer reads the epoch before it looks at the caches and
//! sleeps only if no change landed meanwhile, so none is lost; each notify site has a mutant.
//! Under the model checkers the timer is a checker thread and its sleep a bounded wait on the
//! logical clock, so expiry is explored like any other step.

use std::time::Duration;

use super::member::Members;
use crate::mutants::Mutant;
use crate::runtime::Ordering::Relaxed;
use crate::runtime::{Arc, AtomicWord, Monitor, Runtime, Weak};

/// The name of the timer thread.
const THREAD_NAME: &str = "resident-keep-alive";

/// What the timer thread is doing.
#[derive(Debug, Clone, Copy)]
enum Armed {
    /// Between reading the epoch and going to sleep: any change must make it look again.
    Looking,
    /// Asleep until this deadline on the runtime's clock (`None`: until something changes).
    Until(Option<Duration>),
}

#[derive(Debug)]
struct TimerState {
    /// Whether a timer thread runs (or is being started).
    running: bool,
    /// Bumped by every change that can bring the earliest deadline forward.
    epoch: u64,
    armed: Armed,
    /// The thread is inside its wait (so a change must notify it).
    waiting: bool,
}

/// The keep-alive timer of one group (the module docs explain it).
pub(crate) struct ExpiryTimer<R: Runtime> {
    runtime: R,
    state: R::Monitor<TimerState>,
    /// The deadline the timer sleeps to, for a release to read without the monitor:
    /// [`encode`]d, 0 while it looks, sleeps with no deadline or does not run. Written under
    /// the monitor with `armed`.
    armed_at: R::Atomic,
}

/// What the timer thread does after a look.
enum Next {
    Again,
    Exit,
    Sleep(Option<Duration>),
}

// ---- The timer ---------------------------------------------------------------------------------

impl<R: Runtime> ExpiryTimer<R> {
    pub(crate) fn new(runtime: &R) -> Arc<Self> {
        let state = TimerState { running: false, epoch: 0, armed: Armed::Looking, waiting: false };
        Arc::new(Self {
            runtime: runtime.clone(),
            state: runtime.monitor(state),
            armed_at: runtime.atomic(0),
        })
    }

    /// Whether a timer thread runs.
    pub(crate) fn running(&self) -> bool {
        self.state.with(|t| t.running)
    }

    /// A keep-alive was set or changed in a cache of `caches` (a group's): starts the timer
    /// thread if none runs, or makes the running one look again.
    pub(crate) fn start(self: &Arc<Self>, caches: &Arc<Members<R>>) {
        if self.runtime.mutant(Mutant::TIMER_START_SPLIT) {
            return self.start_split(caches);
        }
        // One critical section: a running timer about to exit for want of a keep-alive sees
        // this one (the epoch moved: it looks again), or has exited already (it is started).
        let (spawn, notify) = self.state.with(|t| {
            if t.running {
                t.epoch += 1;
                return (false, t.waiting);
            }
            t.running = true;
            t.armed = Armed::Looking;
            (true, false)
        });
        if notify && !self.runtime.mutant(Mutant::LOST_WAKEUP_KEEP_ALIVE_SET) {
            self.state.notify_all();
        }
        if spawn {
            self.spawn(caches);
        }
    }

    /// Starts the timer thread over `caches`.
    fn spawn(self: &Arc<Self>, caches: &Arc<Members<R>>) {
        let (timer, caches) = (Arc::clone(self), Arc::downgrade(caches));
        if let Err(error) = self.runtime.spawn_background(THREAD_NAME, Box::new(move || timer.run(&caches))) {
            // Expiry still runs inside `put` and `make_room`; the next keep-alive retries. The
            // report comes last: a subscriber that panics must find no timer counted running.
            self.state.with(|t| t.running = false);
            tracing::warn!(%error, "could not start the keep-alive timer thread");
        }
    }

    /// Something changed that may bring the earliest deadline forward to `deadline` (`None`:
    /// any change, such as a shutdown): wakes the timer unless it already sleeps to an earlier
    /// deadline. Cheap when no timer runs or it needs no waking. `site` is the caller's
    /// lost-wakeup mutant.
    pub(crate) fn poke(&self, deadline: Option<Duration>, site: Mutant) {
        // Asleep to a deadline no later than this one: nothing to do, without the monitor. A
        // stale read is harmless: the timer publishes 0 before it looks at the caches, so a
        // release whose change its look missed (the change comes after the look, under the
        // cache's lock) reads that 0, or the deadline the look then chose, and compares again.
        let armed = self.armed_at.load(Relaxed);
        if let Some(deadline) = deadline
            && armed != 0
            && encode(Some(deadline)) >= armed
            && armed != u64::MAX
        {
            return;
        }
        let notify = self.state.with(|t| {
            let earlier = match (t.armed, deadline) {
                (Armed::Looking, _) | (Armed::Until(None), _) | (_, None) => true,
                (Armed::Until(Some(armed)), Some(deadline)) => deadline < armed,
            };
            if !t.running || !earlier {
                return false;
            }
            t.epoch += 1;
            t.waiting
        });
        if notify && !self.runtime.mutant(site) {
            self.state.notify_all();
        }
    }

    /// The timer thread.
    fn run(&self, caches: &Weak<Members<R>>) {
        let uncaught = self.runtime.mutant(Mutant::TIMER_REPORTS_UNCAUGHT);
        report::<R>(uncaught, || tracing::debug!("keep-alive timer started"));
        loop {
            let kept = self.runtime.mutant(Mutant::LOST_WAKEUP_ARMED_WHILE_LOOKING);
            let seen = self.state.with(|t| {
                t.armed = Armed::Looking;
                if !kept {
                    self.armed_at.store(0, Relaxed);
                }
                t.epoch
            });
            // Expire, and find the next deadline; the group's caches are let go before
            // sleeping (the group, and so its list, may drop meanwhile: the timer then exits).
            let next = caches.upgrade().map(|caches| expire_all(&caches, uncaught));
            let now = self.runtime.now();
            let next = self.state.with(|t| match next {
                _ if t.epoch != seen => Next::Again,
                None | Some(None) => {
                    t.running = false;
                    Next::Exit
                }
                Some(Some(deadline)) => {
                    t.armed = Armed::Until(deadline);
                    self.armed_at.store(encode(deadline), Relaxed);
                    t.waiting = true;
                    Next::Sleep(deadline.map(|d| d.saturating_sub(now)))
                }
            });
            match next {
                Next::Again => {}
                Next::Exit => break,
                Next::Sleep(timeout) => {
                    // A timeout is the deadline: look again either way.
                    let _ = self.state.wait_until(timeout, |t| (t.epoch != seen).then_some(()));
                    self.state.with(|t| t.waiting = false);
                }
            }
        }
        report::<R>(uncaught, || tracing::debug!("keep-alive timer exited"));
    }
}

/// Runs a report of the timer thread (user code: the `tracing` subscriber), a panic of it
/// caught and dropped: nothing may end the thread while the group counts it running
/// (`uncaught`: the C-P6t mutant, which lets the panic end it).
fn report<R: Runtime>(uncaught: bool, f: impl FnOnce()) {
    if uncaught {
        f();
    } else {
        let _ = R::catch_unwind(f);
    }
}

// Historical bugs: the bodies of the switches above (see `crate::mutants`).
impl<R: Runtime> ExpiryTimer<R> {
    /// W-12x (`timer-start-split`): whether a timer runs is read in one critical section and
    /// the running one is poked in another: a timer that decides to exit between the two (it
    /// found no keep-alive) takes the poke for nothing, and the new keep-alive has no timer.
    fn start_split(self: &Arc<Self>, caches: &Arc<Members<R>>) {
        let spawn = self.state.with(|t| {
            let spawn = !t.running;
            if spawn {
                t.running = true;
                t.armed = Armed::Looking;
            }
            spawn
        });
        if spawn {
            self.spawn(caches);
        } else {
            self.poke(None, Mutant::LOST_WAKEUP_KEEP_ALIVE_SET);
        }
    }
}

/// Runs expiry on every cache of `caches` that has a keep-alive. `None`: no cache has one (the
/// timer exits); `Some(None)`: nothing idle to wait for; `Some(Some(d))`: the earliest deadline.
fn expire_all<R: Runtime>(caches: &Arc<Members<R>>, uncaught: bool) -> Option<Option<Duration>> {
    let mut next: Option<Option<Duration>> = None;
    for cache in caches.all() {
        let deadline = R::catch_unwind(|| cache.expire_for_timer()).unwrap_or_else(|_| {
            let device = cache.device();
            report::<R>(uncaught, || tracing::error!(device, "user code panicked during keep-alive expiry"));
            // Look again at once (the evicted records are gone: a panicking `Drop` still frees
            // them). Nothing here may run user code again, outside the catch.
            Some(Some(Duration::ZERO))
        });
        // Dropping the last reference to a cache runs its user code too.
        let _ = R::catch_unwind(move || drop(cache));
        next = match (next, deadline) {
            (a, None) => a,
            (None, b) => b,
            (Some(a), Some(b)) => Some(earliest(a, b)),
        };
    }
    next
}

/// A deadline as `ExpiryTimer::armed_at` holds it: nanoseconds plus one (saturating at
/// `u64::MAX`, which a release never trusts), 0 for none.
fn encode(deadline: Option<Duration>) -> u64 {
    deadline.map_or(0, |d| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX).saturating_add(1))
}

/// The earlier of two optional deadlines (`None` is never).
fn earliest(a: Option<Duration>, b: Option<Duration>) -> Option<Duration> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}
