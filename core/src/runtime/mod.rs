//! The sync/time facade: the only place where `core` names concrete synchronization primitives.
//!
//! Everything concurrent in this crate is generic over one [`Runtime`]. Production code uses
//! [`StdRuntime`] (parking_lot + `std::time`), the default type parameter of every public type;
//! the `resident-sim` crate supplies runtimes backed by the shuttle and loom model checkers, so
//! one compiled crate serves production and schedule exploration at the same time.
//!
//! The facade is deliberately small. Its main primitive is a [`Monitor`]: a value behind a
//! poison-free mutex that can be waited on for a condition, with an optional timeout. Timeouts
//! belong to the runtime, so a model checker can decide *when* a deadline passes and explore it
//! like any other scheduling event. The other is an [`AtomicWord`], for the read paths that must
//! not serialise their callers (a lease counts itself in its slot's word), and an [`RwLock`]
//! for the registry those paths read. The lock built on a
//! monitor ([`TimedLock`]) lives here too.
//!
//! Closures passed to a monitor run with its mutex held; they must be short and must never call
//! user code, wait, or take another monitor.

mod atomic;
mod observe;
mod rw_lock;
mod signal;
mod std_runtime;
mod timed_lock;

use std::fmt::Debug;
use std::time::Duration;

pub use std::sync::atomic::Ordering;
pub use std::sync::{Arc, Weak};

use crate::mutants::Mutant;
pub use atomic::AtomicWord;
pub use observe::{LineStep, SlotStep};
pub use rw_lock::RwLock;
pub use signal::{Signal, Watch};
pub use std_runtime::StdRuntime;
pub use timed_lock::{TimedLock, TimedLockGuard};

/// A bounded wait ran out of time before its condition held.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TimedOut;

// ---- The runtime ------------------------------------------------------------------------------

/// A source of synchronization primitives and time.
///
/// Implementations must be cheap to clone: every primitive keeps a clone of the runtime that
/// created it, so that the runtime can model time for its waits.
pub trait Runtime: Clone + Debug + Send + Sync + 'static {
    /// The monitor type this runtime provides for values of type `T`.
    type Monitor<T: Send + 'static>: Monitor<T>;

    /// Creates a monitor guarding `value`.
    fn monitor<T: Send + 'static>(&self, value: T) -> Self::Monitor<T>;

    /// The reader-writer lock this runtime provides for values of type `T`.
    type RwLock<T: Send + Sync + 'static>: RwLock<T>;

    /// Creates a reader-writer lock guarding `value`.
    fn rw_lock<T: Send + Sync + 'static>(&self, value: T) -> Self::RwLock<T>;

    /// The atomic word this runtime provides.
    type Atomic: AtomicWord;

    /// Creates an atomic word holding `value`.
    fn atomic(&self, value: u64) -> Self::Atomic;

    /// A sequentially consistent fence (`std::sync::atomic::fence(SeqCst)`), for the one
    /// pattern a monitor cannot cover cheaply: two threads each write one word and then read
    /// the other's ([`Signal::watch`]). The default is the standard library's; a
    /// model-checking runtime must use its checker's own (loom models these fences exactly).
    #[inline]
    fn fence(&self) {
        std::sync::atomic::fence(std::sync::atomic::Ordering::SeqCst);
    }

    /// Whether the calling thread is unwinding a panic: drop guards use it to tell a normal
    /// exit from an unwinding one (and run no user code then, since a second panic would abort).
    /// The default is the standard library's answer, per OS thread; a model-checking runtime
    /// that runs many threads on one OS thread must answer for the checker thread that asks (an
    /// unwinding peer must not make it look unwinding).
    #[inline]
    fn panicking() -> bool
    where
        Self: Sized,
    {
        std::thread::panicking()
    }

    /// Runs `f`, catching a panic that leaves it ([`std::panic::catch_unwind`]; the crate runs
    /// user code this way where a panic must not stop what follows). `f` is taken as unwind-safe
    /// (as with [`std::panic::AssertUnwindSafe`]): a caller must not use what a panic may have
    /// left half-changed. A model-checking runtime notes that the thread is done unwinding it
    /// (see [`Runtime::panicking`]).
    #[inline]
    fn catch_unwind<T>(f: impl FnOnce() -> T) -> std::thread::Result<T>
    where
        Self: Sized,
    {
        std::panic::catch_unwind(std::panic::AssertUnwindSafe(f))
    }

    /// Lets a panic this thread caught go on unwinding from here, where it may leave
    /// ([`std::panic::resume_unwind`]; from a `Drop` that may run while the thread unwinds, use
    /// [`Runtime::resume_unwind`]). A model-checking runtime notes that the thread unwinds.
    #[inline]
    fn resume_caught(payload: Box<dyn std::any::Any + Send>) -> !
    where
        Self: Sized,
    {
        std::panic::resume_unwind(payload)
    }

    /// Time elapsed on this runtime's clock since the runtime was created.
    ///
    /// Production runtimes read the wall clock; model-checking runtimes use a logical clock that
    /// only moves when the checker lets a deadline pass.
    fn now(&self) -> Duration;

    /// Starts a background thread named `name` running `f`, detached: the keep-alive timer of
    /// a cache group ([`CacheGroup`](crate::cache::CacheGroup)) is the one user. The thread
    /// must not keep anything alive by itself: it holds weak references and exits on its own.
    ///
    /// Production runtimes start an OS thread; model-checking runtimes start a checker thread
    /// that the execution joins before it ends, so a thread that never exits is a deadlock the
    /// checker reports.
    fn spawn_background(&self, name: &str, f: Box<dyn FnOnce() + Send + 'static>) -> std::io::Result<()>;

    /// Whether the historical bug `mutant` is switched back on.
    ///
    /// Only model-checking runtimes ever answer `true` (for the switches a scenario turned
    /// on). The default, which [`StdRuntime`] keeps, is the constant `false`: the optimizer
    /// removes every historical-bug body, and production types carry no mutant state.
    #[inline(always)]
    fn mutant(&self, mutant: Mutant) -> bool {
        let _ = mutant;
        false
    }

    /// Reports a broken internal invariant that the code survives (it saturates instead of
    /// wrapping), such as a charge debited twice. Only a switched-on mutant can reach one.
    ///
    /// Called outside every monitor, possibly from a `Drop`. The default fails a debug build
    /// (it is a defect of this crate) and logs in a release build; model-checking runtimes
    /// record it as a violation of the running execution instead of panicking.
    fn defect(&self, what: &'static str) {
        tracing::error!(defect = what, "internal invariant broken");
        debug_assert!(false, "internal invariant broken: {what}");
    }

    /// Observes `step` of the model slot named `slot` (unique among live slots; a key may be
    /// reused after [`SlotStep::Created`]), so that a checker can verify the designation
    /// protocol's fairness (SPEC 2.14) at the exact point each step happens.
    ///
    /// Called under the slot's use-state monitor: an implementation must not block, wait or
    /// use this runtime's primitives. The default, which [`StdRuntime`] keeps, does nothing and
    /// is removed by the optimizer; model-checking runtimes keep ghost state and record a
    /// violation of the running execution.
    #[inline(always)]
    fn observe(&self, slot: usize, step: SlotStep) {
        let _ = (slot, step);
    }

    /// Observes `step` of the waiting line named `line` (unique among live lines), so that a
    /// checker can verify that lines serve in arrival order (SPEC 2.14). Called under the
    /// monitor that keeps the line, with the same rules and default as [`Runtime::observe`].
    #[inline(always)]
    fn observe_line(&self, line: usize, step: LineStep) {
        let _ = (line, step);
    }

    /// A scheduling point: a model-checking runtime may run another thread here, so that an
    /// application's own code between two facade calls (a read and the write that depends on
    /// it, with no lock between) is explored as a place where threads interleave. Production
    /// runtimes do nothing (the default, removed by the optimizer).
    #[inline(always)]
    fn schedule_point(&self) {}

    /// Checks an application's own invariant `name` inside production code: `holds` is asked
    /// only by a model-checking runtime, which fails the running execution with a violation
    /// named `name` when it answers `false`. The default never calls it, so the check costs
    /// nothing in production. `holds` may read state (through this runtime's monitors too) but
    /// must not change it or wait; call `check` outside every monitor.
    #[inline(always)]
    fn check(&self, name: &'static str, holds: impl FnOnce() -> bool) {
        let _ = (name, holds);
    }

    /// Lets a caught panic of user code go on unwinding ([`std::panic::resume_unwind`]).
    ///
    /// The crate calls it only where the panic may leave: never from a `Drop` that runs while
    /// the thread already unwinds, where it would abort the process. Production runtimes never
    /// return. A model-checking runtime that is asked to resume on a thread that is already
    /// unwinding records the abort it would cause as a violation and returns instead (the
    /// payload dropped), so that a checker can report what production cannot survive.
    fn resume_unwind(&self, payload: Box<dyn std::any::Any + Send>) {
        std::panic::resume_unwind(payload)
    }
}

