//! What every family of generated programs shares: a program runs on a fresh sim runtime, is
//! explored under shuttle random and PCT with a seed derived from the program itself (so that
//! shrinking is deterministic), and a failure is stored as the shrunk program plus its schedule.

use std::hash::{Hash, Hasher};

use resident::runtime::Arc;
use resident_sim::explore::schedule::{RecordedSchedule, ScheduleError};
use resident_sim::explore::{Checker, Failure, Replayed, explore_program, replay_program};
use resident_sim::instrumentation;
use resident_sim::mutant_set::MutantSet;
use resident_sim::runtime::{ShuttleRuntime, Time};
use resident_sim::scenarios::execute_with;

/// A generated program: runs once per execution, raising a violation if any check fails.
pub trait Generated: Clone + Hash + Send + Sync + 'static {
    /// The family's name: stored failures are `{KIND}-{mutant}-{seed}.json`.
    const KIND: &'static str;

    /// One execution on `rt` (its threads, then every check).
    fn execute(&self, rt: ShuttleRuntime);

    /// Whether its deadlines may fire at any scheduling point (see [`Generated::time`]).
    fn any_time(&self) -> bool;

    /// When its bounded waits may time out: [`Time::Auto`] (only while every thread is blocked,
    /// so a wait that times out found nobody to wake it), or [`Time::Any`] (at any scheduling
    /// point: timeouts race everything).
    fn time(&self) -> Time {
        if self.any_time() { Time::Any } else { Time::Auto }
    }

    /// A seed derived from the program, so that shrinking replays the same schedules.
    fn seed(&self) -> u64 {
        let mut hasher = std::collections::hash_map::DefaultHasher::new();
        self.hash(&mut hasher);
        hasher.finish()
    }
}

/// Whether a program drawn as `drawn` lets deadlines fire at any point: a fifth of them, chosen
/// by a hash of the draw rather than drawn, so that turning this on drew no other program anew
/// (which campaign finds what depends on every draw). Shrinking recomputes it.
pub fn any_time_for(drawn: &impl Hash) -> bool {
    one_in(drawn, 5)
}

/// Whether a cache program drawn as `drawn` runs under the hard RAM budget (the production
/// default) rather than the overflow policy the catalogue's reconcile schedules explore: half of
/// them, chosen by a hash of the draw like [`any_time_for`].
pub fn hard_budget_for(drawn: &impl Hash) -> bool {
    one_in(&(drawn, "hard budget"), 2)
}

/// One in `n` draws, by a hash of the draw.
fn one_in(drawn: &impl Hash, n: u64) -> bool {
    hash_of(drawn).is_multiple_of(n)
}

/// A hash of the draw, for choices made without drawing (see [`any_time_for`]).
pub fn hash_of(drawn: &impl Hash) -> u64 {
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    drawn.hash(&mut hasher);
    hasher.finish()
}

/// The outcome of checking one program.
#[derive(Debug)]
pub struct Checked {
    /// Executions run (both schedulers).
    pub schedules: usize,
    /// The first failing execution, if any, with its scheduler.
    pub failure: Option<(Checker, Failure)>,
    /// The report faults armed in its executions, each with whether it fired in any of them.
    pub faults: Vec<(&'static str, bool)>,
}

/// Runs `program` for `schedules` executions under shuttle random and as many under PCT (a seed
/// derived from the program, so that shrinking is deterministic), with `mutants` on.
///
/// Each program is checked on an OS thread of its own. shuttle runs every checker thread of an
/// execution on the calling OS thread, and an execution that ends with one of them suspended
/// half-way through an unwind (a step bound hit while another unwinds) leaves that OS thread's
/// panic count raised: every later execution on it would look unwinding to the code under
/// test, and a campaign would report that one failure again for every program after it.
pub fn check_program<P: Generated>(program: &P, schedules: usize, mutants: &MutantSet) -> Checked {
    std::thread::scope(|scope| scope.spawn(|| check_here(program, schedules, mutants)).join())
        .unwrap_or_else(|payload| std::panic::resume_unwind(payload))
}

/// [`check_program`] on the calling OS thread.
fn check_here<P: Generated>(program: &P, schedules: usize, mutants: &MutantSet) -> Checked {
    let program = Arc::new(program.clone());
    let mut run = 0;
    instrumentation::reset_armed();
    let faults = || {
        let unfired = instrumentation::armed_never_fired();
        instrumentation::armed_ever().into_iter().map(|name| (name, !unfired.contains(&name))).collect()
    };
    for checker in [Checker::Random, Checker::Pct] {
        let (program, mutants) = (Arc::clone(&program), mutants.clone());
        let (executions, failure) = explore_program(checker, schedules, program.seed(), move || {
            execute_with::<ShuttleRuntime>(program.time(), &mutants, |rt| program.execute(rt));
        });
        run += executions;
        if let Some(failure) = failure {
            return Checked { schedules: run, failure: Some((checker, failure)), faults: faults() };
        }
    }
    Checked { schedules: run, failure: None, faults: faults() }
}

/// Replays one recorded `schedule` of `program` with `mutants` on.
pub fn replay<P: Generated>(
    program: &P,
    schedule: &RecordedSchedule,
    mutants: &MutantSet,
) -> Result<Replayed, ScheduleError> {
    let (program, mutants) = (Arc::new(program.clone()), mutants.clone());
    replay_program(schedule, move || {
        execute_with::<ShuttleRuntime>(program.time(), &mutants, |rt| program.execute(rt));
    })
}

/// A failing generated program as stored under `fixtures/programs/`: the shrunk program, the
/// mutant it was found with (if any), the violation and the schedule that shows it.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct StoredFailure<P> {
    /// The shrunk program.
    pub program: P,
    /// The mutant that was on, by name.
    pub mutant: Option<String>,
    /// The scheduler that found it.
    pub scheduler: String,
    /// What broke, as reported.
    pub violation: String,
    /// The failing schedule.
    pub schedule: RecordedSchedule,
}
