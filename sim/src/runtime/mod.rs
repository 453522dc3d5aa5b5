//! Model-checking runtimes: the [`Runtime`] facade of `resident` backed by shuttle or loom,
//! plus what scenarios need on top (threads, atomics, a way to let time pass).
//!
//! # Waits
//! A sim monitor is the checker's own mutex and condition variable ([`Sim`]); no wait polls.
//! A notify that nobody sends is lost for real, and the checker reports the thread that never
//! wakes. shuttle never wakes a waiter spuriously, so under shuttle a wait draws an occasional
//! spurious wakeup from the checker's RNG (recorded in the schedule) to catch code that does not
//! re-check its condition; loom has no data choices and never does.
//!
//! # Time
//! Neither checker models time, so these runtimes own it: a logical clock of pending deadlines
//! and one timer task per execution that fires the earliest first ([`Time`] says when it may).
//! Unbounded waits never time out.

mod checker;
mod clock;
mod monitor;
mod sim;

use resident::runtime::Runtime;

pub use checker::{Checker, LoomChecker, LoomWord, ShuttleChecker, ShuttleWord};
pub use clock::Time;
pub use monitor::SimMonitor;
pub use sim::{Sim, SimHandle, SimRwLock};

use crate::mutant_set::MutantSet;

/// The shuttle-backed runtime.
pub type ShuttleRuntime = Sim<ShuttleChecker>;
/// The loom-backed runtime.
pub type LoomRuntime = Sim<LoomChecker>;

/// An atomic counter of the checker, so that every access is a scheduling point.
pub trait Counter: Send + Sync + 'static {
    /// Adds `n`, returning the previous value.
    fn add(&self, n: usize) -> usize;
    /// Subtracts `n`, returning the previous value.
    fn sub(&self, n: usize) -> usize;
    /// The current value.
    fn get(&self) -> usize;
}

/// A [`Runtime`] that scenarios can drive: threads, atomics, yields and time.
pub trait SimRuntime: Runtime {
    /// Join handle of a spawned scenario thread.
    type Handle<T: Send + 'static>: Send;
    /// The checker's atomic counter.
    type Counter: Counter;

    /// Which checker this is, as written in replay files (`shuttle` or `loom`).
    const NAME: &'static str;

    /// Creates the runtime for one execution: `time` says when bounded waits may expire,
    /// `mutants` which historical bugs the code under test switches back on.
    fn for_execution(time: Time, mutants: MutantSet) -> Self;

    /// Runs `body` (the scenario's main thread) with the execution's timer task running beside
    /// it, then stops the timer.
    fn with_time(&self, body: impl FnOnce());

    /// Spawns a named scenario thread.
    fn spawn<T, F>(&self, name: &str, f: F) -> Self::Handle<T>
    where
        T: Send + 'static,
        F: FnOnce() -> T + Send + 'static;

    /// Joins a scenario thread, returning its panic payload if it panicked.
    fn join<T: Send + 'static>(handle: Self::Handle<T>) -> std::thread::Result<T>;

    /// Joins every thread the code under test started so far ([`Runtime::spawn_background`]: the keep-alive
    /// timer): a scenario checking that such a thread exits while what it serves is still alive.
    /// The execution joins them at its end anyway.
    fn join_background(&self);

    /// Lets the scheduler run another thread.
    fn yield_now();

    /// The name of the running checker thread.
    fn thread_name() -> Option<String>;

    /// The running checker thread's identity, where the checker can tell it from anywhere
    /// (see [`crate::unwinding`]).
    fn current_task() -> Option<usize>;

    /// A new counter starting at zero.
    fn counter(&self) -> Self::Counter {
        Self::counter_for_model()
    }

    /// A new counter starting at zero, for code that has no runtime at hand.
    fn counter_for_model() -> Self::Counter;

    /// Moves the logical clock forward by `by`, in one atomic step (a scenario letting time
    /// pass, for keep-alive).
    fn advance_clock(&self, by: std::time::Duration);

    /// How many of this runtime's monitors the calling checker thread holds right now. Scripted
    /// user code (loaders, unloads, weights' and copies' destructors, callbacks) checks that it
    /// is zero: user code never runs inside an internal monitor.
    fn monitors_held() -> usize;

    /// When bounded waits may expire in this execution.
    fn time(&self) -> Time;

    /// How many bounded waits of the calling thread ended by their deadline so far in this
    /// execution. Under [`Time::Auto`] a deadline fires only while every scenario thread is
    /// blocked, so a call that saw one of its own waits time out and then succeeded found the
    /// state changed without a notify (a lost wakeup that a wait on an epoch cannot see).
    fn timeouts_here(&self) -> u64;

    /// How many waits of the calling thread blocked so far in this execution (found their
    /// condition false and slept, bounded or not). A call with a zero deadline blocks in none
    /// (SPEC 1.10): its one look at each condition decides.
    fn blocked_here(&self) -> u64;

    /// How many deadlines have fired so far in this execution (read without a scheduling
    /// point, so a check may stamp its own events with it).
    fn expiries(&self) -> u64;

    /// Which deadline of the execution (as counted by [`SimRuntime::expiries`]: the first is 1)
    /// ended the calling thread's last bounded wait that timed out; 0 if none did. Under
    /// [`Time::Auto`] every scenario thread was blocked when it fired, so a call that gave up
    /// on that wait decided no earlier than that point.
    fn last_timeout_here(&self) -> u64;
}

impl<C: Checker> SimRuntime for Sim<C> {
    type Handle<T: Send + 'static> = SimHandle<C, T>;
    type Counter = C::Counter;

    const NAME: &'static str = C::NAME;

    fn for_execution(time: Time, mutants: MutantSet) -> Self {
        Sim::new(time, mutants)
    }

    fn with_time(&self, body: impl FnOnce()) {
        Sim::with_time(self, body);
    }

    fn spawn<T, F>(&self, name: &str, f: F) -> SimHandle<C, T>
    where
        T: Send + 'static,
        F: FnOnce() -> T + Send + 'static,
    {
        self.spawn_counted(name, f)
    }

    fn join<T: Send + 'static>(handle: SimHandle<C, T>) -> std::thread::Result<T> {
        handle.join()
    }

    fn join_background(&self) {
        Sim::join_background(self);
    }

    fn yield_now() {
        C::yield_now();
    }

    fn thread_name() -> Option<String> {
        C::thread_name()
    }

    fn current_task() -> Option<usize> {
        C::current_task()
    }

    fn counter_for_model() -> C::Counter {
        C::counter()
    }

    fn advance_clock(&self, by: std::time::Duration) {
        self.clock().advance(u64::try_from(by.as_nanos()).unwrap_or(u64::MAX));
    }

    fn monitors_held() -> usize {
        C::held(0)
    }

    fn time(&self) -> Time {
        self.clock().time
    }

    fn timeouts_here(&self) -> u64 {
        self.clock().waits_of(&C::thread_name().unwrap_or_default()).timed_out
    }

    fn blocked_here(&self) -> u64 {
        self.clock().waits_of(&C::thread_name().unwrap_or_default()).blocked
    }

    fn expiries(&self) -> u64 {
        self.clock().expiries()
    }

    fn last_timeout_here(&self) -> u64 {
        self.clock().waits_of(&C::thread_name().unwrap_or_default()).last_timeout
    }
}
