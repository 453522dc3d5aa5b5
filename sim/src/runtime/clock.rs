//! The logical clock of one execution: pending deadlines, the timer task that fires them, and
//! (in [`Time::Auto`]) the count of scenario threads that can still make progress.
//!
//! A bounded wait registers `now + timeout` with a fresh sequence number; the timer task fires
//! the smallest `(deadline, seq)` first, so a shorter timeout always expires before a longer one
//! registered with it, and ties go in registration order. Firing moves `now` to the deadline
//! (never backwards), marks the waiter expired and wakes it (only it) **under its monitor's
//! gate**, where every sleeper looks at its entry, so the expiry cannot itself be a lost
//! wakeup. Expiry is the checker choosing to run the timer:
//! an ordinary, replayable step that every strategy explores.

use std::collections::BTreeMap;
use std::sync::Weak;
use std::sync::atomic::{AtomicU64, Ordering};

use super::checker::Checker;

/// When bounded waits may expire in an execution.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Time {
    /// Never: a bounded wait is an unbounded one (no timer task runs).
    Off,
    /// Only once every scenario thread is blocked in a wait or finished, as a generous timeout
    /// would in production. A waiter woken by its deadline whose condition already holds is a
    /// violation: the state changed and nobody notified it (a lost wakeup).
    Auto,
    /// At any scheduling point while a deadline is pending: timeouts race everything.
    Any,
}

impl Time {
    /// The name used in `resident-sim list`.
    pub fn name(self) -> &'static str {
        match self {
            Time::Off => "off",
            Time::Auto => "auto",
            Time::Any => "any",
        }
    }
}

/// Something a deadline wakes: a sim monitor with a waiter registered.
pub(super) trait Expire: Send + Sync {
    /// Marks `seq` fired and wakes the waiter that set it, under the monitor's gate.
    fn expire(&self, seq: u64);
}

/// A registered deadline: `(deadline in nanoseconds, seq)`.
pub(super) type Deadline = (u64, u64);

/// Thread bookkeeping for [`Time::Auto`].
#[derive(Debug, Default)]
struct Thread {
    joined_by_waiter: bool,
    finished: bool,
}

/// The timer's state, behind the checker's mutex (lock order: a monitor, then this).
pub(super) struct Timers {
    pending: BTreeMap<Deadline, Weak<dyn Expire>>,
    /// Fired deadlines not yet forgotten, by seq: the number of deadlines fired up to and
    /// including each.
    fired: BTreeMap<u64, u64>,
    /// Deadlines fired so far.
    expiries: u64,
    next_seq: u64,
    /// Scenario threads that are neither blocked in a sim wait nor finished (Auto only).
    running: usize,
    threads: BTreeMap<usize, Thread>,
    timer_waiting: bool,
    shutdown: bool,
}

/// The clock and timer of one execution.
pub(super) struct Clock<C: Checker> {
    pub(super) time: Time,
    /// Logical nanoseconds. Written only by the timer (a `fetch_max`) and `advance`
    /// (a `fetch_add`), read without a scheduling point (reading a clock synchronizes nothing).
    now: AtomicU64,
    /// Monitor operations so far (no scheduling point): if none happened between a deadline
    /// firing and its waiter's check, the state the waiter found is the state every blocked
    /// thread left.
    activity: AtomicU64,
    /// [`Timers::expiries`], readable without the timers' mutex (a scheduling point).
    expiries: AtomicU64,
    timers: C::Mutex<Timers>,
    wake_timer: C::Condvar,
    /// Per thread name: its waits, counted with plain std bookkeeping (no scheduling point), read
    /// by checks of whole calls.
    waits: std::sync::Mutex<BTreeMap<String, Waits>>,
}

/// One thread's waits so far.
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct Waits {
    /// Bounded waits that ended by their deadline.
    pub(super) timed_out: u64,
    /// Waits that blocked (found their condition false and slept, bounded or not).
    pub(super) blocked: u64,
    /// The number of deadlines fired in the execution up to and including the one that ended
    /// the last of its bounded waits that timed out (0: none did).
    pub(super) last_timeout: u64,
}

impl<C: Checker> Clock<C> {
    pub(super) fn new(time: Time) -> Self {
        let timers = Timers {
            pending: BTreeMap::new(),
            fired: BTreeMap::new(),
            expiries: 0,
            next_seq: 0,
            running: 1,
            threads: BTreeMap::new(),
            timer_waiting: false,
            shutdown: false,
        };
        Self {
            time,
            now: AtomicU64::new(0),
            activity: AtomicU64::new(0),
            expiries: AtomicU64::new(0),
            timers: C::mutex(timers),
            wake_timer: C::condvar(),
            waits: std::sync::Mutex::default(),
        }
    }

    /// Counts a wait of `thread` into `count`.
    fn count(&self, thread: String, count: impl FnOnce(&mut Waits)) {
        count(
            self.waits.lock().unwrap_or_else(std::sync::PoisonError::into_inner).entry(thread).or_default(),
        );
    }

    /// Counts a bounded wait of `thread` that ended by the deadline fired `at` (as
    /// [`Clock::fired`] numbers it).
    pub(super) fn timed_out(&self, thread: String, at: u64) {
        self.count(thread, |w| {
            w.timed_out += 1;
            w.last_timeout = at;
        });
    }

    /// Deadlines fired so far in the execution (read without a scheduling point).
    pub(super) fn expiries(&self) -> u64 {
        self.expiries.load(Ordering::SeqCst)
    }

