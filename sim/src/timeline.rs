//! [`Timeline`]: a failing execution made readable — the violated invariant, then one lane per
//! thread and one row per step, each step naming the operation (a scenario call, with its
//! outcome) or what it touched in `resident` (the lifecycle lock, the cache state, a
//! reservation, a move); as text for a terminal, and as an SVG timeline (thread lanes,
//! operations as boxes, lock hand-offs as arrows, the violating step marked).

use std::collections::BTreeMap;
use std::fmt::Write;

use crate::violation::{VIOLATED, Violation};

/// What one step of a thread is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Kind {
    /// A scenario operation starts (`add(X)`).
    Begin(String),
    /// A scenario operation returns: the operation, and what it returned.
    End(String, String),
    /// Something `resident` reported along the way (one of its `tracing` events), or a note of
    /// the scenario.
    Event(String),
}

/// What a step touched, read from `resident`'s event names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Touched {
    /// A per-model lifecycle lock (its reservation, acquisition, retirement).
    LifecycleLock,
    /// A shared-weight cache's record table or budget (an admission, a claim, an eviction).
    CacheState,
    /// A reservation of room in a budget.
    Reservation,
    /// A move of weights to or from a device.
    Move,
}

impl Touched {
    /// Its name, as the lanes show it.
    pub fn name(self) -> &'static str {
        match self {
            Touched::LifecycleLock => "lifecycle lock",
            Touched::CacheState => "cache state",
            Touched::Reservation => "reservation",
            Touched::Move => "move",
        }
    }

    /// What `resident`'s event `event` (its message, then ` key=value` fields) touched.
    fn of(event: &str) -> Option<Self> {
        let message = event.split(" id=").next().unwrap_or(event).to_lowercase();
        let words: Vec<&str> = message.split(|c: char| !c.is_alphanumeric() && c != '-').collect();
        let has = |w: &str| words.contains(&w);
        if has("lifecycle") || message.starts_with("reserved") {
            Some(Touched::LifecycleLock)
        } else if has("room") || has("budget") || has("cap") || message.starts_with("reserv") {
            Some(Touched::Reservation)
        } else if has("device")
            || has("move")
            || has("moved")
            || has("offloaded")
            || has("placed")
            || has("copy")
        {
            Some(Touched::Move)
        } else if [
            "admitted",
            "claim",
            "evict",
            "evicted",
            "charged",
            "get",
            "canonical",
            "keep-alive",
            "record",
        ]
        .iter()
        .any(|w| has(w))
        {
            Some(Touched::CacheState)
        } else {
            None
        }
    }

    fn colour(self) -> &'static str {
        match self {
            Touched::LifecycleLock => "#1f5fa8",
            Touched::CacheState => "#2e7d32",
            Touched::Reservation => "#a06000",
            Touched::Move => "#6a1b9a",
        }
    }
}

/// One step of the execution.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Step {
    /// Its place in the execution's global order.
    pub seq: usize,
    /// Its thread, an index into [`Timeline::threads`].
    pub thread: usize,
    /// What it is.
    pub kind: Kind,
}

impl Step {
    /// What it touched, if it is one of `resident`'s events that names it.
    pub fn touched(&self) -> Option<Touched> {
        match &self.kind {
            Kind::Event(e) => Touched::of(e),
            _ => None,
        }
    }

    /// The step as a lane shows it.
    pub fn text(&self) -> String {
        match &self.kind {
            Kind::Begin(op) => format!("{op} ..."),
            Kind::End(op, out) => format!("{op} -> {out}"),
            Kind::Event(e) => {
                let e = e.replace(" generation=", " gen=");
                match self.touched() {
                    Some(t) if !e.starts_with(t.name().split(' ').next().unwrap_or_default()) => {
                        format!("[{}] {e}", t.name())
                    }
                    _ => e,
                }
            }
        }
    }

