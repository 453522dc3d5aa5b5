//! `resident`'s own instrumentation as user code (SPEC 3.10): a scripted `tracing` layer and
//! `metrics` recorder that every execution runs under.
//!
//! Both check, at every event and every metric, that the reporting thread holds no internal
//! monitor (a subscriber or recorder may block or re-enter), and both can be armed to panic at
//! one named event or metric, as a user's subscriber or recorder may. The recorder is installed
//! per execution with [`metrics::with_local_recorder`], and the fault is armed per execution:
//! every checker thread of an execution runs on one OS thread, so both are that execution's
//! alone, and tests running in parallel never see each other's.

use std::cell::{Cell, RefCell};
use std::collections::BTreeSet;

use metrics::{Counter, Gauge, Histogram, Key, KeyName, Metadata, Recorder, SharedString, Unit};

use crate::violation::{InjectedPanic, Violation};

thread_local! {
    /// How the running execution counts the monitors its running thread holds.
    static MONITORS: Cell<Option<fn() -> usize>> = const { Cell::new(None) };
    /// The event message or metric name that panics in this execution, if armed.
    static ARMED: RefCell<&'static [&'static str]> = const { RefCell::new(&[]) };
    /// Every name armed on this OS thread since [`reset_armed`], and those that fired: an armed
    /// report that never fires tests nothing ([`armed_never_fired`]).
    static ARMED_EVER: RefCell<BTreeSet<&'static str>> = const { RefCell::new(BTreeSet::new()) };
    static FIRED: RefCell<BTreeSet<&'static str>> = const { RefCell::new(BTreeSet::new()) };
    /// The names of the spans created in this execution, by id less one (only spans a fault
    /// names are created).
    static SPANS: RefCell<Vec<&'static str>> = const { RefCell::new(Vec::new()) };
}

/// An armed name that starts so names a span of `resident`: [`panic_at`] with
/// `"span exit: add_model"` panics as every `add_model` span is exited.
pub const SPAN_EXIT: &str = "span exit: ";

/// Starts an execution: `monitors` counts the monitors the running checker thread holds; no
/// fault is armed.
pub(crate) fn begin_execution(monitors: fn() -> usize) {
    MONITORS.with(|m| m.set(Some(monitors)));
    SPANS.with(|s| s.borrow_mut().clear());
    disarm();
}

/// Arms the fault of this execution: every `tracing` event whose message is one of `names`,
/// every metric named so, and the exit of every span named after [`SPAN_EXIT`] in one of them,
/// panics with [`InjectedPanic`]. Never while its thread already unwinds: the report is then an
/// `abort` violation, unless `resident` runs it inside a catch of its own there.
pub fn panic_at(names: &'static [&'static str]) {
    ARMED.with(|a| *a.borrow_mut() = names);
    ARMED_EVER.with(|e| e.borrow_mut().extend(names));
}

/// Forgets which names were armed and fired on this OS thread (every execution of one
/// exploration runs on the thread that explores).
pub fn reset_armed() {
    ARMED_EVER.with(|e| e.borrow_mut().clear());
    FIRED.with(|f| f.borrow_mut().clear());
}

/// The names armed on this OS thread since [`reset_armed`], fired or not.
pub fn armed_ever() -> Vec<&'static str> {
    ARMED_EVER.with(|e| e.borrow().iter().copied().collect())
}

/// The names armed on this OS thread since [`reset_armed`] that never fired: a fault scenario
/// whose report never comes passes without testing what it names.
pub fn armed_never_fired() -> Vec<&'static str> {
    let fired = FIRED.with(|f| f.borrow().clone());
    ARMED_EVER.with(|e| e.borrow().iter().filter(|n| !fired.contains(*n)).copied().collect())
}

/// Disarms the fault of this execution.
pub fn disarm() {
    ARMED.with(|a| *a.borrow_mut() = &[]);
}

/// A violation if the running thread holds an internal monitor as it reports `name`.
fn inside_monitors(kind: &str, name: &str) {
    let held = MONITORS.with(Cell::get).map_or(0, |monitors| monitors());
    if held > 0 {
        // Recorded, not raised: unwinding out of a subscriber or a recorder is the fault under
        // test, not the checker's way to report.
        Violation::record("U1", format!("{kind} `{name}` (user code) ran inside {held} internal monitor(s)"));
    }
}

