//! The designation protocol's fairness (SPEC 2.14), checked on every execution from the ghost
//! steps `resident` reports to its runtime ([`SlotStep`]): once a designated slot's last lease
//! has ended (or it was idle when designated), the waiting add is owed it, and a lease taken on
//! it before the waiter acts on it (closing it to evict it, or a remove or replace closing it)
//! or before every designation of it ends is a violation (`F1`): the waiter lost its victim
//! to a lease that started after the victim became idle, and starves under a stream of them.
//!
//! The lines too ([`LineStep`]): whoever takes what a line waits for (a `FixedSizeCache`'s slot,
//! the RAM budget's room) is its first waiter, or a caller not in line while nobody waits; any
//! other is served out of arrival order (`F2`).
//!
//! The steps arrive under the monitor that keeps the slot or the line, in their true order;
//! every checker thread of an execution runs on one OS thread, so the ghost tables are that
//! execution's alone.

use std::cell::RefCell;
use std::collections::{HashMap, VecDeque};

use resident::runtime::{LineStep, SlotStep};

use crate::violation::Violation;

/// What the checker knows of one live slot.
#[derive(Debug, Default)]
struct Ghost {
    /// Live designations.
    designations: usize,
    /// Idle while designated, and no one acted on it since: the waiter is owed it.
    owed: bool,
}

thread_local! {
    static SLOTS: RefCell<HashMap<usize, Ghost>> = RefCell::new(HashMap::new());
    /// Every line's waiters by ticket, in the order they joined.
    static LINES: RefCell<HashMap<usize, VecDeque<u64>>> = RefCell::new(HashMap::new());
}

/// Starts an execution: forgets every slot and every line.
pub(crate) fn begin_execution() {
    SLOTS.with(|s| s.borrow_mut().clear());
    LINES.with(|l| l.borrow_mut().clear());
}

/// Applies `step` of the line `key` (see [`resident::runtime::Runtime::observe_line`]).
pub(crate) fn observe_line(key: usize, step: LineStep) {
    let barged = LINES.with(|lines| {
        let mut lines = lines.borrow_mut();
        let line = lines.entry(key).or_default();
        match step {
            LineStep::Joined { ticket } => line.push_back(ticket),
            LineStep::Left { ticket } => line.retain(|t| *t != ticket),
            LineStep::Served { ticket } => {
                return line
                    .front()
                    .is_some_and(|first| Some(*first) != ticket)
                    .then(|| (ticket, line.clone()));
            }
            // A step this checker does not know yet changes nothing it tracks.
            _ => {}
        }
        if line.is_empty() {
            lines.remove(&key);
        }
        None
    });
    if let Some((ticket, line)) = barged {
        // Recorded, not raised: the step runs under the line's monitor.
        let who = ticket.map_or_else(|| "a caller not in line".to_owned(), |t| format!("ticket {t}"));
        Violation::record(
            "F2",
            format!("{who} was served while the line {line:?} waited before it (SPEC 2.14: arrival order)"),
        );
    }
}

/// Applies `step` of the slot `key` (see [`resident::runtime::Runtime::observe`]).
pub(crate) fn observe(key: usize, step: SlotStep) {
    let stolen = SLOTS.with(|slots| {
        let mut slots = slots.borrow_mut();
        if step == SlotStep::Created {
            slots.insert(key, Ghost::default());
            return false;
        }
        let ghost = slots.entry(key).or_default();
        match step {
            SlotStep::Leased => return ghost.owed,
            SlotStep::Designated { idle } => {
                ghost.designations += 1;
                ghost.owed |= idle;
            }
            SlotStep::IdleWhileDesignated => ghost.owed = true,
            SlotStep::Undesignated => {
                ghost.designations = ghost.designations.saturating_sub(1);
                ghost.owed &= ghost.designations > 0;
            }
            SlotStep::Closed => ghost.owed = false,
            // A step this checker does not know yet changes nothing it tracks.
            _ => {}
        }
        false
    });
    if stolen {
        // Recorded, not raised: the step runs under the slot's monitor.
        Violation::record(
            "F1",
            "a lease was taken on a designated victim after its last lease ended, before its waiting add acted on it (SPEC 2.14)"
                .to_owned(),
        );
    }
}
