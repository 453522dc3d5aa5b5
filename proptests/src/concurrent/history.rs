//! Recording a concurrent history for the [linearizability](super::linearizability) check, with
//! plain std primitives (no scheduling point of the checker is added), and reporting a history no
//! order explains as a violation of the running execution (so its schedule is replayable).

use std::fmt::Debug;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

use resident_sim::violation::Violation;

use super::linearizability::{Call, Spec, check};

/// The calls of one execution, in invocation order, on a logical clock of call events.
pub struct History<Op, Ret> {
    clock: AtomicU64,
    calls: Mutex<Vec<Call<Op, Ret>>>,
    /// What each event's stamp reads (see [`History::stamped`]).
    stamp: Option<Stamp>,
    /// Per event, in clock order: its tick and its stamp.
    stamps: Mutex<Vec<(u64, u64)>>,
}

/// A count that only grows, read at each event of a [`History`] without a scheduling point.
type Stamp = Box<dyn Fn() -> u64 + Send + Sync>;

impl<Op, Ret> Default for History<Op, Ret> {
    fn default() -> Self {
        Self {
            clock: AtomicU64::new(0),
            calls: Mutex::new(Vec::new()),
            stamp: None,
            stamps: Mutex::default(),
        }
    }
}

impl<Op, Ret> History<Op, Ret> {
    /// A history whose events are stamped with `stamp` (the execution's deadlines fired so
    /// far), for [`History::decided_after`].
    pub fn stamped(stamp: Stamp) -> Self {
        Self { stamp: Some(stamp), ..Self::default() }
    }

    /// The next tick of the clock, stamped.
    fn tick(&self) -> u64 {
        let mut stamps = self.stamps.lock().expect("history lock");
        let tick = self.clock.fetch_add(1, Ordering::SeqCst);
        if let Some(stamp) = &self.stamp {
            stamps.push((tick, stamp()));
        }
        tick
    }
}

impl<Op: Clone, Ret: Clone> History<Op, Ret> {
    /// Call `op` of `thread` is invoked now; returns its index, for [`History::end`].
    pub fn begin(&self, thread: usize, op: Op) -> usize {
        let invoke = self.tick();
        let mut calls = self.calls.lock().expect("history lock");
        calls.push(Call { thread, op, ret: None, invoke, response: None, decided: None });
        calls.len() - 1
    }

    /// Call `at` returned `ret` now (`None`: it unwound, its outcome unknown).
    pub fn end(&self, at: usize, ret: Option<Ret>) {
        let response = self.tick();
        let mut calls = self.calls.lock().expect("history lock");
        calls[at].response = Some(response);
        calls[at].ret = ret;
    }

    /// Call `at`, which has returned, decided what it returned no earlier than the moment the
    /// stamp reached `stamp`: it takes effect after every event stamped below it, no earlier
    /// than the first event stamped `stamp` or more ([`Call::decided`]).
    pub fn decided_after(&self, at: usize, stamp: u64) {
        let stamps = self.stamps.lock().expect("history lock");
        let first = stamps.iter().find(|&&(_, s)| s >= stamp).map(|&(tick, _)| tick);
        if let Some(first) = first {
            self.calls.lock().expect("history lock")[at].decided = Some(first);
        }
    }

    /// Call `at` as recorded so far.
    pub fn get(&self, at: usize) -> Call<Op, Ret> {
        self.calls.lock().expect("history lock")[at].clone()
    }

    /// Every call recorded so far.
    pub fn calls(&self) -> Vec<Call<Op, Ret>> {
        self.calls.lock().expect("history lock").clone()
    }
}

/// Raises a `linearizability` violation, listing the calls, unless some order of `history`
/// explains every recorded result under `spec` from `init`.
pub fn ensure_linearizable<S: Spec>(spec: &S, init: S::State, history: &[Call<S::Op, S::Ret>])
where
    S::Op: Debug,
    S::Ret: Debug,
{
    if let Err(failure) = check(spec, init, history) {
        let lines: Vec<String> = history
            .iter()
            .enumerate()
            .map(|(n, c)| {
                let decided = c.decided.map(|d| format!(", decided at {d}")).unwrap_or_default();
                format!(
                    "  #{n} T{} {:?} -> {:?} [{}, {:?}{decided}]",
                    c.thread, c.op, c.ret, c.invoke, c.response
                )
            })
            .collect();
        Violation::raise(
            "linearizability",
            format!(
                "no order of the calls explains their results (longest linearizable prefix: {:?})\n{}",
                failure.longest_prefix,
                lines.join("\n")
            ),
        );
    }
}
