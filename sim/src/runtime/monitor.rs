//! [`SimMonitor`]: a monitor of the [`Sim`] runtime, with waits as a production condition
//! variable has them.
//!
//! A production monitor (`parking_lot`'s mutex and condition variable) notifies without its
//! mutex: a notify that comes while a waiter holds the mutex between its look at the state and
//! its wait is lost. Code that changes what a waiter looks at outside the mutex must therefore
//! pass through the mutex before it notifies. So the sim notifies without the monitor's mutex
//! too, and under shuttle a waiter may be preempted after its look, still holding the mutex,
//! before it enrols as a waiter: a notify that lands there is lost as in production.
//!
//! Each waiter enrols in a list of sleepers (plain bookkeeping, never held across a scheduling
//! point), still holding the monitor's mutex, then lets the monitor go and sleeps on a gate of
//! the checker's until its own entry is marked woken: by a notify, or by its own deadline (a
//! deadline wakes only the waiter that set it, as a timed wait's does in production). A notify
//! marks and counts exactly the waiters it woke, under the gate, which the clock needs to know
//! when every thread is blocked.

use std::collections::VecDeque;
use std::time::Duration;

use resident::runtime::{Arc, Monitor, TimedOut};

use super::checker::Checker;
use super::clock::{Deadline, Expire, Time};
use super::sim::Sim;

fn nanos(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

/// Counts one sim monitor held by this checker thread until dropped (unwinding included).
pub(super) struct Held<C: Checker>(std::marker::PhantomData<C>);

impl<C: Checker> Held<C> {
    pub(super) fn enter() -> Self {
        C::held(1);
        Self(std::marker::PhantomData)
    }
}

impl<C: Checker> Drop for Held<C> {
    fn drop(&mut self) {
        C::held(-1);
    }
}

/// One waiter enrolled: its number, its deadline's sequence number, whether it counts as
/// blocked on the clock, and what woke it.
struct Sleeper {
    id: u64,
    deadline: Option<u64>,
    blocked: bool,
    woken: Option<Woken>,
}

/// What ended a sleep.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Woken {
    Notified,
    /// Its own deadline fired: at the clock's activity count then.
    Expired {
        at: u64,
    },
}

/// Who waits on a monitor, and the notifies sent so far.
#[derive(Default)]
struct Waits {
    next: u64,
    /// Enrolled waiters, oldest first (a `notify_one` wakes the oldest, as `parking_lot` does).
    sleepers: VecDeque<Sleeper>,
    notifies: u64,
}

impl Waits {
    /// Marks the first sleeper `pick` accepts (every one, with `all`) woken by `why`, unless
    /// woken already; returns how many of them were blocked on the clock.
    fn wake(&mut self, all: bool, why: Woken, pick: impl Fn(&Sleeper) -> bool) -> usize {
        let mut blocked = 0;
        for sleeper in self.sleepers.iter_mut().filter(|s| s.woken.is_none() && pick(s)) {
            sleeper.woken = Some(why);
            blocked += usize::from(sleeper.blocked);
            if !all {
                break;
            }
        }
        blocked
    }
}

struct Inner<C: Checker, T: Send + 'static> {
    value: C::Mutex<T>,
    /// Taken to mark sleepers woken and to sleep: a sleeper looks at its entry under it.
    gate: C::Mutex<()>,
    /// Plain bookkeeping: only ever locked for a few instructions, never across a scheduling
    /// point (so it adds none).
    waits: std::sync::Mutex<Waits>,
    woken: C::Condvar,
    rt: Sim<C>,
}

impl<C: Checker, T: Send + 'static> Inner<C, T> {
    fn waits(&self) -> std::sync::MutexGuard<'_, Waits> {
        self.waits.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Marks sleepers woken under the gate (see [`Waits::wake`]) and wakes them.
    fn wake(&self, all: bool, why: Woken, pick: impl Fn(&Sleeper) -> bool) {
        let gate = C::lock(&self.gate);
        let blocked = self.waits().wake(all, why, pick);
        if blocked > 0 {
            self.rt.clock().woke(blocked);
        }
        C::notify_all(&self.woken);
        drop(gate);
    }
}

impl<C: Checker, T: Send + 'static> Expire for Inner<C, T> {
    /// Wakes the waiter whose deadline `seq` is, if it still sleeps.
    fn expire(&self, seq: u64) {
        let gate = C::lock(&self.gate);
        let clock = self.rt.clock();
        clock.mark_fired(seq);
        let at = clock.activity();
        drop(gate);
        self.wake(true, Woken::Expired { at }, |s| s.deadline == Some(seq));
    }
}

/// [`Monitor`] of the [`Sim`] runtime: the checker's mutex, notified without it as a production
/// condition variable is. A waiter enrols while it holds the mutex and sleeps on a gate of its
/// own until a notify, or its own deadline, marks it woken; under shuttle it may be preempted
/// between its look at the state and its enrolment, where a notify is lost as in production.
pub struct SimMonitor<C: Checker, T: Send + 'static> {
    inner: Arc<Inner<C, T>>,
}