    /// Counts a wait of `thread` that blocked.
    pub(super) fn blocked(&self, thread: String) {
        self.count(thread, |w| w.blocked += 1);
    }

    /// The waits of `thread` so far.
    pub(super) fn waits_of(&self, thread: &str) -> Waits {
        self.waits
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .get(thread)
            .copied()
            .unwrap_or_default()
    }

    pub(super) fn now(&self) -> u64 {
        self.now.load(Ordering::SeqCst)
    }

    /// Counts one monitor operation.
    pub(super) fn touch(&self) {
        self.activity.fetch_add(1, Ordering::SeqCst);
    }

    /// Monitor operations so far.
    pub(super) fn activity(&self) -> u64 {
        self.activity.load(Ordering::SeqCst)
    }

    /// Moves the clock forward by `nanos` in one atomic step.
    pub(super) fn advance(&self, nanos: u64) {
        let _ =
            self.now.fetch_update(Ordering::SeqCst, Ordering::SeqCst, |now| Some(now.saturating_add(nanos)));
    }

    fn counts_threads(&self) -> bool {
        self.time == Time::Auto
    }

    /// Wakes the timer if it waits and may now have something to do.
    fn kick(&self, t: &mut Timers) {
        if t.timer_waiting && (t.shutdown || self.ready(t)) {
            t.timer_waiting = false;
            C::notify_all(&self.wake_timer);
        }
    }

    fn ready(&self, t: &Timers) -> bool {
        !t.pending.is_empty() && (self.time == Time::Any || t.running == 0)
    }

    /// Registers a deadline `timeout` from now for `target`; `None` when time is off.
    pub(super) fn register(&self, timeout: u64, target: Weak<dyn Expire>) -> Option<Deadline> {
        if self.time == Time::Off {
            return None;
        }
        let mut t = C::lock(&self.timers);
        let deadline = (self.now().saturating_add(timeout), t.next_seq);
        t.next_seq += 1;
        t.pending.insert(deadline, target);
        self.kick(&mut t);
        Some(deadline)
    }

    /// Whether `deadline` fired: if so, how many deadlines had fired when it did (itself
    /// included).
    pub(super) fn fired(&self, deadline: Deadline) -> Option<u64> {
        C::lock(&self.timers).fired.get(&deadline.1).copied()
    }

    /// Forgets `deadline`, fired or not (its wait is over).
    pub(super) fn forget(&self, deadline: Deadline) {
        let mut t = C::lock(&self.timers);
        t.pending.remove(&deadline);
        t.fired.remove(&deadline.1);
    }

    /// A scenario thread is about to block in a wait (Auto only).
    pub(super) fn block(&self) {
        if self.counts_threads() {
            let mut t = C::lock(&self.timers);
            t.running -= 1;
            self.kick(&mut t);
        }
    }

    /// `n` waiters were woken: they can run again (Auto only). Called under their monitor.
    pub(super) fn woke(&self, n: usize) {
        if self.counts_threads() && n > 0 {
            C::lock(&self.timers).running += n;
        }
    }

    /// A scenario thread was spawned; returns its id (Auto only counts it).
    pub(super) fn spawned(&self) -> usize {
        let mut t = C::lock(&self.timers);
        let id = t.threads.len();
        t.threads.insert(id, Thread::default());
        if self.counts_threads() {
            t.running += 1;
        }
        id
    }

    /// Scenario thread `id` ended; a thread joining it can run again.
    pub(super) fn finished(&self, id: usize) {
        let mut t = C::lock(&self.timers);
        let joined = t.threads.get_mut(&id).is_some_and(|thread| {
            thread.finished = true;
            thread.joined_by_waiter
        });
        if self.counts_threads() {
            t.running = t.running - 1 + usize::from(joined);
            self.kick(&mut t);
        }
    }

    /// The running thread is about to join thread `id`.
    pub(super) fn joining(&self, id: usize) {
        let mut t = C::lock(&self.timers);
        let Some(thread) = t.threads.get_mut(&id) else { return };
        if thread.finished {
            return;
        }
        thread.joined_by_waiter = true;
        if self.counts_threads() {
            t.running -= 1;
            self.kick(&mut t);
        }
    }

    /// The timer task: fires the earliest deadline whenever it may, until shut down.
    pub(super) fn run_timer(&self) {
        loop {
            let mut t = C::lock(&self.timers);
            while !t.shutdown && !self.ready(&t) {
                t.timer_waiting = true;
                t = C::wait(&self.wake_timer, t);
            }
            if t.shutdown {
                return;
            }
            let (deadline, target) = t.pending.pop_first().expect("ready means a deadline is pending");
            self.now.fetch_max(deadline.0, Ordering::SeqCst);
            drop(t);
            if let Some(target) = target.upgrade() {
                target.expire(deadline.1);
            }
        }
    }

    /// Records `seq` fired (under its monitor, from [`Expire::expire`]), and counts it.
    pub(super) fn mark_fired(&self, seq: u64) {
        let mut t = C::lock(&self.timers);
        t.expiries += 1;
        let n = t.expiries;
        t.fired.insert(seq, n);
        self.expiries.store(n, Ordering::SeqCst);
    }

    /// Ends the timer task (every scenario thread has finished).
    pub(super) fn shutdown(&self) {
        let mut t = C::lock(&self.timers);
        t.shutdown = true;
        self.kick(&mut t);
    }
}
