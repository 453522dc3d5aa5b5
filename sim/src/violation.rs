//! Invariant violations: how a scenario reports a broken guarantee, and how the drivers
//! recognise one among other panics.

use std::any::Any;
use std::cell::{Cell, RefCell};
use std::fmt;

use serde::{Deserialize, Serialize};

/// A broken guarantee, named by its invariant id (`I1`, `L1`, `contract`, ...).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Violation {
    /// The invariant id, as `docs/spec.md` §7 defines it (or a catalogue id, or a spec item).
    pub invariant: String,
    /// What was observed.
    pub message: String,
}

impl fmt::Display for Violation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "[{}] {}", self.invariant, self.message)
    }
}

thread_local! {
    static FIRST: RefCell<Option<Violation>> = const { RefCell::new(None) };
    static YIELD: Cell<Option<fn()>> = const { Cell::new(None) };
}

/// Starts an execution: forgets the last execution's violation; `yield_now` is the checker's.
pub fn begin_execution(yield_now: fn()) {
    FIRST.with(|f| f.borrow_mut().take());
    YIELD.with(|y| y.set(Some(yield_now)));
}

/// Fails the current execution if a violation was recorded without unwinding.
pub fn fail_if_recorded() {
    if let Some(violation) = first() {
        std::panic::panic_any(violation);
    }
}

/// The first violation raised in the current (or last) execution.
pub fn first() -> Option<Violation> {
    FIRST.with(|f| f.borrow().clone())
}

impl Violation {
    /// Fails the current execution with this violation (the payload the drivers look for).
    ///
    /// Only the first violation of an execution panics. A later one (another thread noticing
    /// the same broken state while the first unwinds) parks its thread in a yield loop instead:
    /// a second panic during an unwind is one the checkers cannot attribute, and the first
    /// violation is the one worth reporting.
    pub fn raise(invariant: &str, message: String) -> ! {
        let violation = Violation { invariant: invariant.to_owned(), message };
        let already = FIRST.with(|f| {
            let mut first = f.borrow_mut();
            first.is_some() || {
                *first = Some(violation.clone());
                false
            }
        });
        if !already {
            violation.mark();
        }
        match YIELD.with(Cell::get) {
            Some(yield_now) if already => loop {
                yield_now();
            },
            _ => std::panic::panic_any(violation),
        }
    }

    /// Records this violation without unwinding: for code that must not panic where it
    /// notices a broken guarantee (a `Drop`). The execution fails when its scenario ends
    /// ([`fail_if_recorded`]), with the first violation of the execution.
    pub fn record(invariant: &str, message: String) {
        let first = FIRST.with(|f| {
            let mut first = f.borrow_mut();
            let fresh = first.is_none();
            let violation = first.get_or_insert(Violation { invariant: invariant.to_owned(), message });
            fresh.then(|| violation.clone())
        });
        if let Some(violation) = first {
            violation.mark();
        }
    }

    /// Marks the step where the execution broke in its trace (a timeline shows it there).
    fn mark(&self) {
        if crate::trace::capturing() {
            crate::trace::record_here(format!("{VIOLATED}{self}"));
        }
    }

    /// Classifies a panic payload: a raised violation, or the checker's own failure report.
    pub fn from_payload(payload: &(dyn Any + Send)) -> Violation {
        if let Some(v) = payload.downcast_ref::<Violation>() {
            return v.clone();
        }
        let message = payload
            .downcast_ref::<String>()
            .cloned()
            .or_else(|| payload.downcast_ref::<&str>().map(|s| (*s).to_owned()))
            .unwrap_or_else(|| "a panic with a non-string payload".to_owned());
        let lower = message.to_lowercase();
        let invariant = if lower.contains("deadlock") {
            "deadlock"
        } else if lower.contains("exceeded") && lower.contains("step") {
            "step-bound"
        } else {
            "panic"
        };
        Violation { invariant: invariant.to_owned(), message }
    }
}

/// How the trace marks the step where an execution broke.
pub const VIOLATED: &str = "✗ violated ";

/// The payload of a panic that a scenario's loader raises on purpose (and expects to catch).
#[derive(Debug, Clone, Copy)]
pub struct InjectedPanic;

/// Runs `f`, turning an [`InjectedPanic`] into `None`; any other panic goes on unwinding.
pub fn catching<T>(f: impl FnOnce() -> T) -> Option<T> {
    match crate::unwinding::catch(f) {
        Ok(out) => Some(out),
        Err(payload) if payload.is::<InjectedPanic>() => None,
        Err(payload) => crate::unwinding::resume(payload),
    }
}

/// Fails the execution with `invariant` unless `cond` holds.
#[macro_export]
macro_rules! ensure {
    ($cond:expr, $inv:expr, $($fmt:tt)+) => {
        if !$cond {
            $crate::violation::Violation::raise($inv, format!($($fmt)+));
        }
    };
}