    /// The model id a `resident` event names (`id=...`), with its lifecycle generation
    /// (`generation=...`) if it names one: what a lifecycle lock is the lock of.
    fn lock_key(&self) -> Option<(&str, Option<&str>)> {
        let Kind::Event(e) = &self.kind else { return None };
        let field = |name: &str| {
            let at = e.find(name)?;
            let rest = &e[at + name.len()..];
            Some(rest.split_whitespace().next().unwrap_or(rest))
        };
        Some((field(" id=")?, field(" generation=")))
    }

    fn acquires_lock(&self) -> bool {
        matches!(&self.kind, Kind::Event(e) if e.starts_with("lifecycle lock acquired") || e.starts_with("lifecycle lock taken"))
    }
}

/// A lock passing from one thread to another: the step where `to` took the lifecycle lock of
/// an id, and the last step before it where another thread touched that id.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HandOff {
    /// The earlier step (an index into [`Timeline::steps`]).
    pub from: usize,
    /// The acquiring step.
    pub to: usize,
}

/// A failing (or any) execution, step by step.
#[derive(Debug, Clone)]
pub struct Timeline {
    /// The threads, in order of their first step.
    pub threads: Vec<String>,
    /// Every step, in execution order.
    pub steps: Vec<Step>,
    /// What broke, if anything.
    pub violation: Option<Violation>,
}

impl Timeline {
    /// The timeline of a per-thread trace (as [`crate::trace::per_thread`] keeps it and replay
    /// files store it: each event prefixed `#NNN` with its global order).
    pub fn new(trace: &BTreeMap<String, Vec<String>>, violation: Option<&Violation>) -> Self {
        let mut raw: Vec<(usize, &str, &str)> = trace
            .iter()
            .flat_map(|(thread, events)| {
                events.iter().map(move |e| {
                    let (seq, text) = e.strip_prefix('#').and_then(|e| e.split_once(' ')).unwrap_or(("0", e));
                    (seq.parse().unwrap_or(0), thread.as_str(), text)
                })
            })
            .collect();
        raw.sort_by_key(|&(seq, _, _)| seq);
        let mut threads: Vec<String> = Vec::new();
        // Per thread, the operations begun and not yet returned (innermost last).
        let mut open: Vec<Vec<String>> = Vec::new();
        let steps = raw
            .into_iter()
            .map(|(seq, thread, text)| {
                let thread = threads.iter().position(|t| t == thread).unwrap_or_else(|| {
                    threads.push(thread.to_owned());
                    open.push(Vec::new());
                    threads.len() - 1
                });
                Step { seq, thread, kind: kind(text, &mut open[thread]) }
            })
            .collect();
        Self { threads, steps, violation: violation.cloned() }
    }

    /// The step where the execution broke: the one the violation marked in the trace, or
    /// else the last one (a checker's own failure, such as a deadlock, ends its execution).
    pub fn violating_step(&self) -> Option<usize> {
        self.violation.as_ref()?;
        let marked =
            self.steps.iter().position(|s| matches!(&s.kind, Kind::Event(e) if e.starts_with(VIOLATED)));
        marked.or(self.steps.len().checked_sub(1))
    }

    /// Every hand-off of a lifecycle lock between threads: each acquisition of the lock of an
    /// id (and generation), from the last step of another thread that touched the same.
    pub fn hand_offs(&self) -> Vec<HandOff> {
        let mut out = Vec::new();
        for (to, step) in self.steps.iter().enumerate() {
            let Some(key) = step.lock_key().filter(|_| step.acquires_lock()) else { continue };
            let from = self.steps[..to].iter().rposition(|s| {
                s.thread != step.thread
                    && s.lock_key().is_some_and(|k| k.0 == key.0 && (key.1.is_none() || k.1 == key.1))
            });
            if let Some(from) = from {
                out.push(HandOff { from, to });
            }
        }
        out
    }

