//! [`Scenario`]: one named concurrent program over `resident`, explored under shuttle and loom,
//! and the mutants it must catch. The built-in catalogue ([`crate::scenarios::CATALOGUE`]) is
//! written with this API and nothing else; an application checks its own stack the same way.
//!
//! ```
//! use resident_sim::program;
//! use resident_sim::runtime::{Counter, SimRuntime, Time};
//! use resident_sim::scenario::Scenario;
//!
//! /// One execution: the main thread of the program, on the checker's runtime.
//! fn two_threads<R: SimRuntime>(rt: R, n: usize) {
//!     let counter = std::sync::Arc::new(rt.counter());
//!     let other = std::sync::Arc::clone(&counter);
//!     let t = rt.spawn("T1", move || other.add(n));
//!     counter.add(n);
//!     let _ = R::join(t);
//!     assert_eq!(counter.get(), 2 * n);
//! }
//!
//! let n = 2; // a parameter, captured by the program's closure
//! let scenario = Scenario::new("APP-1", "two adders", program!(move |rt| two_threads(rt, n)))
//!     .time(Time::Off)
//!     .loom_bound(2);
//! assert_eq!(scenario.id, "APP-1");
//! ```

use std::fmt;

use resident::mutants::Mutant;
use std::sync::Arc;

use crate::mutant_set::MutantSet;
use crate::runtime::{LoomRuntime, ShuttleRuntime, SimRuntime, Time};

/// One execution of a program, on either checker's runtime: the program's main thread. It
/// spawns its threads on the runtime, joins them and checks what must hold; a panic (or a
/// [`Violation`](crate::violation::Violation) raised with [`ensure!`](crate::ensure)) fails the
/// execution.
///
/// [`program!`](crate::program) builds one from a closure or a function generic over
/// [`SimRuntime`]; implement it by hand for a program that keeps state of its own.
pub trait Program: Send + Sync + 'static {
    /// One execution under shuttle.
    fn shuttle(&self, rt: ShuttleRuntime);
    /// One execution under loom.
    fn loom(&self, rt: LoomRuntime);
}

/// A [`Program`] of two copies of one closure, one per checker runtime: what
/// [`program!`](crate::program) builds.
pub struct Both<S, L> {
    shuttle: S,
    loom: L,
}

impl<S, L> Both<S, L>
where
    S: Fn(ShuttleRuntime) + Send + Sync + 'static,
    L: Fn(LoomRuntime) + Send + Sync + 'static,
{
    /// The program that runs `shuttle` under shuttle and `loom` under loom.
    pub fn new(shuttle: S, loom: L) -> Self {
        Self { shuttle, loom }
    }
}

impl<S, L> Program for Both<S, L>
where
    S: Fn(ShuttleRuntime) + Send + Sync + 'static,
    L: Fn(LoomRuntime) + Send + Sync + 'static,
{
    fn shuttle(&self, rt: ShuttleRuntime) {
        (self.shuttle)(rt);
    }

    fn loom(&self, rt: LoomRuntime) {
        (self.loom)(rt);
    }
}

/// A [`Program`] from a closure of the runtime, or from a function generic over
/// [`SimRuntime`]: the expression is written out once per checker, so the closure's body is
/// type-checked with each runtime in turn.
///
/// Because the expression is written out twice, a `move` closure can capture only `Copy`
/// values by itself; name the others in a `clone(...) =>` prefix, and each copy gets its own
/// clone.
///
/// ```
/// # use resident_sim::{program, runtime::SimRuntime};
/// fn body<R: SimRuntime>(_rt: R) {}
/// let from_fn = program!(body);
/// let size = 3;
/// let from_closure = program!(move |rt| { let _ = (rt, size); });
/// let ids = vec!["a".to_owned(), "b".to_owned()];
/// let with_clones = program!(clone(ids) => move |rt| { let _ = (rt, &ids); });
/// # let _ = (from_fn, from_closure, with_clones);
/// ```
#[macro_export]
macro_rules! program {
    (clone($($captured:ident),+ $(,)?) => $($body:tt)+) => {
        $crate::scenario::Both::new(
            { $(let $captured = $captured.clone();)+ $($body)+ },
            { $(let $captured = $captured.clone();)+ $($body)+ },
        )
    };
    ($($body:tt)+) => {
        $crate::scenario::Both::new({ $($body)+ }, { $($body)+ })
    };
}

