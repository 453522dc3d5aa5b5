//! The scenario catalogue: one named scenario per schedule id of SPEC.md §5.
//!
//! A scenario is a small concurrent program over `resident` (two to four threads), generic over
//! the checker runtime. It raises a [`Violation`](crate::violation::Violation) when an
//! invariant breaks, inside a thread or in the quiescence checks after every thread is joined.
//! Each scenario names the mutants it must catch.

mod manager;

use resident::mutants::{Mutant, MutantSet};

use crate::runtime::{LoomRuntime, ShuttleRuntime, SimRuntime};

/// The body of a scenario on one runtime.
pub type Body = fn(MutantSet);

/// One catalogue entry.
#[derive(Debug, Clone, Copy)]
pub struct Scenario {
    /// Catalogue id, e.g. `M-S1`.
    pub id: &'static str,
    /// One line: the schedule it explores.
    pub description: &'static str,
    /// Whether bounded waits may time out in this scenario.
    pub timeouts: bool,
    /// loom's preemption bound for this scenario, if it is small enough for loom at all.
    pub loom: Option<usize>,
    /// The mutants this scenario must catch.
    pub targets: &'static [Mutant],
    /// The body under shuttle.
    pub shuttle: Body,
    /// The body under loom.
    pub loom_body: Body,
}

/// Runs a scenario body on runtime `R` for one execution: sets up time, runs, joins the timer.
pub fn execute<R: SimRuntime>(timeouts: bool, mutants: MutantSet, body: fn(R, MutantSet)) {
    crate::trace::set_thread_namer(R::thread_name);
    crate::violation::begin_execution(R::yield_now);
    let rt = R::for_execution(timeouts);
    let timer = rt.start_time();
    body(rt, mutants);
    if let Some(timer) = timer {
        R::join(timer).unwrap_or_else(|payload| std::panic::resume_unwind(payload));
    }
}

macro_rules! scenario {
    ($id:literal, $desc:literal, timeouts: $t:literal, loom: $l:expr, targets: [$($m:ident),*], $body:path) => {
        Scenario {
            id: $id,
            description: $desc,
            timeouts: $t,
            loom: $l,
            targets: &[$(Mutant::$m),*],
            shuttle: |m| execute::<ShuttleRuntime>($t, m, $body),
            loom_body: |m| execute::<LoomRuntime>($t, m, $body),
        }
    };
}

/// Every scenario, in catalogue order.
pub const CATALOGUE: &[Scenario] = &[
    scenario!("M-S1", "split lock generation: remove(X) races two add(X) (upstream S1)",
        timeouts: false, loom: Some(2), targets: [RetireWhileHeld], manager::split_generation),
    scenario!("M-S1b", "the naive fix: retire the entry after release while a waiter holds it (S1b)",
        timeouts: false, loom: Some(2), targets: [RetireAfterRelease], manager::split_generation),
    scenario!("M-S2", "loader failure while a waiter holds the old generation (S2)",
        timeouts: false, loom: Some(2), targets: [RetireOnLoadFailure], manager::load_failure),
    scenario!("M-S2t", "S2 where waiters time out: every reservation is released (S2, timeout)",
        timeouts: true, loom: Some(1), targets: [LeakReservationOnTimeout], manager::load_failure),
    scenario!("M-S2p", "S2 where the loader panics: the panic reaches its caller only (S2, panic)",
        timeouts: false, loom: Some(2), targets: [LeakReservationOnPanic], manager::load_panic),
    scenario!("M-L1", "remove never unloads a model under a live lease",
        timeouts: false, loom: Some(2), targets: [UnloadWhileLeased], manager::remove_under_lease),
];

/// The scenario with catalogue id `id`.
pub fn find(id: &str) -> Option<&'static Scenario> {
    CATALOGUE.iter().find(|s| s.id == id)
}
