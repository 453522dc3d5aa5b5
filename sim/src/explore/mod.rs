//! Exploration drivers: run a scenario under shuttle (random or PCT) or loom, catch the first
//! violation, and keep what is needed to replay it.

pub mod batch;
mod quiet;
pub mod schedule;
pub mod watchdog;

use std::collections::BTreeMap;
use std::fmt;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::str::FromStr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::mutant_set::MutantSet;
use serde::{Deserialize, Serialize};
use shuttle::scheduler::{
    PctScheduler, RandomScheduler, Scheduler, UncontrolledNondeterminismCheckScheduler,
};
use shuttle::{Config, FailurePersistence, MaxSteps, Runner};

use crate::scenario::Scenario;
use crate::trace;
use crate::violation::Violation;
use schedule::{RecordedSchedule, Recorder, Recording, Replay};

/// Bound on scheduling steps of one shuttle execution; past it the execution fails as a
/// livelock (every scenario finishes in a few hundred steps).
const MAX_STEPS: usize = 100_000;

/// Which checker and strategy explores a scenario.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Checker {
    /// shuttle's uniformly random scheduler.
    Random,
    /// shuttle's PCT scheduler (probabilistic concurrency testing, bounded priority changes).
    Pct,
    /// loom's exhaustive search under a preemption bound.
    Loom,
}

impl Checker {
    /// The name used on the command line and in replay files.
    pub fn name(self) -> &'static str {
        match self {
            Checker::Random => "random",
            Checker::Pct => "pct",
            Checker::Loom => "loom",
        }
    }
}

impl fmt::Display for Checker {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // `pad`, not `write_str`: a table's width and alignment apply.
        f.pad(self.name())
    }
}

impl FromStr for Checker {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "random" => Ok(Checker::Random),
            "pct" => Ok(Checker::Pct),
            "loom" => Ok(Checker::Loom),
            other => Err(format!("unknown scheduler {other:?} (random, pct, loom)")),
        }
    }
}

/// How to explore.
#[derive(Debug, Clone)]
pub struct Plan {
    /// shuttle: executions to run. loom: ignored (loom explores until done).
    pub iterations: usize,
    /// shuttle: seed of the scheduler's RNG.
    pub seed: u64,
    /// Mutants switched on.
    pub mutants: MutantSet,
    /// PCT's bug depth (priority change points).
    pub pct_depth: usize,
    /// loom's preemption bound; `None` uses the scenario's own.
    pub preemption_bound: Option<usize>,
    /// The wall time one exploration may take: shuttle stops starting executions after it,
    /// loom stops its search there (no longer exhaustive). `None`: no limit.
    pub time_limit: Option<Duration>,
    /// loom stops its search after this many executions (no longer exhaustive, but the same
    /// executions on every machine). `None`: no limit.
    pub loom_executions: Option<usize>,
}

impl Plan {
    /// `iterations` executions from `seed`, no mutants, PCT depth 3, the scenario's loom bound.
    pub fn new(iterations: usize, seed: u64) -> Self {
        Self {
            iterations,
            seed,
            mutants: MutantSet::NONE,
            pct_depth: 3,
            preemption_bound: None,
            time_limit: None,
            loom_executions: None,
        }
    }

    /// The same plan with loom's search stopped after `executions` (`None`: exhaustive).
    pub fn with_loom_executions(self, executions: Option<usize>) -> Self {
        Self { loom_executions: executions, ..self }
    }

    /// The same plan within `limit` of wall time per exploration (`None`: no limit).
    pub fn with_time_limit(self, limit: Option<Duration>) -> Self {
        Self { time_limit: limit, ..self }
    }

    /// The same plan with `mutants` on.
    pub fn with_mutants(self, mutants: MutantSet) -> Self {
        Self { mutants, ..self }
    }
}

/// The first failing execution of an exploration.
#[derive(Debug, Clone)]
pub struct Failure {
    /// 1-based index of the failing execution.
    pub iteration: usize,
    /// What broke.
    pub violation: Violation,
    /// The failing schedule (shuttle only; loom re-explores deterministically instead).
    pub schedule: Option<RecordedSchedule>,
    /// Per-thread trace of the failing execution.
    pub trace: BTreeMap<String, Vec<String>>,
}

