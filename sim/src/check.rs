//! [`Checkers`]: check one scenario from a test — it passes under shuttle random, shuttle PCT
//! and loom, every mutant it targets makes it fail, and each such failure replays from its
//! file (and passes on the same schedule with the mutant off).
//!
//! ```no_run
//! # use resident_sim::{check::Checkers, program, scenario::Scenario, runtime::SimRuntime};
//! # fn body<R: SimRuntime>(_rt: R) {}
//! let scenario = Scenario::new("APP-1", "what it explores", program!(body));
//! Checkers::all().failures_to("fixtures/failures").run(&scenario);
//! ```

use std::path::{Path, PathBuf};

use resident::mutants::Mutant;

use crate::explore::{Checker, Outcome, Plan, explore};
use crate::kill::Kill;
use crate::mutant_set::MutantSet;
use crate::registry::Registry;
use crate::replay_file::{ReplayError, ReplayFile};
use crate::scenario::Scenario;
use crate::timeline::Timeline;
use crate::violation::Violation;

/// Which checkers run, how long, and where failures are written.
#[derive(Debug, Clone)]
pub struct Checkers {
    schedulers: Vec<Checker>,
    iterations: usize,
    seed: u64,
    failures: Option<PathBuf>,
}

/// How a [`Checkers::verify`] found a scenario wanting.
#[derive(Debug, thiserror::Error)]
pub enum CheckFailure {
    /// The scenario failed with no mutant on.
    #[error("{scenario} under {checker} failed at execution {execution}: {violation}{}\n{trace}", written(.replay))]
    Failed {
        /// The scenario id.
        scenario: &'static str,
        /// The checker that found it.
        checker: Checker,
        /// 1-based index of the failing execution.
        execution: usize,
        /// What broke.
        violation: Violation,
        /// Where its replay file was written, if anywhere.
        replay: Option<PathBuf>,
        /// The failing execution, one line per step and thread.
        trace: String,
    },
    /// A mutant the scenario targets did not make it fail where it must: under shuttle random
    /// or PCT (both, for a lost-wakeup mutant), and under loom where loom runs its mutants.
    #[error("mutant {mutant} survived {executions} executions of {scenario} (not caught under: {under})")]
    Survived {
        /// The checkers that did not catch it.
        under: String,
        /// The mutant.
        mutant: &'static str,
        /// The scenario id.
        scenario: &'static str,
        /// Executions tried.
        executions: usize,
    },
    /// A mutant's failure did not replay exactly from its file, or its schedule fails with the
    /// mutant off too.
    #[error("{scenario} with {mutant}: {what}")]
    NotReproduced {
        /// The mutant.
        mutant: &'static str,
        /// The scenario id.
        scenario: &'static str,
        /// What the replay showed.
        what: String,
    },
    /// A replay file could not be written or replayed.
    #[error(transparent)]
    Replay(#[from] ReplayError),
}

fn written(replay: &Option<PathBuf>) -> String {
    replay.as_ref().map(|p| format!(" (its replay file: {})", p.display())).unwrap_or_default()
}

/// What a passing [`Checkers::verify`] ran.
#[derive(Debug, Clone)]
pub struct Report {
    /// One outcome per checker, with no mutant on.
    pub outcomes: Vec<Outcome>,
    /// One kill per targeted mutant.
    pub kills: Vec<Kill>,
}

impl Checkers {
    /// shuttle random, shuttle PCT and loom (where the scenario runs under loom), with
    /// `RESIDENT_SIM_ITERATIONS` shuttle executions (default 500) from `RESIDENT_SIM_SEED`
    /// (default `0x5eed`, hex or decimal); `RESIDENT_SIM_LOOM=off` leaves loom out. No replay
    /// file is written unless [`Checkers::failures_to`] says where.
    pub fn all() -> Self {
        let mut schedulers = vec![Checker::Random, Checker::Pct];
        if std::env::var("RESIDENT_SIM_LOOM").as_deref() != Ok("off") {
            schedulers.push(Checker::Loom);
        }
        Self { schedulers, iterations: env_iterations(), seed: env_seed(), failures: None }
    }

    /// These checkers only.
    pub fn only(self, schedulers: &[Checker]) -> Self {
        Self { schedulers: schedulers.to_vec(), ..self }
    }

    /// `iterations` shuttle executions per scheduler (and per mutant kill).
    pub fn iterations(self, iterations: usize) -> Self {
        Self { iterations, ..self }
    }

    /// The shuttle schedulers' seed.
    pub fn seed(self, seed: u64) -> Self {
        Self { seed, ..self }
    }

    /// Writes the replay file of a failure into `dir`.
    pub fn failures_to(self, dir: impl AsRef<Path>) -> Self {
        Self { failures: Some(dir.as_ref().to_owned()), ..self }
    }

    /// [`Checkers::verify`], panicking with the failure (its trace and replay command) if any:
    /// what a `#[test]` calls.
    pub fn run(&self, scenario: &Scenario) -> Report {
        self.verify(scenario).unwrap_or_else(|failure| panic!("{failure}"))
    }

