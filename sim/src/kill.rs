//! The kill matrix: every mutant must make the scenario that targets it fail.

use serde::Serialize;

use crate::mutant_set::MutantSet;
use resident::mutants::Mutant;

use crate::explore::{self, Checker, Failure, Plan};
use crate::scenarios::{CATALOGUE, Scenario};

/// One row of the kill matrix.
#[derive(Debug, Clone, Serialize)]
pub struct Kill {
    /// The mutant's name.
    pub mutant: &'static str,
    /// The scenario that targets it.
    pub scenario: &'static str,
    /// Whether the scenario failed with the mutant on.
    pub killed: bool,
    /// Executions until the first failure (all executions tried, if not killed).
    pub iterations: usize,
    /// The checker that found it.
    #[serde(skip)]
    pub checker: Option<Checker>,
    /// The failure, with its replayable schedule.
    #[serde(skip)]
    pub failure: Option<(Failure, Plan)>,
}

/// Every `(mutant, scenario)` pair of the catalogue, in catalogue order.
pub fn pairs() -> impl Iterator<Item = (Mutant, &'static Scenario)> {
    CATALOGUE.iter().flat_map(|s| s.targets.iter().map(move |m| (*m, s)))
}

/// Tries to kill `mutant` with `scenario`: shuttle random, then PCT, each with `budget`
/// executions from `seed`. Iterations count every execution tried.
pub fn kill(mutant: Mutant, scenario: &'static Scenario, budget: usize, seed: u64) -> Kill {
    let mut tried = 0;
    for checker in [Checker::Random, Checker::Pct] {
        let plan = Plan::new(budget, seed).with_mutants(MutantSet::only(mutant));
        let outcome = explore::explore(scenario, checker, plan.clone());
        tried += outcome.iterations;
        if let Some(failure) = outcome.failure {
            return Kill {
                mutant: mutant.name(),
                scenario: scenario.id,
                killed: true,
                iterations: tried,
                checker: Some(checker),
                failure: Some((failure, plan)),
            };
        }
    }
    Kill {
        mutant: mutant.name(),
        scenario: scenario.id,
        killed: false,
        iterations: tried,
        checker: None,
        failure: None,
    }
}
