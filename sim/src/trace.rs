//! The per-execution trace: what each scenario thread did, in the order it happened.
//!
//! Every checker thread of one execution runs on the same OS thread (shuttle and loom run them
//! as coroutines), so an OS-thread-local buffer is exactly "this execution's" buffer.

use std::cell::{Cell, RefCell};
use std::collections::BTreeMap;

thread_local! {
    static EVENTS: RefCell<Vec<(String, String)>> = const { RefCell::new(Vec::new()) };
    /// Whether this thread's executions keep their trace (see [`with_capture`]).
    static CAPTURING: Cell<bool> = const { Cell::new(true) };
}

/// Starts a new execution's trace.
pub fn reset() {
    EVENTS.with(|e| e.borrow_mut().clear());
}

/// Records that `thread` did `event` (nothing while the trace is not kept).
pub fn record(thread: &str, event: impl Into<String>) {
    if capturing() {
        EVENTS.with(|e| e.borrow_mut().push((thread.to_owned(), event.into())));
    }
}

/// Records `event` under the running checker thread (as `resident`'s own events are).
pub fn record_here(event: impl Into<String>) {
    if capturing() {
        let thread = NAMER.with(Cell::get).and_then(|namer| namer()).unwrap_or_else(|| "main".to_owned());
        record(&thread, event);
    }
}

/// Whether the running execution keeps its trace: callers that format an event only to record
/// it skip the formatting when not.
pub fn capturing() -> bool {
    CAPTURING.with(Cell::get)
}

/// Runs `f` with this thread's executions keeping their trace (`on`) or not, then restores the
/// setting. The explorers run without one — formatting every event of every passing execution
/// costs more than the checks — and rerun a failing execution with it: both checkers replay an
/// execution exactly (shuttle from its recorded schedule, loom by exploring in the same order).
pub(crate) fn with_capture<T>(on: bool, f: impl FnOnce() -> T) -> T {
    struct Restore(bool);
    impl Drop for Restore {
        fn drop(&mut self) {
            CAPTURING.with(|c| c.set(self.0));
        }
    }
    let _restore = Restore(CAPTURING.with(|c| c.replace(on)));
    f()
}

/// The trace so far, per thread; each event is prefixed with its global sequence number.
pub fn per_thread() -> BTreeMap<String, Vec<String>> {
    EVENTS.with(|e| {
        let mut threads: BTreeMap<String, Vec<String>> = BTreeMap::new();
        for (step, (thread, event)) in e.borrow().iter().enumerate() {
            threads.entry(thread.clone()).or_default().push(format!("#{step:03} {event}"));
        }
        threads
    })
}

/// Renders a per-thread trace as text, interleaved in global order.
pub fn render(threads: &BTreeMap<String, Vec<String>>) -> String {
    let mut lines: Vec<(&str, &String)> = threads
        .iter()
        .flat_map(|(thread, events)| events.iter().map(move |e| (thread.as_str(), e)))
        .collect();
    lines.sort_by(|a, b| a.1.cmp(b.1));
    lines.iter().map(|(thread, event)| format!("  {thread:>11} | {event}\n")).collect()
}

/// Names the running checker thread.
type Namer = fn() -> Option<String>;

thread_local! {
    static NAMER: std::cell::Cell<Option<Namer>> = const { std::cell::Cell::new(None) };
}

/// Sets how the current execution names the running checker thread, so that `resident`'s own
/// `tracing` events land in the trace under the thread that emitted them.
pub fn set_thread_namer(namer: Namer) {
    NAMER.with(|n| n.set(Some(namer)));
}

/// The process-wide `tracing` subscriber of the explorations: it feeds `resident`'s events into
/// the trace and through the execution's instrumentation checks ([`crate::instrumentation`]).
/// `resident`'s spans carry nothing a trace shows: one is created only where a fault is armed
/// at its exit (a registry of every span would cost more than every check together).
struct Capture;

/// Whether `metadata` is `resident`'s own.
fn ours(metadata: &tracing::Metadata<'_>) -> bool {
    let target = metadata.target();
    target == "resident" || target.starts_with("resident::")
}

#[derive(Default)]
struct Fields {
    message: String,
    rest: String,
}

impl tracing::field::Visit for Fields {
    fn record_debug(&mut self, field: &tracing::field::Field, value: &dyn std::fmt::Debug) {
        use std::fmt::Write;
        if field.name() == "message" {
            let _ = write!(self.message, "{value:?}");
        } else {
            let _ = write!(self.rest, " {}={value:?}", field.name());
        }
    }
}

impl tracing::Subscriber for Capture {
    fn register_callsite(
        &self,
        metadata: &'static tracing::Metadata<'static>,
    ) -> tracing::subscriber::Interest {
        use tracing::subscriber::Interest;
        match (ours(metadata), metadata.is_event()) {
            (false, _) => Interest::never(),
            (true, true) => Interest::always(),
            // Asked at each span: whether a fault is armed at its exit.
            (true, false) => Interest::sometimes(),
        }
    }

    fn enabled(&self, metadata: &tracing::Metadata<'_>) -> bool {
        ours(metadata) && (metadata.is_event() || crate::instrumentation::span_armed(metadata.name()))
    }

    fn new_span(&self, span: &tracing::span::Attributes<'_>) -> tracing::span::Id {
        tracing::span::Id::from_u64(crate::instrumentation::span_created(span.metadata().name()))
    }

    fn record(&self, _: &tracing::span::Id, _: &tracing::span::Record<'_>) {}

    fn record_follows_from(&self, _: &tracing::span::Id, _: &tracing::span::Id) {}

    fn event(&self, event: &tracing::Event<'_>) {
        let Some(namer) = NAMER.with(Cell::get) else { return };
        let capture = capturing();
        // The message is read only where something uses it: the trace, or a check that names
        // the event (a report inside a monitor, an armed fault).
        if !capture && !crate::instrumentation::names_needed() {
            return;
        }
        let mut fields = Fields::default();
        event.record(&mut fields);
        if capture {
            let thread = namer().unwrap_or_else(|| "main".to_owned());
            record(&thread, format!("  · {}{}", fields.message, fields.rest));
        }
        // Last: it may panic (an armed fault), as a user's subscriber may.
        crate::instrumentation::event(&fields.message);
    }

    fn enter(&self, _: &tracing::span::Id) {}

    fn exit(&self, span: &tracing::span::Id) {
        // It may panic (an armed fault), as a user's subscriber may.
        crate::instrumentation::span_exited(span.into_u64());
    }
}

/// Installs the process-wide `tracing` subscriber that feeds `resident`'s events into the
/// trace and through the execution's instrumentation checks. Keeps an existing global
/// subscriber if the process already has one.
pub(crate) fn install_capture() {
    let _ = tracing::subscriber::set_global_default(Capture);
}