    /// The lanes as text: the violation first, then a header of thread names and one row per
    /// step, each in its thread's column (cut to fit `width` characters).
    pub fn lanes(&self, width: usize) -> String {
        let mut out = String::new();
        if let Some(v) = &self.violation {
            let _ = writeln!(out, "violated {v}");
        }
        let n = self.threads.len().max(1);
        let column = (width.saturating_sub(6) / n).max(30);
        let cell = |text: &str| {
            let mut s: String = text.chars().take(column - 2).collect();
            if text.chars().count() > column - 2 {
                s.pop();
                s.push('…');
            }
            format!("{s:<w$}", w = column - 2)
        };
        let header: Vec<String> = self.threads.iter().map(|t| cell(t)).collect();
        let _ = writeln!(out, "      {}", header.join("| "));
        let _ = writeln!(out, "      {}", vec!["-".repeat(column - 2); n].join("+-"));
        let violating = self.violating_step();
        for (at, step) in self.steps.iter().enumerate() {
            let cells: Vec<String> =
                (0..n).map(|t| if t == step.thread { cell(&step.text()) } else { cell("") }).collect();
            let mark = if Some(at) == violating { "✗" } else { " " };
            let _ = writeln!(out, "{mark}#{:03} {}", step.seq, cells.join("| ").trim_end());
        }
        out
    }