/// Checks a report of `name`: a violation if it runs inside a monitor; a panic if armed.
fn reported(kind: &str, name: &str) {
    let armed = ARMED.with(|a| a.borrow().iter().find(|armed| **armed == name).copied());
    if let Some(armed) = armed {
        FIRED.with(|f| f.borrow_mut().insert(armed));
    }
    fire(kind, armed.unwrap_or(name), armed.is_some());
}

/// Checks a report of `name` (`armed`: its fault is armed): a violation if inside a monitor; a
/// panic if armed. While its thread unwinds, no panic (the sim's own would abort the process):
/// an `abort` violation if production's panic there would leave a `Drop` in the unwind, none
/// if a catch entered during the unwind encloses the report.
fn fire(kind: &str, name: &str, armed: bool) {
    if crate::unwinding::panicking() {
        if armed && crate::unwinding::panic_would_abort() {
            Violation::record(
                "abort",
                format!("{kind} `{name}`, armed to panic, ran while its thread unwinds"),
            );
        }
        return;
    }
    inside_monitors(kind, name);
    if armed {
        std::panic::panic_any(InjectedPanic);
    }
}

/// The fault armed at the exit of the spans named `name`, if any.
fn armed_span(name: &str) -> Option<&'static str> {
    ARMED.with(|a| a.borrow().iter().find(|armed| armed.strip_prefix(SPAN_EXIT) == Some(name)).copied())
}

/// Whether the execution's subscriber creates a span named `name`: a fault is armed at its
/// exit. A span is checked only if created while armed: arm before the calls it covers.
pub(crate) fn span_armed(name: &str) -> bool {
    armed_span(name).is_some()
}

/// A span named `name` was created: its id for the subscriber.
pub(crate) fn span_created(name: &'static str) -> u64 {
    SPANS.with(|s| {
        let mut spans = s.borrow_mut();
        spans.push(name);
        spans.len() as u64
    })
}

/// The span `id` is exited: checked as a report if a fault is armed at its exit.
pub(crate) fn span_exited(id: u64) {
    let name = SPANS.with(|s| s.borrow().get(id as usize - 1).copied());
    let Some(armed) = name.and_then(armed_span) else { return };
    FIRED.with(|f| f.borrow_mut().insert(armed));
    fire("the tracing span's exit", armed, true);
}

/// Whether a report would be checked by name now: its thread holds a monitor (a violation that
/// names it) or a fault is armed. Otherwise [`event`] does nothing, and the subscriber need not
/// read the event's message.
pub(crate) fn names_needed() -> bool {
    let armed = ARMED.with(|a| !a.borrow().is_empty());
    if crate::unwinding::panicking() {
        return armed;
    }
    MONITORS.with(Cell::get).is_some_and(|monitors| monitors() > 0) || armed
}

/// Called by the execution's `tracing` subscriber for every event of `resident`.
pub(crate) fn event(message: &str) {
    reported("the tracing event", message);
}

/// The execution's `metrics` recorder: records nothing, checks and panics as armed.
#[derive(Debug, Default)]
pub struct ScriptedRecorder;

impl Recorder for ScriptedRecorder {
    fn describe_counter(&self, _: KeyName, _: Option<Unit>, _: SharedString) {}

    fn describe_gauge(&self, _: KeyName, _: Option<Unit>, _: SharedString) {}

    fn describe_histogram(&self, _: KeyName, _: Option<Unit>, _: SharedString) {}

    fn register_counter(&self, key: &Key, _: &Metadata<'_>) -> Counter {
        reported("the metric", key.name());
        Counter::noop()
    }

    fn register_gauge(&self, key: &Key, _: &Metadata<'_>) -> Gauge {
        reported("the metric", key.name());
        Gauge::noop()
    }

    fn register_histogram(&self, key: &Key, _: &Metadata<'_>) -> Histogram {
        reported("the metric", key.name());
        Histogram::noop()
    }
}