    /// Explores `scenario` with no mutant under each checker; then, for each mutant it
    /// targets, explores it with the mutant on under the same checkers (it must fail under
    /// shuttle random or PCT — both, for a lost-wakeup mutant — and under loom where loom runs
    /// its mutants), replays the first shuttle failure from its replay file (it must fail the
    /// same way) and replays the same schedule with the mutant off (it must pass).
    pub fn verify(&self, scenario: &Scenario) -> Result<Report, CheckFailure> {
        let mut outcomes = Vec::new();
        for &checker in &self.schedulers {
            if checker == Checker::Loom && scenario.loom.is_none() {
                continue;
            }
            let plan = Plan::new(self.iterations, self.seed);
            let outcome = explore(scenario, checker, plan.clone());
            if let Some(failure) = &outcome.failure {
                let replay = match (ReplayFile::from_outcome(&outcome, &plan), &self.failures) {
                    (Some(file), Some(dir)) => Some(file.write_to(dir)?),
                    _ => None,
                };
                return Err(CheckFailure::Failed {
                    scenario: scenario.id,
                    checker,
                    execution: failure.iteration,
                    violation: failure.violation.clone(),
                    replay,
                    trace: Timeline::new(&failure.trace, Some(&failure.violation)).lanes(160),
                });
            }
            outcomes.push(outcome);
        }
        let kills = scenario.targets.iter().map(|&m| self.kill(scenario, m)).collect::<Result<_, _>>()?;
        Ok(Report { outcomes, kills })
    }

    /// Explores `scenario` with `mutant` on under each checker (loom where it runs the
    /// scenario's mutants): it must fail under shuttle random or PCT (both, for a lost-wakeup
    /// mutant) and under loom where loom ran; then the first shuttle failure replays.
    fn kill(&self, scenario: &Scenario, mutant: Mutant) -> Result<Kill, CheckFailure> {
        let plan = Plan::new(self.iterations, self.seed).with_mutants(MutantSet::only(mutant));
        let mut k = Kill::untried(mutant, scenario);
        let (mut shuttle_ran, mut missed) = (Vec::new(), Vec::new());
        for &checker in &self.schedulers {
            if checker == Checker::Loom && !(scenario.loom.is_some() && scenario.loom_mutants) {
                continue;
            }
            let outcome = explore(scenario, checker, plan.clone());
            if !k.killed {
                k.iterations += outcome.iterations;
            }
            if checker != Checker::Loom {
                shuttle_ran.push(checker);
            }
            let Some(failure) = outcome.failure else {
                missed.push(checker);
                continue;
            };
            match checker {
                Checker::Random => k.random = Some(failure.iteration),
                Checker::Pct => k.pct = Some(failure.iteration),
                Checker::Loom => {}
            }
            k.killed = true;
            if k.failure.is_none() && failure.schedule.is_some() {
                k.checker = Some(checker);
                k.failure = Some((failure, plan.clone()));
            }
        }
        let shuttle_missed = shuttle_ran.iter().filter(|c| missed.contains(c)).count();
        let survived = !k.killed
            || missed.contains(&Checker::Loom)
            || (shuttle_missed > 0 && (k.is_lost_wakeup() || shuttle_missed == shuttle_ran.len()));
        if survived {
            let under = missed.iter().map(|c| c.name()).collect::<Vec<_>>().join(", ");
            return Err(CheckFailure::Survived {
                mutant: mutant.name(),
                scenario: scenario.id,
                executions: k.iterations,
                under,
            });
        }
        if let Some(file) = k.replay_file() {
            self.replays_both_ways(scenario, mutant, &file)?;
        }
        Ok(k)
    }

    /// The failure's file replays to the same violation, and its schedule passes with the
    /// mutant off.
    fn replays_both_ways(
        &self,
        scenario: &Scenario,
        mutant: Mutant,
        file: &ReplayFile,
    ) -> Result<(), CheckFailure> {
        if let Some(dir) = &self.failures {
            file.write_to(dir)?;
        }
        let registry = Registry::new().scenario(scenario.clone());
        let not_reproduced =
            |what: String| CheckFailure::NotReproduced { mutant: mutant.name(), scenario: scenario.id, what };
        let on = file.replay_in(&registry)?;
        if !on.reproduced {
            return Err(not_reproduced(format!(
                "the replay gave {:?} (diverged: {:?}), recorded {}",
                on.replayed.violation, on.replayed.diverged, file.violation
            )));
        }
        let off = ReplayFile { mutant: None, ..file.clone() }.replay_in(&registry)?;
        if let Some(v) = off.replayed.violation {
            return Err(not_reproduced(format!("its schedule fails with the mutant off too: {v}")));
        }
        Ok(())
    }
}

/// `RESIDENT_SIM_ITERATIONS`, default 500.
fn env_iterations() -> usize {
    std::env::var("RESIDENT_SIM_ITERATIONS").ok().and_then(|v| v.parse().ok()).unwrap_or(500)
}

/// `RESIDENT_SIM_SEED` in hex or decimal, default `0x5eed`.
fn env_seed() -> u64 {
    std::env::var("RESIDENT_SIM_SEED").ok().and_then(|v| crate::cli::parse_seed(&v).ok()).unwrap_or(0x5eed)
}