    /// The timeline as an SVG document: one lane (column) per thread, one row per step,
    /// operations as boxes from their start to their return, `resident`'s events coloured by
    /// what they touched, lock hand-offs as arrows, the violating step marked in red.
    pub fn svg(&self) -> String {
        const LANE: usize = 320;
        const ROW: usize = 22;
        const LEFT: usize = 56;
        const TOP: usize = 78;
        let n = self.threads.len().max(1);
        let width = LEFT + n * LANE + 20;
        let height = TOP + self.steps.len() * ROW + 40;
        let x = |thread: usize| LEFT + thread * LANE;
        let y = |at: usize| TOP + at * ROW;
        let mut s = String::new();
        let _ = writeln!(
            s,
            r#"<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" viewBox="0 0 {width} {height}" font-family="DejaVu Sans Mono, monospace" font-size="12">"#
        );
        s.push_str(r##"<defs><marker id="arrow" viewBox="0 0 10 10" refX="9" refY="5" markerWidth="7" markerHeight="7" orient="auto-start-reverse"><path d="M0,0 L10,5 L0,10 z" fill="#c2410c"/></marker></defs>"##);
        let _ = writeln!(s, r#"<rect width="{width}" height="{height}" fill="white"/>"#);
        let title =
            self.violation.as_ref().map_or_else(|| "no violation".to_owned(), |v| format!("violated {v}"));
        let _ = writeln!(
            s,
            r##"<text x="12" y="22" font-size="14" font-weight="bold" fill="{}">{}</text>"##,
            if self.violation.is_some() { "#b91c1c" } else { "#111" },
            escape(&title)
        );
        s.push_str(&legend(LEFT, 42));
        for (t, name) in self.threads.iter().enumerate() {
            let _ = writeln!(
                s,
                r##"<rect x="{}" y="{}" width="{}" height="{}" fill="{}" /><text x="{}" y="{}" font-weight="bold">{}</text>"##,
                x(t),
                TOP - 16,
                LANE - 8,
                self.steps.len() * ROW + 20,
                if t % 2 == 0 { "#f6f7f9" } else { "#eef1f5" },
                x(t) + 6,
                TOP - 4,
                escape(name)
            );
        }
        // Operations: a box from the row it started to the row it returned (or the end).
        for (at, step) in self.steps.iter().enumerate() {
            let Kind::Begin(op) = &step.kind else { continue };
            let end = self.steps[at + 1..]
                .iter()
                .position(|e| e.thread == step.thread && matches!(&e.kind, Kind::End(o, _) if o == op))
                .map_or(self.steps.len() - 1, |d| at + 1 + d);
            let _ = writeln!(
                s,
                r##"<rect x="{}" y="{}" width="{}" height="{}" rx="5" fill="#fff7d6" stroke="#b08900"/>"##,
                x(step.thread) + 2,
                y(at) + 4,
                LANE - 14,
                (end - at) * ROW + ROW - 4
            );
        }
        if let Some(at) = self.violating_step() {
            let _ = writeln!(
                s,
                r##"<rect x="4" y="{}" width="{}" height="{ROW}" fill="#fecaca" fill-opacity="0.55" stroke="#b91c1c"/><text x="{}" y="{}" fill="#b91c1c" font-weight="bold">✗</text>"##,
                y(at) + 2,
                width - 8,
                LEFT - 12,
                y(at) + 17
            );
        }
        for (at, step) in self.steps.iter().enumerate() {
            let (colour, weight) = match (&step.kind, step.touched()) {
                (Kind::Event(e), _) if e.starts_with(VIOLATED) => ("#b91c1c", "bold"),
                (Kind::Begin(_) | Kind::End(..), _) => ("#5c4400", "bold"),
                (Kind::Event(_), Some(t)) => (t.colour(), "normal"),
                (Kind::Event(_), None) => ("#333", "normal"),
            };
            let _ = writeln!(s, r##"<text x="8" y="{}" fill="#888">#{:03}</text>"##, y(at) + 17, step.seq);
            let text: String = step.text().chars().take(38).collect();
            let _ = writeln!(
                s,
                r##"<text x="{}" y="{}" fill="{colour}" font-weight="{weight}"><title>{}</title>{}</text>"##,
                x(step.thread) + 10,
                y(at) + 17,
                escape(&step.text()),
                escape(&text)
            );
        }
        for h in self.hand_offs() {
            let (from, to) = (&self.steps[h.from], &self.steps[h.to]);
            let (x1, x2) = (x(from.thread) + LANE / 2, x(to.thread) + LANE / 2);
            let (x1, x2) = if x1 < x2 { (x1 + 110, x2 - 140) } else { (x1 - 140, x2 + 110) };
            let _ = writeln!(
                s,
                r##"<path d="M{x1},{} L{x2},{}" stroke="#c2410c" stroke-width="1.6" fill="none" marker-end="url(#arrow)"/>"##,
                y(h.from) + 12,
                y(h.to) + 12
            );
        }
        s.push_str("</svg>\n");
        s
    }
}

fn legend(x: usize, y: usize) -> String {
    let mut s = String::new();
    let mut at = x;
    for (label, colour) in [
        ("operation", "#b08900"),
        (Touched::LifecycleLock.name(), Touched::LifecycleLock.colour()),
        (Touched::CacheState.name(), Touched::CacheState.colour()),
        (Touched::Reservation.name(), Touched::Reservation.colour()),
        (Touched::Move.name(), Touched::Move.colour()),
        ("lock hand-off", "#c2410c"),
    ] {
        let _ = write!(
            s,
            r#"<rect x="{at}" y="{}" width="10" height="10" fill="{colour}"/><text x="{}" y="{}" fill="{colour}">{label}</text>"#,
            y - 9,
            at + 14,
            y
        );
        at += 24 + label.len() * 8;
    }
    s.push('\n');
    s
}

/// What `text`, a step of a thread with the operations `open`, is: one of `resident`'s events
/// (`· ...`), the return of an open operation (`op -> out`, matched on the operation's own
/// text, which may hold ` -> ` itself), the start of one (`op ...`), or a note.
fn kind(text: &str, open: &mut Vec<String>) -> Kind {
    if let Some(event) = text.trim_start().strip_prefix("· ") {
        return Kind::Event(event.to_owned());
    }
    let returned =
        open.iter().rposition(|op| text.strip_prefix(op.as_str()).is_some_and(|t| t.starts_with(" -> ")));
    if let Some(at) = returned {
        let op = open.remove(at);
        let out = text[op.len() + " -> ".len()..].to_owned();
        return Kind::End(op, out);
    }
    if let Some(op) = text.strip_suffix(" ...") {
        open.push(op.to_owned());
        return Kind::Begin(op.to_owned());
    }
    Kind::Event(text.to_owned())
}

fn escape(text: &str) -> String {
    text.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;").replace('"', "&quot;")
}