// ---- The monitor ------------------------------------------------------------------------------

/// A value behind a poison-free mutex, with condition waits.
///
/// A panic inside a closure never poisons the monitor: the next caller sees the value as the
/// panicking closure left it, which is why closures run under the lock must keep the value
/// consistent at every point where they can panic (in this crate: they never call user code).
pub trait Monitor<T>: Send + Sync {
    /// Runs `f` with exclusive access to the value.
    fn with<U>(&self, f: impl FnOnce(&mut T) -> U) -> U;

    /// Runs `f` with exclusive access to the value only if nobody holds the monitor right now;
    /// `None` (without waiting) otherwise.
    fn try_with<U>(&self, f: impl FnOnce(&mut T) -> U) -> Option<U>;

    /// Wakes every thread waiting in [`Monitor::wait_until`] so that it re-checks its condition.
    fn notify_all(&self);

    /// Wakes one thread waiting in [`Monitor::wait_until`], if any: for a monitor whose waiters
    /// all wait for the same condition, so that whichever wakes can use the change, and one
    /// that finds it used already waits again for the next change, which notifies again. (A
    /// waiter whose timeout ends as it is woken still looks once more, so the wake-up is never
    /// lost to it.) The provided default wakes every waiter, which is correct but costlier.
    fn notify_one(&self) {
        self.notify_all();
    }

    /// Waits until `f` returns `Some`, re-running it after every notification (and possibly
    /// spuriously), each time with exclusive access to the value. `f` runs once on entry and
    /// once per look after that: a second run means the first look failed (callers count
    /// runs to tell a wait from an uncontended pass).
    ///
    /// With `timeout: Some(d)` the wait gives up with [`TimedOut`] once `d` has passed on the
    /// runtime's clock; `f` has then run at least once and has not returned `Some`. With
    /// `None` the wait is unbounded.
    fn wait_until<U>(
        &self,
        timeout: Option<Duration>,
        f: impl FnMut(&mut T) -> Option<U>,
    ) -> Result<U, TimedOut>;
}
