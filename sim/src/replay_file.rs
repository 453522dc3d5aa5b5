//! Replay files: everything needed to reproduce one failing execution, as JSON.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use crate::mutant_set::MutantSet;
use resident::mutants::{Mutant, UnknownMutant};
use serde::{Deserialize, Serialize};

use crate::SHUTTLE_VERSION;
use crate::explore::schedule::{RecordedSchedule, ScheduleError};
use crate::explore::{self, Checker, Outcome, Plan, Replayed};
use crate::registry::Registry;
use crate::violation::Violation;

/// A stored failing execution.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReplayFile {
    /// Catalogue id of the scenario.
    pub scenario: String,
    /// The checker runtime (`shuttle`).
    pub runtime: String,
    /// The scheduler that found it.
    pub scheduler: Checker,
    /// The scheduler's seed.
    pub seed: u64,
    /// 1-based index of the failing execution under that seed.
    pub iteration: usize,
    /// The failing execution's decisions.
    pub schedule: RecordedSchedule,
    /// shuttle version the schedule was recorded with.
    pub shuttle_version: String,
    /// The mutants that were on (comma-separated), if any.
    pub mutant: Option<String>,
    /// What broke.
    pub violation: Violation,
    /// Per-thread trace of the failing execution.
    pub trace: BTreeMap<String, Vec<String>>,
}

/// Why a replay file could not be used.
#[derive(Debug, thiserror::Error)]
pub enum ReplayError {
    /// Reading or writing the file failed.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
    /// The file is not a replay file.
    #[error("{path}: not a replay file: {source}")]
    Json {
        /// The file.
        path: PathBuf,
        /// The parse error.
        source: serde_json::Error,
    },
    /// The scenario id is not in the registry the replay looked in.
    #[error(
        "unknown scenario {0:?}: the registry replaying it does not have it (the stock resident-sim knows the built-in catalogue only; an application replays its own scenarios through its own registry: resident_sim::cli::run)"
    )]
    UnknownScenario(String),
    /// A mutant name is unknown.
    #[error(transparent)]
    UnknownMutant(#[from] UnknownMutant),
    /// The file was recorded by a different checker or shuttle version.
    #[error("recorded with {recorded}, this build replays shuttle {SHUTTLE_VERSION} schedules")]
    Incompatible {
        /// What the file was recorded with.
        recorded: String,
    },
    /// The schedule text is malformed.
    #[error(transparent)]
    Schedule(#[from] ScheduleError),
}

/// What a replay showed.
#[derive(Debug, Clone)]
pub struct ReplayReport {
    /// The replayed execution raised exactly the recorded violation, following the schedule.
    pub reproduced: bool,
    /// The replayed execution.
    pub replayed: Replayed,
}

impl ReplayFile {
    /// The replay file of an exploration's failure (shuttle failures only).
    pub fn from_outcome(outcome: &Outcome, plan: &Plan) -> Option<Self> {
        let failure = outcome.failure.as_ref()?;
        let schedule = failure.schedule.clone()?;
        let mutants: Vec<&str> = plan.mutants.iter().map(Mutant::name).collect();
        Some(Self {
            scenario: outcome.scenario.to_owned(),
            runtime: "shuttle".to_owned(),
            scheduler: outcome.checker,
            seed: plan.seed,
            iteration: failure.iteration,
            schedule,
            shuttle_version: SHUTTLE_VERSION.to_owned(),
            mutant: (!mutants.is_empty()).then(|| mutants.join(",")),
            violation: failure.violation.clone(),
            trace: failure.trace.clone(),
        })
    }

    /// The file name this replay is stored under.
    pub fn file_name(&self) -> String {
        let mutant = self.mutant.as_deref().map(|m| format!("-{}", m.replace(',', "+"))).unwrap_or_default();
        format!("{}-{}-{}{}.json", self.scenario, self.scheduler, self.seed, mutant)
    }

    /// Writes the file into `dir` (created if needed) and returns its path.
    pub fn write_to(&self, dir: &Path) -> Result<PathBuf, ReplayError> {
        let path = dir.join(self.file_name());
        let io = |source| ReplayError::Io { path: path.clone(), source };
        std::fs::create_dir_all(dir).map_err(io)?;
        let json = serde_json::to_string_pretty(self).expect("replay files serialize");
        std::fs::write(&path, json + "\n").map_err(io)?;
        Ok(path)
    }

    /// Reads a replay file.
    pub fn read(path: &Path) -> Result<Self, ReplayError> {
        let text = std::fs::read_to_string(path)
            .map_err(|source| ReplayError::Io { path: path.to_owned(), source })?;
        serde_json::from_str(&text).map_err(|source| ReplayError::Json { path: path.to_owned(), source })
    }

    /// The mutants the file was recorded with, among `resident`'s own.
    pub fn mutants(&self) -> Result<MutantSet, UnknownMutant> {
        self.mutants_in(&Registry::new())
    }

    /// The mutants the file was recorded with, among `resident`'s own and those `registry`
    /// knows (no name is leaked).
    pub fn mutants_in(&self, registry: &Registry) -> Result<MutantSet, UnknownMutant> {
        self.mutant.iter().flat_map(|m| m.split(',')).map(|name| registry.parse_mutant(name)).collect()
    }

    /// Replays the failing execution once, finding its scenario in the built-in catalogue.
    pub fn replay(&self) -> Result<ReplayReport, ReplayError> {
        self.replay_in(&Registry::catalogue())
    }

    /// Replays the failing execution once, finding its scenario and mutants in `registry`.
    pub fn replay_in(&self, registry: &Registry) -> Result<ReplayReport, ReplayError> {
        if self.runtime != "shuttle" || self.shuttle_version != SHUTTLE_VERSION {
            return Err(ReplayError::Incompatible {
                recorded: format!("{} {}", self.runtime, self.shuttle_version),
            });
        }
        let scenario = registry
            .find(&self.scenario)
            .ok_or_else(|| ReplayError::UnknownScenario(self.scenario.clone()))?;
        let replayed = explore::replay(scenario, &self.schedule, &self.mutants_in(registry)?)?;
        let reproduced = replayed.diverged.is_none() && replayed.violation.as_ref() == Some(&self.violation);
        Ok(ReplayReport { reproduced, replayed })
    }
}