impl<C: Checker, T: Send + 'static> SimMonitor<C, T> {
    pub(super) fn new(rt: &Sim<C>, value: T) -> Self {
        let inner = Inner {
            value: C::mutex(value),
            gate: C::mutex(()),
            waits: std::sync::Mutex::default(),
            woken: C::condvar(),
            rt: rt.clone(),
        };
        Self { inner: Arc::new(inner) }
    }

    /// Counts a notify (a monitor operation) and wakes every sleeper (`all`) or the oldest.
    fn notify(&self, all: bool) {
        self.inner.rt.clock().touch();
        self.inner.waits().notifies += 1;
        self.inner.wake(all, Woken::Notified, |_| true);
    }

    /// Enrols this thread (it holds the monitor's mutex, `value`), lets the monitor go and
    /// sleeps until its entry is woken; returns the monitor's mutex taken again, and whether
    /// only its own deadline woke it with no notify sent since it enrolled and no monitor
    /// operation anywhere since the deadline fired (the waiter then sees the state exactly as
    /// it was while every thread was blocked).
    fn sleep<'a>(&'a self, value: C::Guard<'a, T>, deadline: Option<Deadline>) -> (C::Guard<'a, T>, bool) {
        let inner = &self.inner;
        let clock = inner.rt.clock();
        // Production's window: a notify sent now, while this thread holds the mutex past its
        // look, reaches nobody.
        if C::PREEMPTS_BEFORE_WAIT {
            C::yield_now();
        }
        let (id, notifies) = {
            let mut waits = inner.waits();
            let id = waits.next;
            waits.next += 1;
            waits.sleepers.push_back(Sleeper {
                id,
                deadline: deadline.map(|d| d.1),
                blocked: false,
                woken: None,
            });
            (id, waits.notifies)
        };
        // A wait that enrolled waited, whether or not a notify comes before it sleeps.
        clock.blocked(C::thread_name().unwrap_or_default());
        drop(value);
        let mut gate = C::lock(&inner.gate);
        // A deadline that fired before the enrolment found nobody to wake (and the waiter was
        // running then: it did not fire while every thread was blocked).
        if deadline.is_some_and(|d| clock.fired(d).is_some()) {
            inner.waits().wake(true, Woken::Expired { at: u64::MAX }, |s| s.id == id);
        }
        let woken = loop {
            let mut waits = inner.waits();
            let at = waits.sleepers.iter().position(|s| s.id == id).expect("an enrolled waiter");
            if let Some(woken) = waits.sleepers[at].woken {
                waits.sleepers.remove(at);
                break woken;
            }
            if !waits.sleepers[at].blocked {
                waits.sleepers[at].blocked = true;
                drop(waits);
                clock.block();
            } else {
                drop(waits);
            }
            gate = C::wait(&inner.woken, gate);
        };
        drop(gate);
        let timer_only = match woken {
            Woken::Expired { at } => inner.waits().notifies == notifies && clock.activity() == at,
            Woken::Notified => false,
        };
        (C::lock(&inner.value), timer_only)
    }
}

impl<C: Checker, T: Send + 'static> Monitor<T> for SimMonitor<C, T> {
    fn with<U>(&self, f: impl FnOnce(&mut T) -> U) -> U {
        let mut value = C::lock(&self.inner.value);
        self.inner.rt.clock().touch();
        let _held = Held::<C>::enter();
        f(&mut value)
    }

    fn try_with<U>(&self, f: impl FnOnce(&mut T) -> U) -> Option<U> {
        let mut value = C::try_lock(&self.inner.value)?;
        self.inner.rt.clock().touch();
        let _held = Held::<C>::enter();
        Some(f(&mut value))
    }

    /// Wakes every waiter enrolled, without the monitor's mutex.
    fn notify_all(&self) {
        self.notify(true);
    }

    /// Wakes the oldest waiter enrolled and not yet woken, without the monitor's mutex.
    fn notify_one(&self) {
        self.notify(false);
    }

    fn wait_until<U>(
        &self,
        timeout: Option<Duration>,
        mut f: impl FnMut(&mut T) -> Option<U>,
    ) -> Result<U, TimedOut> {
        let inner = &self.inner;
        let clock = inner.rt.clock();
        let mut value = C::lock(&inner.value);
        let mut deadline: Option<Deadline> = None;
        // Whether the last wake-up came from this wait's deadline alone (see `sleep`).
        let mut timer_only = false;
        let result = loop {
            let done = {
                let _held = Held::<C>::enter();
                f(&mut value)
            };
            if let Some(done) = done {
                if timer_only && clock.time == Time::Auto {
                    drop(value);
                    crate::violation::Violation::raise(
                        "lost-wakeup",
                        "a deadline woke a waiter whose condition already held: the state changed \
                         while every thread was blocked, and nothing notified"
                            .to_owned(),
                    );
                }
                break Ok(done);
            }
            // A zero timeout never waits, whatever the time mode: as in production, the one
            // look decides. (Not counted as a deadline that fired while every thread was
            // blocked: it fired at once.)
            if timeout == Some(Duration::ZERO) {
                break Err(TimedOut);
            }
            if let Some(at) = deadline.and_then(|d| clock.fired(d)) {
                clock.timed_out(C::thread_name().unwrap_or_default(), at);
                break Err(TimedOut);
            }
            if deadline.is_none()
                && let Some(timeout) = timeout
            {
                let target: std::sync::Weak<dyn Expire> = Arc::downgrade(inner) as _;
                deadline = clock.register(nanos(timeout), target);
            }
            if C::spurious_wakeup() {
                drop(value);
                value = C::lock(&inner.value);
                timer_only = false;
                continue;
            }
            (value, timer_only) = self.sleep(value, deadline);
        };
        drop(value);
        if let Some(deadline) = deadline {
            clock.forget(deadline);
        }
        result
    }
}
