//! The kill matrix: every mutant must make the scenario that targets it fail.

use serde::Serialize;

use crate::mutant_set::MutantSet;
use resident::mutants::Mutant;

use crate::explore::{self, Checker, Failure, Outcome, Plan};
use crate::replay_file::ReplayFile;
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
    /// Executions until the first failure, in the order the schedulers ran (all executions
    /// tried, if not killed).
    pub iterations: usize,
    /// The failing execution under shuttle random, if it ran and killed the mutant.
    pub random: Option<usize>,
    /// The failing execution under shuttle PCT, if it ran and killed the mutant.
    pub pct: Option<usize>,
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

/// Tries to kill `mutant` with `scenario` under shuttle random and under PCT, each with
/// `budget` executions from `seed`. `iterations` counts the executions until the first kill
/// (random first); the failure kept for replay is the first one found.
pub fn kill(mutant: Mutant, scenario: &Scenario, budget: usize, seed: u64) -> Kill {
    kill_under(mutant, scenario, budget, seed, [Checker::Random, Checker::Pct], false)
}

/// Like [`kill`], but stops at the first shuttle scheduler that kills `mutant`, trying PCT
/// first (within 5,000 executions it kills all but two of the catalogue's pairs, random about
/// nine in ten); a lost-wakeup mutant still runs under both, as it must be killed by both.
/// What a test that asks only whether each mutant dies needs, without a second scheduler's
/// whole budget spent on a mutant the first one killed. `iterations` counts PCT's executions
/// first.
pub fn first(mutant: Mutant, scenario: &Scenario, budget: usize, seed: u64) -> Kill {
    let both = Kill::untried(mutant, scenario).is_lost_wakeup();
    kill_under(mutant, scenario, budget, seed, [Checker::Pct, Checker::Random], !both)
}

/// The schedulers of `order` in turn, stopping after the first kill if `stop`.
fn kill_under(
    mutant: Mutant,
    scenario: &Scenario,
    budget: usize,
    seed: u64,
    order: [Checker; 2],
    stop: bool,
) -> Kill {
    let mut k = Kill::untried(mutant, scenario);
    for checker in order {
        if stop && k.killed {
            break;
        }
        let plan = Plan::new(budget, seed).with_mutants(MutantSet::only(mutant));
        let outcome = explore::explore(scenario, checker, plan.clone());
        if !k.killed {
            k.iterations += outcome.iterations;
        }
        let Some(failure) = outcome.failure else { continue };
        *if checker == Checker::Random { &mut k.random } else { &mut k.pct } = Some(failure.iteration);
        if !k.killed {
            k.killed = true;
            k.checker = Some(checker);
            k.failure = Some((failure, plan));
        }
    }
    k
}

impl Kill {
    /// The row of `mutant` against `scenario` before any execution: not killed yet.
    pub fn untried(mutant: Mutant, scenario: &Scenario) -> Self {
        Self {
            mutant: mutant.name(),
            scenario: scenario.id,
            killed: false,
            iterations: 0,
            random: None,
            pct: None,
            checker: None,
            failure: None,
        }
    }

    /// The replay file of the failure that killed the mutant (`None` if it survived).
    pub fn replay_file(&self) -> Option<ReplayFile> {
        let (failure, plan) = self.failure.as_ref()?;
        let outcome = Outcome {
            scenario: self.scenario,
            checker: self.checker?,
            iterations: failure.iteration,
            elapsed: Default::default(),
            failure: Some(failure.clone()),
        };
        ReplayFile::from_outcome(&outcome, plan)
    }

    /// Whether this is a lost-wakeup mutant (a notify site switched off): those must be killed
    /// under both shuttle schedulers.
    pub fn is_lost_wakeup(&self) -> bool {
        self.mutant.starts_with("lost-wakeup-")
    }
}
