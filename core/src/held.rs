//! A value held across library code that may panic: the weights a `put` was given, held while
//! it expires idle records, honours room requests and makes room; a handle's reference to its
//! record, held while its claim is released (each of which runs user code: callbacks, other
//! weights' `Drop`, the library's own reports); a dropped cache's records, which its last
//! handle may let go in an unwind; the canonical a `WeightStore::insert` adopts across the
//! spare weights' `Drop`, and the weights across its reservation's report; a model given to
//! `register`, across the reports of its refusals (a lock wait that ran out, a shutdown, a
//! cache with no room); a user's error (a loader's, an `unload`'s) across the reports of it
//! and a retired lifecycle entry's failure in an unwind.
//!
//! Dropped by a panic of that code, a plain value would run its `Drop` (user code too) in the
//! unwind, where a second panic aborts the process. [`Held`] drops it under a catch there, as a
//! handle lets go of its record; outside an unwind it drops as the value would.

use std::marker::PhantomData;

use crate::runtime::Runtime;

/// A value dropped under a catch if it is dropped while its thread unwinds.
pub(crate) struct Held<T, R: Runtime> {
    value: Option<T>,
    /// Not under a mutant that drops it plainly in an unwind (`put-weights-dropped-in-unwind`,
    /// `record-dropped-in-release-unwind`, `cache-dropped-in-unwind`,
    /// `user-error-dropped-in-unwind`, ...).
    guarded: bool,
    _runtime: PhantomData<fn() -> R>,
}

impl<T, R: Runtime> Held<T, R> {
    /// Holds `value` (`guarded`: unless the mutant says otherwise).
    pub(crate) fn new(value: T, guarded: bool) -> Self {
        Self { value: Some(value), guarded, _runtime: PhantomData }
    }

    /// The value.
    pub(crate) fn get(&self) -> &T {
        self.value.as_ref().expect("a held value until handed on")
    }

    /// The value, taken out for a call that may hand it back ([`Held::put_back`]).
    pub(crate) fn take(&mut self) -> Option<T> {
        self.value.take()
    }

    /// Holds `value` again (a call handed it back).
    pub(crate) fn put_back(&mut self, value: T) {
        self.value = Some(value);
    }

    /// The value, handed on: its drop is the receiver's to guard from now.
    pub(crate) fn into_inner(mut self) -> T {
        self.value.take().expect("a held value is handed on once")
    }
}

impl<T, R: Runtime> Drop for Held<T, R> {
    fn drop(&mut self) {
        if let Some(value) = self.value.take() {
            if self.guarded && R::panicking() {
                let _ = R::catch_unwind(move || drop(value));
            } else {
                drop(value);
            }
        }
    }
}
