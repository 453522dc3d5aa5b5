//! Recording and replaying shuttle schedules.
//!
//! [`Recording`] wraps any shuttle scheduler and writes down every decision it makes (which task
//! runs, which random value a task draws) for the current execution. [`Replay`] feeds those
//! decisions back. The text form is ours (`t<task>` / `r<hex value>` tokens), independent of
//! shuttle's own encoding; it is still only valid for the pinned shuttle version, whose
//! scheduling points it follows.

use std::sync::{Arc, Mutex};

use serde::{Deserialize, Serialize};
use shuttle::scheduler::{Schedule, Scheduler, Task, TaskId};

/// The decisions of one execution.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RecordedSchedule {
    /// Tokens: `t<n>` = run task n, `r<hex>` = a random draw returned this value.
    pub steps: String,
}

#[derive(Debug, Default)]
struct Log {
    executions: usize,
    steps: Vec<Decision>,
}

/// Shared view of what a [`Recording`] scheduler saw last.
#[derive(Debug, Clone, Default)]
pub struct Recorder(Arc<Mutex<Log>>);

impl Recorder {
    /// Executions started so far.
    pub fn executions(&self) -> usize {
        self.0.lock().expect("recorder lock").executions
    }

    /// The decisions of the current (or last) execution.
    pub fn schedule(&self) -> RecordedSchedule {
        let log = self.0.lock().expect("recorder lock");
        let tokens: Vec<String> = log
            .steps
            .iter()
            .map(|d| match d {
                Decision::Task(task) => format!("t{task}"),
                Decision::Random(value) => format!("r{value:x}"),
            })
            .collect();
        RecordedSchedule { steps: tokens.join(" ") }
    }
}

/// A scheduler that records the decisions of the scheduler it wraps.
pub struct Recording<S> {
    /// Always `Some` until drop.
    inner: Option<S>,
    log: Recorder,
}

impl<S: Scheduler> Recording<S> {
    /// Wraps `inner`; decisions show up in `log`.
    pub fn new(inner: S, log: Recorder) -> Self {
        Self { inner: Some(inner), log }
    }

    fn inner(&mut self) -> &mut S {
        self.inner.as_mut().expect("the inner scheduler lives until drop")
    }
}

impl<S> Drop for Recording<S> {
    fn drop(&mut self) {
        // shuttle's random scheduler prints its own replay instructions when dropped during a
        // failure; the drivers report failures with our schedule instead.
        if let Some(inner) = self.inner.take().filter(|_| std::thread::panicking()) {
            std::mem::forget(inner);
        }
    }
}

impl<S: Scheduler> Scheduler for Recording<S> {
    fn new_execution(&mut self) -> Option<Schedule> {
        let schedule = self.inner().new_execution()?;
        let mut log = self.log.0.lock().expect("recorder lock");
        log.executions += 1;
        log.steps.clear();
        Some(schedule)
    }

    fn next_task(&mut self, runnable: &[&Task], current: Option<TaskId>, yielding: bool) -> Option<TaskId> {
        let task = self.inner().next_task(runnable, current, yielding)?;
        self.log.0.lock().expect("recorder lock").steps.push(Decision::Task(usize::from(task)));
        Some(task)
    }

    fn next_u64(&mut self) -> u64 {
        let value = self.inner().next_u64();
        self.log.0.lock().expect("recorder lock").steps.push(Decision::Random(value));
        value
    }
}

/// Why a recorded schedule could not be followed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ScheduleError {
    /// A token is neither `t<n>` nor `r<hex>`.
    #[error("malformed schedule token {0:?}")]
    Malformed(String),
}

/// One decision. A recording keeps them as they are made (no text, no allocation: it runs in
/// every execution) and writes them out only when a schedule is asked for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Decision {
    Task(usize),
    Random(u64),
}

/// A scheduler that replays one recorded execution; it reports where the program diverged.
pub struct Replay {
    decisions: Vec<Decision>,
    next: usize,
    started: bool,
    diverged: Arc<Mutex<Option<String>>>,
}

impl Replay {
    /// Parses `schedule`; `diverged` receives a description of the first divergence.
    pub fn new(
        schedule: &RecordedSchedule,
        diverged: Arc<Mutex<Option<String>>>,
    ) -> Result<Self, ScheduleError> {
        let decisions = schedule
            .steps
            .split_whitespace()
            .map(|token| {
                let parsed = match token.split_at_checked(1) {
                    Some(("t", n)) => n.parse().ok().map(Decision::Task),
                    Some(("r", v)) => u64::from_str_radix(v, 16).ok().map(Decision::Random),
                    _ => None,
                };
                parsed.ok_or_else(|| ScheduleError::Malformed(token.to_owned()))
            })
            .collect::<Result<_, _>>()?;
        Ok(Self { decisions, next: 0, started: false, diverged })
    }

    fn diverge(&self, what: String) {
        let mut diverged = self.diverged.lock().expect("divergence lock");
        diverged.get_or_insert(what);
    }
}

impl Scheduler for Replay {
    fn new_execution(&mut self) -> Option<Schedule> {
        if std::mem::replace(&mut self.started, true) {
            return None;
        }
        Some(Schedule::new(0))
    }

    fn next_task(&mut self, runnable: &[&Task], current: Option<TaskId>, _yielding: bool) -> Option<TaskId> {
        let step = self.next;
        self.next += 1;
        match self.decisions.get(step) {
            Some(Decision::Task(id)) if runnable.iter().any(|t| usize::from(t.id()) == *id) => {
                Some(TaskId::from(*id))
            }
            other => {
                self.diverge(format!("step {step}: recorded {other:?}, runnable tasks differ"));
                // Past the recorded schedule, go round-robin so that polling waits make progress.
                let after = |t: &&&Task| current.is_some_and(|c| t.id() > c);
                let next = runnable.iter().find(after).unwrap_or(&runnable[0]);
                Some(next.id())
            }
        }
    }

    fn next_u64(&mut self) -> u64 {
        let step = self.next;
        self.next += 1;
        match self.decisions.get(step) {
            Some(Decision::Random(value)) => *value,
            other => {
                self.diverge(format!("step {step}: recorded {other:?}, program drew a random value"));
                // Past the recorded schedule, a fixed spread of values: a constant would answer
                // every draw alike (e.g. wake every wait spuriously, for ever).
                past_the_schedule(step)
            }
        }
    }
}

/// A value for draw `step` past the end of a recorded schedule: splitmix64 of the step, so that
/// draws spread like a random generator's while staying deterministic.
fn past_the_schedule(step: usize) -> u64 {
    let mut z = (step as u64).wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}
