//! [`AtomicWord`]: the one atomic type of the facade, a 64-bit word, for the read paths that
//! must not serialise their callers on a monitor (a lease counts itself in its slot's word).

use std::sync::atomic::Ordering;

/// A 64-bit atomic word with explicit orderings, as `std::sync::atomic::AtomicU64` has them.
///
/// Production runtimes use `AtomicU64` itself; model-checking runtimes use their checker's own
/// atomic, so every access is a scheduling point and loom explores the orderings as written
/// (shuttle runs every access sequentially consistent). Code on the facade must name the
/// weakest ordering that is correct: the checkers hold it to exactly that under loom.
pub trait AtomicWord: Send + Sync + 'static {
    /// Loads the value.
    fn load(&self, order: Ordering) -> u64;

    /// Stores `value`.
    fn store(&self, value: u64, order: Ordering);

    /// Adds `value` (wrapping), returning the previous value.
    fn fetch_add(&self, value: u64, order: Ordering) -> u64;

    /// Subtracts `value` (wrapping), returning the previous value.
    fn fetch_sub(&self, value: u64, order: Ordering) -> u64;

    /// Stores the larger of the value and `value`, returning the previous value. The default is
    /// a compare-exchange loop (at `order` on success, relaxed on failure, and no write at all
    /// when the value is already the larger, unlike a native one); an atomic with a
    /// native one should use it.
    fn fetch_max(&self, value: u64, order: Ordering) -> u64 {
        let mut current = self.load(Ordering::Relaxed);
        while current < value {
            match self.compare_exchange(current, value, order, Ordering::Relaxed) {
                Ok(previous) => return previous,
                Err(actual) => current = actual,
            }
        }
        current
    }

    /// Stores `new` if the value is `current`: `Ok(current)`, else `Err(actual)` with nothing
    /// stored. Never fails spuriously.
    fn compare_exchange(
        &self,
        current: u64,
        new: u64,
        success: Ordering,
        failure: Ordering,
    ) -> Result<u64, u64>;
}

impl AtomicWord for std::sync::atomic::AtomicU64 {
    #[inline]
    fn load(&self, order: Ordering) -> u64 {
        self.load(order)
    }

    #[inline]
    fn store(&self, value: u64, order: Ordering) {
        self.store(value, order);
    }

    #[inline]
    fn fetch_add(&self, value: u64, order: Ordering) -> u64 {
        self.fetch_add(value, order)
    }

    #[inline]
    fn fetch_sub(&self, value: u64, order: Ordering) -> u64 {
        self.fetch_sub(value, order)
    }

    #[inline]
    fn fetch_max(&self, value: u64, order: Ordering) -> u64 {
        self.fetch_max(value, order)
    }

    #[inline]
    fn compare_exchange(
        &self,
        current: u64,
        new: u64,
        success: Ordering,
        failure: Ordering,
    ) -> Result<u64, u64> {
        self.compare_exchange(current, new, success, failure)
    }
}
