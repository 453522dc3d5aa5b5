//! One seed gives one schedule: every scenario, run twice per schedule under shuttle's
//! nondeterminism checker, takes the same steps and the same data choices (spurious wakeups
//! included); and a recorded failure replays to the same per-thread trace every time.

mod support;

use resident::mutants::Mutant;
use resident_sim::explore::{Checker, Plan, check_determinism, explore, replay};
use resident_sim::mutant_set::MutantSet;
use resident_sim::scenarios::{CATALOGUE, ONE_DEEP, find};

/// Schedules per scenario (each runs twice).
const SCHEDULES: usize = 20;

#[test]
fn every_scenario_is_deterministic_under_shuttle() {
    for scenario in CATALOGUE.iter().chain(ONE_DEEP) {
        if let Some(violation) = check_determinism(scenario, SCHEDULES, support::seed()) {
            panic!("{} is not deterministic: {violation}", scenario.id);
        }
    }
}

#[test]
fn a_recorded_failure_replays_to_the_same_trace_twice() {
    let scenario = find("M-S1").expect("catalogue id");
    let mutants = MutantSet::only(Mutant::RETIRE_WHILE_HELD);
    let plan = Plan::new(5000, support::seed()).with_mutants(mutants.clone());
    let failure = explore(scenario, Checker::Random, plan).failure.expect("the mutant is caught");
    let schedule = failure.schedule.expect("shuttle failures carry a schedule");
    let first = replay(scenario, &schedule, &mutants).expect("replays");
    let second = replay(scenario, &schedule, &mutants).expect("replays");
    assert_eq!(first.diverged, None);
    assert_eq!(first.violation, Some(failure.violation));
    assert_eq!(first, second, "two replays of one schedule differ");
    assert!(!first.trace.is_empty(), "the replay recorded a trace");
}