/// A named program, how it is explored, and the mutants it must catch.
#[derive(Clone)]
pub struct Scenario {
    /// Its id, e.g. `M-S1` (catalogue ids follow SPEC §5; an application picks its own).
    pub id: &'static str,
    /// One line: the schedule it explores.
    pub description: &'static str,
    /// When bounded waits may time out in this scenario.
    pub time: Time,
    /// loom's preemption bound for this scenario, if it runs under loom.
    pub loom: Option<usize>,
    /// Why it does not run under loom, or why loom does not run its mutants (empty when loom
    /// runs both).
    pub no_loom: &'static str,
    /// Whether loom runs its mutants too (it may check the correct program only).
    pub loom_mutants: bool,
    /// The mutants this scenario must catch.
    pub targets: Vec<Mutant>,
    program: Arc<dyn Program>,
}

impl Scenario {
    /// Scenario `id` running `program`: no time (deadlines never fire), under loom at
    /// preemption bound 2 (its mutants too), no mutant to catch yet.
    pub fn new(id: &'static str, description: &'static str, program: impl Program) -> Self {
        Self {
            id,
            description,
            time: Time::Off,
            loom: Some(2),
            no_loom: "",
            loom_mutants: true,
            targets: Vec::new(),
            program: Arc::new(program),
        }
    }

    /// When bounded waits may time out.
    pub fn time(self, time: Time) -> Self {
        Self { time, ..self }
    }

    /// loom explores it, and its mutants, at preemption bound `bound` (after
    /// [`Scenario::without_loom`] too: the last call decides).
    pub fn loom_bound(self, bound: usize) -> Self {
        Self { loom: Some(bound), no_loom: "", loom_mutants: true, ..self }
    }

    /// loom does not run it, for the reason given.
    pub fn without_loom(self, why: &'static str) -> Self {
        Self { loom: None, no_loom: why, loom_mutants: false, ..self }
    }

    /// loom runs the correct program only; shuttle alone runs its mutants, for the reason
    /// given.
    pub fn loom_correct_only(self, why: &'static str) -> Self {
        Self { no_loom: why, loom_mutants: false, ..self }
    }

    /// It must catch `mutant` (the kill matrix turns it on and expects a failure).
    ///
    /// # Panics
    /// If the mutant's name is not kebab-case (`a-z`, `0-9`, `-`): replay files and file
    /// names carry it.
    pub fn must_kill(mut self, mutant: Mutant) -> Self {
        crate::registry::check_mutant_name(mutant);
        if !self.targets.contains(&mutant) {
            self.targets.push(mutant);
        }
        self
    }

    /// One execution under shuttle with `mutants` on (call inside a shuttle test).
    pub fn run_shuttle(&self, mutants: &MutantSet) {
        execute_with::<ShuttleRuntime>(self.time, mutants, |rt| self.program.shuttle(rt));
    }

    /// One execution under loom with `mutants` on (call inside a loom model).
    pub fn run_loom(&self, mutants: &MutantSet) {
        execute_with::<LoomRuntime>(self.time, mutants, |rt| self.program.loom(rt));
    }
}

impl fmt::Debug for Scenario {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Scenario")
            .field("id", &self.id)
            .field("time", &self.time)
            .field("loom", &self.loom)
            .field("targets", &self.targets)
            .finish_non_exhaustive()
    }
}

/// Runs one execution of `body` on runtime `R`: sets up time, the trace and the probes, runs
/// `body` as the main thread, joins the timer and fails the execution if a violation was
/// recorded. What [`Scenario::run_shuttle`] and generated programs run.
pub fn execute_with<R: SimRuntime>(time: Time, mutants: &MutantSet, body: impl FnOnce(R)) {
    crate::trace::set_thread_namer(R::thread_name);
    crate::unwinding::begin_execution(R::current_task);
    crate::violation::begin_execution(R::yield_now);
    crate::instrumentation::begin_execution(R::monitors_held);
    crate::fairness::begin_execution();
    let rt = R::for_execution(time, mutants.clone());
    let main = rt.clone();
    let recorder = crate::instrumentation::ScriptedRecorder;
    metrics::with_local_recorder(&recorder, move || rt.with_time(move || body(main)));
    crate::instrumentation::disarm();
    crate::violation::fail_if_recorded();
}
