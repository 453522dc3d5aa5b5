//! Every mutant is caught by the scenario that targets it, the failure replays exactly from
//! its recorded schedule, and loom finds it too where the scenario fits loom.

mod support;

/// The stored replays (one test binary with the kill matrix: each binary links both checkers).
#[path = "mutants/replays.rs"]
mod replays;

use resident::mutants::Mutant;
use resident_sim::explore::{Checker, Plan, explore};
use resident_sim::kill;
use resident_sim::mutant_set::MutantSet;
use resident_sim::replay_file::ReplayFile;

/// shuttle executions per scheduler before a mutant counts as surviving.
const BUDGET: usize = 5000;

#[test]
fn every_mutant_is_targeted_by_some_scenario() {
    for mutant in Mutant::ALL {
        assert!(kill::pairs().any(|(m, _)| m == *mutant), "no scenario targets {mutant}");
    }
}

// Two halves, one per test thread: a single test over every pair would run on one core.
#[test]
fn shuttle_kills_every_mutant_and_the_failure_replays_first_half() {
    shuttle_kills_every_mutant_and_the_failure_replays(0);
}

#[test]
fn shuttle_kills_every_mutant_and_the_failure_replays_second_half() {
    shuttle_kills_every_mutant_and_the_failure_replays(1);
}

/// Every other pair from `half` (0 or 1): each is killed and its failure replays. The first
/// scheduler that kills a mutant settles it (PCT first), but for a lost-wakeup mutant, which
/// both must kill: random's whole budget spent on mutants PCT had killed was nine tenths of
/// this test's executions.
fn shuttle_kills_every_mutant_and_the_failure_replays(half: usize) {
    for (mutant, scenario) in kill::pairs().skip(half).step_by(2) {
        let k = kill::first(mutant, scenario, BUDGET, support::seed());
        assert!(k.killed, "{mutant} survived {} executions of {}", k.iterations, scenario.id);
        if k.is_lost_wakeup() {
            assert!(
                k.random.is_some() && k.pct.is_some(),
                "{mutant} must be killed by {} under random and PCT: random {:?}, pct {:?}",
                scenario.id,
                k.random,
                k.pct
            );
        }
        let file = k.replay_file().expect("a shuttle kill has a replayable failure");
        let report = file.replay().expect("replay runs");
        assert!(
            report.reproduced,
            "{mutant}/{}: replay gave {:?} (diverged: {:?}), recorded {}",
            scenario.id, report.replayed.violation, report.replayed.diverged, file.violation
        );
        println!("{mutant} killed by {} after {} executions", scenario.id, k.iterations);
    }
}

// Two halves, as for shuttle: the loom searches are the binary's longest test otherwise.
#[test]
fn loom_kills_every_mutant_of_a_loom_scenario_first_half() {
    loom_kills_every_mutant_of_a_loom_scenario(0);
}

#[test]
fn loom_kills_every_mutant_of_a_loom_scenario_second_half() {
    loom_kills_every_mutant_of_a_loom_scenario(1);
}

/// Every other loom pair from `half` (0 or 1): loom finds each mutant.
fn loom_kills_every_mutant_of_a_loom_scenario(half: usize) {
    if !support::loom_enabled() {
        return;
    }
    let pairs = kill::pairs().filter(|(_, s)| s.loom.is_some() && s.loom_mutants);
    for (mutant, scenario) in pairs.skip(half).step_by(2) {
        let plan = Plan::new(0, 0).with_mutants(MutantSet::only(mutant));
        let outcome = explore(scenario, Checker::Loom, plan);
        let failure = outcome.failure.unwrap_or_else(|| {
            panic!("{mutant} survived loom's {} executions of {}", outcome.iterations, scenario.id)
        });
        println!("{mutant} killed by {} under loom at execution {}", scenario.id, failure.iteration);
    }
}

#[test]
fn a_mutant_free_replay_of_a_mutant_failure_passes() {
    // The recorded schedule is only a failure with the bug on: with it off, the same schedule
    // (or the point where the fixed code leaves it) passes.
    let scenario = resident_sim::scenarios::find("M-L1").expect("catalogue id");
    let plan = Plan::new(BUDGET, support::seed()).with_mutants(MutantSet::only(Mutant::UNLOAD_WHILE_LEASED));
    let outcome = explore(scenario, Checker::Random, plan.clone());
    let mut file = ReplayFile::from_outcome(&outcome, &plan).expect("the mutant is caught");
    file.mutant = None;
    let report = file.replay().expect("replay runs");
    assert_eq!(report.replayed.violation, None, "{:?}", report.replayed);
}
