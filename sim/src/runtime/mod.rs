//! Model-checking runtimes: the [`Runtime`] facade of `resident` backed by shuttle or loom,
//! plus what scenarios need on top (threads, atomics, a way to let time pass).
//!
//! # Time
//! Neither checker models time, so these runtimes own it. A bounded wait never blocks: it
//! polls its condition, yielding to the scheduler between polls (a sound over-approximation of
//! a condition variable, which may always wake spuriously), and may time out between any two
//! polls:
//! - under shuttle, each poll of a bounded wait times out with a probability drawn from the
//!   checker's RNG, so the choice is part of the recorded schedule and replays exactly;
//! - under loom, which has no random choice, a *timer thread* moves the logical clock past
//!   every deadline, and loom explores every place that move can happen.
//!
//! Unbounded waits never time out. Scenarios that do not explore timeouts leave them off, as a
//! production system with generous timeouts would.

/// What the shuttle and loom runtimes share word for word but for the checker crate's name: the
/// counter, and the thread half of [`SimRuntime`] (expanded inside each `impl SimRuntime`).
macro_rules! checker_threads {
    (counter: $krate:ident) => {
        impl $crate::runtime::Counter for $krate::sync::atomic::AtomicUsize {
            fn add(&self, n: usize) -> usize {
                self.fetch_add(n, $krate::sync::atomic::Ordering::SeqCst)
            }
            fn sub(&self, n: usize) -> usize {
                self.fetch_sub(n, $krate::sync::atomic::Ordering::SeqCst)
            }
            fn get(&self) -> usize {
                self.load($krate::sync::atomic::Ordering::SeqCst)
            }
        }
    };
    (threads: $krate:ident) => {
        type Handle<T: Send + 'static> = $krate::thread::JoinHandle<T>;
        type Counter = $krate::sync::atomic::AtomicUsize;

        const NAME: &'static str = stringify!($krate);

        fn spawn<T, F>(&self, name: &str, f: F) -> Self::Handle<T>
        where
            T: Send + 'static,
            F: FnOnce() -> T + Send + 'static,
        {
            $krate::thread::Builder::new()
                .name(name.to_owned())
                .spawn(f)
                .expect("checker threads need no OS resources")
        }

        fn join<T: Send + 'static>(handle: Self::Handle<T>) -> std::thread::Result<T> {
            handle.join()
        }

        fn yield_now() {
            $krate::thread::yield_now();
        }

        fn thread_name() -> Option<String> {
            $krate::thread::current().name().map(str::to_owned)
        }

        fn counter_for_model() -> Self::Counter {
            $krate::sync::atomic::AtomicUsize::new(0)
        }
    };
}

/// Counts the monitors the current checker thread holds, in a checker thread-local.
macro_rules! held_monitors {
    ($krate:ident) => {
        $krate::thread_local! {
            static HELD: std::cell::Cell<usize> = std::cell::Cell::new(0);
        }

        /// Marks one monitor held by this thread until dropped (unwinding included).
        pub(super) struct Held(());

        impl Held {
            pub(super) fn enter() -> Self {
                let _ = HELD.try_with(|h| h.set(h.get() + 1));
                Held(())
            }

            pub(super) fn count() -> usize {
                HELD.try_with(std::cell::Cell::get).unwrap_or(0)
            }

            /// Runs `f` under the guard of a try-lock that got the lock (poisoned or not),
            /// counted as held; `None` if the lock was busy.
            pub(super) fn try_run<G, T, U>(
                attempt: std::sync::TryLockResult<G>,
                f: impl FnOnce(&mut T) -> U,
            ) -> Option<U>
            where
                G: std::ops::DerefMut<Target = T>,
            {
                let mut guard = match attempt {
                    Ok(guard) => guard,
                    Err(std::sync::TryLockError::Poisoned(poisoned)) => poisoned.into_inner(),
                    Err(std::sync::TryLockError::WouldBlock) => return None,
                };
                let _held = Held::enter();
                Some(f(&mut guard))
            }
        }

        impl Drop for Held {
            fn drop(&mut self) {
                let _ = HELD.try_with(|h| h.set(h.get().saturating_sub(1)));
            }
        }
    };
}

mod loom_rt;
mod shuttle_rt;

use resident::runtime::Runtime;

pub use loom_rt::LoomRuntime;
pub use shuttle_rt::ShuttleRuntime;

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
    /// Join handle of a spawned checker thread.
    type Handle<T: Send + 'static>: Send;
    /// The checker's atomic counter.
    type Counter: Counter;

    /// Which checker this is, as written in replay files (`shuttle` or `loom`).
    const NAME: &'static str;

    /// Creates the runtime for one execution; `timeouts` says whether bounded waits may expire,
    /// `mutants` which historical bugs the code under test switches back on.
    fn for_execution(timeouts: bool, mutants: crate::mutant_set::MutantSet) -> Self;

    /// Spawns a named checker thread.
    fn spawn<T, F>(&self, name: &str, f: F) -> Self::Handle<T>
    where
        T: Send + 'static,
        F: FnOnce() -> T + Send + 'static;

    /// Joins a checker thread, returning its panic payload if it panicked.
    fn join<T: Send + 'static>(handle: Self::Handle<T>) -> std::thread::Result<T>;

    /// Lets the scheduler run another thread.
    fn yield_now();

    /// The name of the running checker thread.
    fn thread_name() -> Option<String>;

    /// A new counter starting at zero.
    fn counter(&self) -> Self::Counter {
        Self::counter_for_model()
    }

    /// A new counter starting at zero, for code that has no runtime at hand.
    fn counter_for_model() -> Self::Counter;

    /// Moves the logical clock forward by `by` (a scenario letting time pass, for keep-alive).
    fn advance_clock(&self, by: std::time::Duration);

    /// Starts whatever makes deadlines pass (loom's timer thread), if this execution explores
    /// timeouts and the runtime needs a thread for it.
    fn start_time(&self) -> Option<Self::Handle<()>>;

    /// How many of this runtime's monitors the calling checker thread holds right now. Scripted
    /// user code (loaders, unloads, weights' and copies' destructors, callbacks) checks that it
    /// is zero: user code never runs inside an internal monitor.
    fn monitors_held() -> usize;
}
