//! [`RwLock`]: a value many threads read at once and one writes, for the registry a lease
//! looks its model up in (readers never serialise on each other).

/// A poison-free reader-writer lock. Closures run with the lock held: like a monitor's, they
/// must be short, and must never call user code, wait, or take a monitor.
pub trait RwLock<T>: Send + Sync {
    /// Runs `f` with shared access to the value, beside other readers.
    fn read<U>(&self, f: impl FnOnce(&T) -> U) -> U;

    /// Runs `f` with exclusive access to the value.
    fn write<U>(&self, f: impl FnOnce(&mut T) -> U) -> U;
}

impl<T: Send + Sync> RwLock<T> for parking_lot::RwLock<T> {
    #[inline]
    fn read<U>(&self, f: impl FnOnce(&T) -> U) -> U {
        f(&self.read())
    }

    #[inline]
    fn write<U>(&self, f: impl FnOnce(&mut T) -> U) -> U {
        f(&mut self.write())
    }
}
