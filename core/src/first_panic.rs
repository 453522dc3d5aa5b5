//! Running several pieces of user code so that a panic in one does not skip the others: each
//! runs under a catch, the first panic is kept, and it goes on once all have run.
//!
//! The library does this wherever one call runs user code for many things (the evictions of a
//! cap's pass over the caches, a room request's drain, each evicted record's `Drop`, report and
//! callback, a shutdown's reports of its ids): stopping at the first panic would leave the rest
//! undone (records kept over a budget, ids never unloaded, requests never honoured).

use std::any::Any;

use crate::runtime::Runtime;

/// A panic's payload, as [`std::panic::catch_unwind`] hands it over.
type Payload = Box<dyn Any + Send>;

/// The first panic of the pieces of user code run so far (see the [module docs](self)).
pub(crate) struct FirstPanic<R: Runtime> {
    payload: Option<Payload>,
    _runtime: std::marker::PhantomData<fn() -> R>,
}

impl<R: Runtime> FirstPanic<R> {
    /// None yet.
    pub(crate) fn new() -> Self {
        Self { payload: None, _runtime: std::marker::PhantomData }
    }

    /// Runs `f` under a catch: its value, or `None` if it panicked (the panic kept if it is the
    /// first).
    pub(crate) fn run<T>(&mut self, f: impl FnOnce() -> T) -> Option<T> {
        match R::catch_unwind(f) {
            Ok(value) => Some(value),
            Err(payload) => {
                self.payload.get_or_insert(payload);
                None
            }
        }
    }

    /// Lets the first panic go on from a call that may unwind ([`Runtime::resume_caught`]).
    pub(crate) fn resume(self) {
        if let Some(payload) = self.payload {
            R::resume_caught(payload);
        }
    }

    /// Lets the first panic go on from code that may run in a `Drop` ([`Runtime::resume_unwind`]:
    /// a model-checking runtime reports, rather than raises, a panic that would abort).
    pub(crate) fn resume_on(self, runtime: &R) {
        if let Some(payload) = self.payload {
            runtime.resume_unwind(payload);
        }
    }

    /// The first panic, to hand on as the caller decides.
    pub(crate) fn into_payload(self) -> Option<Payload> {
        self.payload
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::runtime::StdRuntime;

    #[test]
    fn every_piece_runs_and_the_first_panic_goes_on() {
        let mut first = FirstPanic::<StdRuntime>::new();
        assert_eq!(first.run(|| 1), Some(1));
        assert_eq!(first.run(|| -> i32 { std::panic::panic_any("first") }), None);
        assert_eq!(first.run(|| -> i32 { std::panic::panic_any("second") }), None);
        assert_eq!(first.run(|| 4), Some(4));
        let resumed = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| first.resume()));
        let payload = resumed.expect_err("the first panic goes on");
        assert_eq!(payload.downcast_ref::<&str>(), Some(&"first"));
    }

    #[test]
    fn nothing_goes_on_when_nothing_panicked() {
        let mut first = FirstPanic::<StdRuntime>::new();
        assert_eq!(first.run(|| 2), Some(2));
        assert!(first.into_payload().is_none());
    }
}
