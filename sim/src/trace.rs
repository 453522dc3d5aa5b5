//! The per-execution trace: what each scenario thread did, in the order it happened.
//!
//! Every checker thread of one execution runs on the same OS thread (shuttle and loom run them
//! as coroutines), so an OS-thread-local buffer is exactly "this execution's" buffer.

use std::cell::RefCell;
use std::collections::BTreeMap;

thread_local! {
    static EVENTS: RefCell<Vec<(String, String)>> = const { RefCell::new(Vec::new()) };
}

/// Starts a new execution's trace.
pub fn reset() {
    EVENTS.with(|e| e.borrow_mut().clear());
}

/// Records that `thread` did `event`.
pub fn record(thread: &str, event: impl Into<String>) {
    EVENTS.with(|e| e.borrow_mut().push((thread.to_owned(), event.into())));
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

/// Collects `resident`'s `tracing` events into the trace.
struct Capture;

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

impl<S: tracing::Subscriber> tracing_subscriber::Layer<S> for Capture {
    fn on_event(&self, event: &tracing::Event<'_>, _ctx: tracing_subscriber::layer::Context<'_, S>) {
        let target = event.metadata().target();
        if target != "resident" && !target.starts_with("resident::") {
            return;
        }
        let Some(namer) = NAMER.with(std::cell::Cell::get) else { return };
        let mut fields = Fields::default();
        event.record(&mut fields);
        let thread = namer().unwrap_or_else(|| "main".to_owned());
        record(&thread, format!("  · {}{}", fields.message, fields.rest));
        // Last: it may panic (an armed fault), as a user's subscriber may.
        crate::instrumentation::event(&fields.message);
    }
}

/// Installs the process-wide `tracing` subscriber that feeds `resident`'s events into the
/// trace and through the execution's instrumentation checks
/// ([`crate::instrumentation`]). Keeps an existing global subscriber if the process already
/// has one.
///
/// It filters by target inside the layer rather than with a per-layer filter: an armed fault
/// unwinds out of the layer, which a per-layer filter's thread-local state does not survive.
pub(crate) fn install_capture() {
    use tracing_subscriber::layer::SubscriberExt;
    let subscriber = tracing_subscriber::registry().with(Capture);
    let _ = tracing::subscriber::set_global_default(subscriber);
}