/// The result of exploring one scenario with one checker.
#[derive(Debug, Clone)]
pub struct Outcome {
    /// The scenario id.
    pub scenario: &'static str,
    /// The checker.
    pub checker: Checker,
    /// Executions run (up to and including a failing one).
    pub iterations: usize,
    /// Wall time.
    pub elapsed: Duration,
    /// The first failure, if any.
    pub failure: Option<Failure>,
}

/// Explores `scenario` with `checker` according to `plan`.
pub fn explore(scenario: &Scenario, checker: Checker, plan: Plan) -> Outcome {
    let start = Instant::now();
    let (iterations, failure) = match checker {
        Checker::Random => {
            shuttle_explore(scenario, RandomScheduler::new_from_seed(plan.seed, plan.iterations), plan)
        }
        Checker::Pct => shuttle_explore(
            scenario,
            PctScheduler::new_from_seed(plan.seed, plan.pct_depth, plan.iterations),
            plan,
        ),
        Checker::Loom => loom_explore(scenario, plan),
    };
    Outcome { scenario: scenario.id, checker, iterations, elapsed: start.elapsed(), failure }
}

fn shuttle_config() -> Config {
    shuttle_config_within(None)
}

fn shuttle_config_within(limit: Option<Duration>) -> Config {
    let mut config = Config::new();
    config.max_time = limit;
    // Failures are reported by these drivers (with our own replayable schedule), not printed.
    config.failure_persistence = FailurePersistence::None;
    config.max_steps = MaxSteps::FailAfter(MAX_STEPS);
    config
}

fn shuttle_explore<S: Scheduler + 'static>(
    scenario: &Scenario,
    scheduler: S,
    plan: Plan,
) -> (usize, Option<Failure>) {
    let (owned, mutants) = (scenario.clone(), plan.mutants);
    shuttle_run(scenario.id, scheduler, plan.time_limit, move || owned.run_shuttle(&mutants))
}

/// Explores any program under shuttle (`checker`: random or PCT) for `iterations` schedules
/// from `seed`: what generated programs use. `body` runs one execution (see
/// [`execute_with`](crate::scenarios::execute_with)). Returns the executions run and the first
/// failure, with its replayable schedule.
pub fn explore_program(
    checker: Checker,
    iterations: usize,
    seed: u64,
    body: impl Fn() + Send + Sync + 'static,
) -> (usize, Option<Failure>) {
    match checker {
        Checker::Random => {
            shuttle_run("a program", RandomScheduler::new_from_seed(seed, iterations), None, body)
        }
        Checker::Pct => {
            shuttle_run("a program", PctScheduler::new_from_seed(seed, 3, iterations), None, body)
        }
        Checker::Loom => panic!("generated programs run under shuttle"),
    }
}

fn shuttle_run<S: Scheduler + 'static>(
    what: &str,
    scheduler: S,
    limit: Option<Duration>,
    body: impl Fn() + Send + Sync + 'static,
) -> (usize, Option<Failure>) {
    let body = Arc::new(body);
    let recorder = Recorder::default();
    let runner = Runner::new(Recording::new(scheduler, recorder.clone()), shuttle_config_within(limit));
    let run = Arc::clone(&body);
    let label = format!("{what} under shuttle");
    let result = trace::with_capture(false, || {
        quiet::run(&label, || {
            runner.run(move || {
                execution_starts();
                run();
            })
        })
    });
    match result {
        Ok(iterations) => (iterations, None),
        Err(violation) => {
            let (iteration, schedule) = (recorder.executions(), recorder.schedule());
            // The failing execution once more, from its schedule, with its trace kept.
            let trace = replay_program(&schedule, move || body()).map(|r| r.trace).unwrap_or_default();
            (iteration, Some(Failure { iteration, violation, schedule: Some(schedule), trace }))
        }
    }
}

fn loom_explore(scenario: &Scenario, plan: Plan) -> (usize, Option<Failure>) {
    let (iterations, result) = loom_run(scenario, &plan, plan.time_limit, false);
    let failure = result.err().map(|violation| {
        // loom explores in the same order every time: the same failing execution comes again,
        // this time with its trace kept (and no time limit: the first search reached it).
        let _ = loom_run(scenario, &plan, None, true);
        Failure { iteration: iterations, violation, schedule: None, trace: trace::per_thread() }
    });
    (iterations, failure)
}

