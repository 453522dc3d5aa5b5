//! [`Checker`]: what the sim runtime needs from a model checker (shuttle or loom), so that one
//! generic runtime ([`Sim`](super::Sim)) serves both.

use std::ops::DerefMut;

use shuttle::rand::Rng;

use resident::runtime::AtomicWord;

use super::Counter;

/// The primitives of one model checker: its mutex, condition variable, threads and atomics.
/// Every operation on them is a scheduling point the checker explores.
pub trait Checker: Send + Sync + 'static {
    /// Which checker this is, as written in replay files.
    const NAME: &'static str;
    /// Whether a sim wait may be preempted between its look at the state and its enrolment as
    /// a waiter (a notify landing there is lost, as in production). Shuttle only: loom keeps
    /// each mutex's value in a std mutex that a guard held across a scheduling point poisons
    /// when another loom thread (on the same OS thread) panics meanwhile, and loom unwraps it.
    const PREEMPTS_BEFORE_WAIT: bool;

    /// The checker's mutex.
    type Mutex<T: Send + 'static>: Send + Sync;
    /// Its guard.
    type Guard<'a, T: Send + 'static>: DerefMut<Target = T>;
    /// The checker's condition variable.
    type Condvar: Send + Sync;
    /// Join handle of a checker thread.
    type Handle<T: Send + 'static>: Send;
    /// The checker's atomic counter.
    type Counter: Counter;
    /// The checker's 64-bit atomic, as the facade's [`AtomicWord`].
    type Word: AtomicWord;

    /// A new mutex.
    fn mutex<T: Send + 'static>(value: T) -> Self::Mutex<T>;
    /// Locks (poison-free: a poisoned lock is taken as it is).
    fn lock<T: Send + 'static>(mutex: &Self::Mutex<T>) -> Self::Guard<'_, T>;
    /// Locks only if free right now.
    fn try_lock<T: Send + 'static>(mutex: &Self::Mutex<T>) -> Option<Self::Guard<'_, T>>;
    /// A new condition variable.
    fn condvar() -> Self::Condvar;
    /// Releases `guard`, blocks until notified, and locks again (no spurious wakeups).
    fn wait<'a, T: Send + 'static>(condvar: &Self::Condvar, guard: Self::Guard<'a, T>) -> Self::Guard<'a, T>;
    /// Wakes every current waiter of `condvar`.
    fn notify_all(condvar: &Self::Condvar);
    /// Wakes one current waiter of `condvar`, if any.
    fn notify_one(condvar: &Self::Condvar);
    /// Whether this wait wakes spuriously, as the facade allows (a recorded, replayable data
    /// choice under shuttle; never under loom, which has no data choices).
    fn spurious_wakeup() -> bool;

    /// Spawns a named checker thread.
    fn spawn<T: Send + 'static>(name: &str, f: impl FnOnce() -> T + Send + 'static) -> Self::Handle<T>;
    /// Joins a checker thread.
    fn join<T: Send + 'static>(handle: Self::Handle<T>) -> std::thread::Result<T>;
    /// Lets the scheduler run another thread.
    fn yield_now();
    /// The running checker thread's name.
    fn thread_name() -> Option<String>;
    /// The running checker thread's identity within its execution, where the checker can tell
    /// it from anywhere without panicking (a panic hook included); `None` where it cannot.
    fn current_task() -> Option<usize>;
    /// A new counter at zero.
    fn counter() -> Self::Counter;
    /// A new atomic word holding `value`.
    fn word(value: u64) -> Self::Word;
    /// The checker's reader-writer lock.
    type RwLock<T: Send + Sync + 'static>: Send + Sync;
    /// A new reader-writer lock.
    fn rw_lock<T: Send + Sync + 'static>(value: T) -> Self::RwLock<T>;
    /// Runs `f` under a read lock (poison-free).
    fn read<T: Send + Sync + 'static, U>(lock: &Self::RwLock<T>, f: impl FnOnce(&T) -> U) -> U;
    /// Runs `f` under the write lock (poison-free).
    fn write<T: Send + Sync + 'static, U>(lock: &Self::RwLock<T>, f: impl FnOnce(&mut T) -> U) -> U;
    /// A sequentially consistent fence of the checker.
    fn fence();

    /// Adds `delta` to the number of sim monitors the running checker thread holds (a checker
    /// thread-local); returns the new count.
    fn held(delta: isize) -> usize;
}

/// One spurious wakeup in this many waits, under shuttle.
const SPURIOUS_ODDS: u32 = 8;

macro_rules! counter {
    ($krate:ident) => {
        impl Counter for $krate::sync::atomic::AtomicUsize {
            fn add(&self, n: usize) -> usize {
                self.fetch_add(n, $krate::sync::atomic::Ordering::SeqCst)
            }
            fn sub(&self, n: usize) -> usize {
                self.fetch_sub(n, $krate::sync::atomic::Ordering::SeqCst)
            }
            /// A read-modify-write, not a load: it reads the latest value in modification order,
            /// so a probe sees every completed update even under loom, which models `SeqCst`
            /// loads more weakly than a global observer needs.
            fn get(&self) -> usize {
                self.fetch_add(0, $krate::sync::atomic::Ordering::SeqCst)
            }
        }
    };
}

/// The checker's `AtomicU64` as the facade's [`AtomicWord`]: every access a scheduling point,
/// at the ordering the code under test names.
macro_rules! word {
    ($word:ident, $krate:ident) => {
        #[doc = concat!("The ", stringify!($krate), " model checker's `AtomicU64`.")]
        #[derive(Debug)]
        pub struct $word($krate::sync::atomic::AtomicU64);

        impl AtomicWord for $word {
            fn load(&self, order: std::sync::atomic::Ordering) -> u64 {
                self.0.load(order)
            }
            fn store(&self, value: u64, order: std::sync::atomic::Ordering) {
                self.0.store(value, order);
            }
            fn fetch_add(&self, value: u64, order: std::sync::atomic::Ordering) -> u64 {
                self.0.fetch_add(value, order)
            }
            fn fetch_sub(&self, value: u64, order: std::sync::atomic::Ordering) -> u64 {
                self.0.fetch_sub(value, order)
            }
            fn fetch_max(&self, value: u64, order: std::sync::atomic::Ordering) -> u64 {
                self.0.fetch_max(value, order)
            }
            fn compare_exchange(
                &self,
                current: u64,
                new: u64,
                success: std::sync::atomic::Ordering,
                failure: std::sync::atomic::Ordering,
            ) -> Result<u64, u64> {
                self.0.compare_exchange(current, new, success, failure)
            }
        }
    };
}

/// Everything but the data choice is the same code for both checkers, but for the crate name.
macro_rules! checker {
    ($checker:ident, $word:ident, $krate:ident, $preempts:expr, $spurious:expr, $task:expr) => {
        counter!($krate);
        word!($word, $krate);

        #[doc = concat!("The ", stringify!($krate), " model checker.")]
        #[derive(Debug, Clone, Copy)]
        pub struct $checker;

        impl Checker for $checker {
            const NAME: &'static str = stringify!($krate);
            const PREEMPTS_BEFORE_WAIT: bool = $preempts;

            type Mutex<T: Send + 'static> = $krate::sync::Mutex<T>;
            type Guard<'a, T: Send + 'static> = $krate::sync::MutexGuard<'a, T>;
            type Condvar = $krate::sync::Condvar;
            type Handle<T: Send + 'static> = $krate::thread::JoinHandle<T>;
            type Counter = $krate::sync::atomic::AtomicUsize;
            type Word = $word;

            fn mutex<T: Send + 'static>(value: T) -> Self::Mutex<T> {
                $krate::sync::Mutex::new(value)
            }

            fn lock<T: Send + 'static>(mutex: &Self::Mutex<T>) -> Self::Guard<'_, T> {
                mutex.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
            }

            fn try_lock<T: Send + 'static>(mutex: &Self::Mutex<T>) -> Option<Self::Guard<'_, T>> {
                match mutex.try_lock() {
                    Ok(guard) => Some(guard),
                    Err(std::sync::TryLockError::Poisoned(poisoned)) => Some(poisoned.into_inner()),
                    Err(std::sync::TryLockError::WouldBlock) => None,
                }
            }

            fn condvar() -> Self::Condvar {
                $krate::sync::Condvar::new()
            }

            fn wait<'a, T: Send + 'static>(
                condvar: &Self::Condvar,
                guard: Self::Guard<'a, T>,
            ) -> Self::Guard<'a, T> {
                condvar.wait(guard).unwrap_or_else(std::sync::PoisonError::into_inner)
            }

            fn notify_all(condvar: &Self::Condvar) {
                condvar.notify_all();
            }

            fn notify_one(condvar: &Self::Condvar) {
                condvar.notify_one();
            }

            fn spurious_wakeup() -> bool {
                $spurious
            }

            fn spawn<T: Send + 'static>(
                name: &str,
                f: impl FnOnce() -> T + Send + 'static,
            ) -> Self::Handle<T> {
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

            fn current_task() -> Option<usize> {
                $task
            }

            fn counter() -> Self::Counter {
                $krate::sync::atomic::AtomicUsize::new(0)
            }

            fn word(value: u64) -> Self::Word {
                $word($krate::sync::atomic::AtomicU64::new(value))
            }

            type RwLock<T: Send + Sync + 'static> = $krate::sync::RwLock<T>;

            fn rw_lock<T: Send + Sync + 'static>(value: T) -> Self::RwLock<T> {
                $krate::sync::RwLock::new(value)
            }

            fn read<T: Send + Sync + 'static, U>(lock: &Self::RwLock<T>, f: impl FnOnce(&T) -> U) -> U {
                f(&lock.read().unwrap_or_else(std::sync::PoisonError::into_inner))
            }

            fn write<T: Send + Sync + 'static, U>(lock: &Self::RwLock<T>, f: impl FnOnce(&mut T) -> U) -> U {
                f(&mut lock.write().unwrap_or_else(std::sync::PoisonError::into_inner))
            }

            fn fence() {
                $krate::sync::atomic::fence(std::sync::atomic::Ordering::SeqCst);
            }

            fn held(delta: isize) -> usize {
                $krate::thread_local! {
                    static HELD: std::cell::Cell<usize> = std::cell::Cell::new(0);
                }
                HELD.try_with(|h| {
                    h.set(h.get().saturating_add_signed(delta));
                    h.get()
                })
                .unwrap_or(0)
            }
        }
    };
}

checker!(
    ShuttleChecker,
    ShuttleWord,
    shuttle,
    true,
    shuttle::rand::thread_rng().gen_ratio(1, SPURIOUS_ODDS),
    shuttle::current::try_get_current_task().map(usize::from)
);
// loom has no way to name the running thread that is safe in a panic hook.
checker!(LoomChecker, LoomWord, loom, false, false, None);