/// One loom search of `scenario`: the executions it ran, and its first violation.
fn loom_run(
    scenario: &Scenario,
    plan: &Plan,
    limit: Option<Duration>,
    capture: bool,
) -> (usize, Result<(), Violation>) {
    let executions = Arc::new(AtomicUsize::new(0));
    let mut builder = loom::model::Builder::new();
    builder.preemption_bound = plan.preemption_bound.or(scenario.loom).or(Some(2));
    // No wait polls, so loom's default branch bound is ample for a correct program; a mutant
    // that spins hits it. (Above 65,535 loom's own branch counter overflows instead.)
    builder.max_branches = 10_000;
    builder.max_duration = limit;
    if plan.loom_executions.is_some() {
        builder.max_permutations = plan.loom_executions;
        // loom compares the count with the cap only every `checkpoint_interval` executions.
        builder.checkpoint_interval = 500;
    }
    let (owned, mutants, count) = (scenario.clone(), plan.mutants.clone(), Arc::clone(&executions));
    let label = format!("{} under loom", scenario.id);
    let result = trace::with_capture(capture, || {
        quiet::run(&label, || {
            builder.check(move || {
                count.fetch_add(1, Ordering::Relaxed);
                execution_starts();
                owned.run_loom(&mutants);
            })
        })
    });
    (executions.load(Ordering::Relaxed), result)
}

/// Runs `iterations` random schedules of `scenario` from `seed`, each twice (recorded, then
/// replayed) under shuttle's nondeterminism checker, which compares the two step by step
/// (runnable threads, data choices, length). `None` if every schedule ran identically.
pub fn check_determinism(scenario: &Scenario, iterations: usize, seed: u64) -> Option<Violation> {
    let scheduler =
        UncontrolledNondeterminismCheckScheduler::new(RandomScheduler::new_from_seed(seed, iterations));
    let runner = Runner::new(scheduler, shuttle_config());
    let owned = scenario.clone();
    quiet::run(&format!("{} under shuttle's determinism check", scenario.id), || {
        runner.run(move || {
            execution_starts();
            owned.run_shuttle(&MutantSet::NONE);
        })
    })
    .err()
}

/// The outcome of replaying one recorded schedule.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Replayed {
    /// The violation the replay raised, if any.
    pub violation: Option<Violation>,
    /// Where the program stopped following the schedule, if it did.
    pub diverged: Option<String>,
    /// Per-thread trace of the replayed execution.
    pub trace: BTreeMap<String, Vec<String>>,
}

/// Replays `schedule` of `scenario` once, with `mutants` on.
pub fn replay(
    scenario: &Scenario,
    schedule: &RecordedSchedule,
    mutants: &MutantSet,
) -> Result<Replayed, schedule::ScheduleError> {
    let (scenario, mutants) = (scenario.clone(), mutants.clone());
    replay_program(schedule, move || scenario.run_shuttle(&mutants))
}

/// Replays `schedule` of any program once (see [`explore_program`]).
pub fn replay_program(
    schedule: &RecordedSchedule,
    body: impl Fn() + Send + Sync + 'static,
) -> Result<Replayed, schedule::ScheduleError> {
    let diverged = Arc::new(Mutex::new(None));
    let scheduler = Replay::new(schedule, Arc::clone(&diverged))?;
    let runner = Runner::new(scheduler, shuttle_config());
    let result = quiet::run("a replay", || {
        runner.run(move || {
            execution_starts();
            body();
        })
    });
    let diverged = diverged.lock().expect("divergence lock").clone();
    Ok(Replayed { violation: result.err(), diverged, trace: trace::per_thread() })
}

/// An execution starts: a fresh trace, a beat for the watchdog.
fn execution_starts() {
    trace::reset();
    watchdog::execution_starts();
}

/// Runs `f`, turning a panic (a failed execution) into its [`Violation`].
fn catch<T>(f: impl FnOnce() -> T) -> Result<T, Violation> {
    catch_unwind(AssertUnwindSafe(f))
        .map_err(|payload| crate::violation::first().unwrap_or_else(|| Violation::from_payload(&*payload)))
}
