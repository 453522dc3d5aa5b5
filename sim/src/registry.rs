//! [`Registry`]: the scenarios and mutants a command line, a kill matrix or a replay knows. The
//! stock `resident-sim` binary runs the built-in catalogue ([`Registry::catalogue`]); an
//! application builds its own from its scenarios (and the catalogue's, if it likes) and hands
//! it to [`cli::run`](crate::cli::run), so `list`, `explore`, `mutants` and `replay` work on
//! its scenarios and mutants too.

use resident::mutants::{Mutant, UnknownMutant};

use crate::scenario::Scenario;
use crate::scenarios::CATALOGUE;

/// Panics unless `mutant`'s name is kebab-case: `a-z`, `0-9` and `-`, as replay files (a
/// comma-separated list) and their file names carry it. (A user's switch named like one of
/// `resident`'s own *is* that switch: switches are their names.)
pub(crate) fn check_mutant_name(mutant: Mutant) {
    let name = mutant.name();
    let kebab =
        !name.is_empty() && name.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-');
    assert!(kebab, "mutant name {name:?} is not kebab-case (a-z, 0-9, -)");
}

/// Scenarios by id, and every mutant name they can read back.
#[derive(Debug, Clone, Default)]
pub struct Registry {
    scenarios: Vec<Scenario>,
    mutants: Vec<Mutant>,
}

impl Registry {
    /// An empty registry: no scenario; of mutants, `resident`'s own ([`Mutant::ALL`]) only.
    pub fn new() -> Self {
        Self::default()
    }

    /// The built-in catalogue (SPEC §5, `docs/catalogue.md`).
    pub fn catalogue() -> Self {
        CATALOGUE.iter().cloned().fold(Self::new(), Self::scenario)
    }

    /// This registry plus `scenario`; its targets become known mutant names.
    ///
    /// # Panics
    /// If a scenario of the same id is registered already: ids name replay files and command
    /// line selections, so each must name one scenario.
    pub fn scenario(mut self, scenario: Scenario) -> Self {
        assert!(self.find(scenario.id).is_none(), "two scenarios with id {:?}", scenario.id);
        for &m in &scenario.targets {
            self = self.mutant(m);
        }
        self.scenarios.push(scenario);
        self
    }

    /// This registry plus every scenario of `scenarios`.
    pub fn scenarios_from(self, scenarios: impl IntoIterator<Item = Scenario>) -> Self {
        scenarios.into_iter().fold(self, Self::scenario)
    }

    /// This registry knowing `mutant` by name (one no scenario targets, for `--mutant`).
    ///
    /// # Panics
    /// If its name is not kebab-case (see [`Scenario::must_kill`]).
    pub fn mutant(mut self, mutant: Mutant) -> Self {
        check_mutant_name(mutant);
        if !Mutant::ALL.contains(&mutant) && !self.mutants.contains(&mutant) {
            self.mutants.push(mutant);
        }
        self
    }

    /// The scenarios, in registration order.
    pub fn scenarios(&self) -> &[Scenario] {
        &self.scenarios
    }

    /// The scenario of id `id`.
    pub fn find(&self, id: &str) -> Option<&Scenario> {
        self.scenarios.iter().find(|s| s.id == id)
    }

    /// The mutant named `name`: one of `resident`'s own or one this registry knows. No name is
    /// leaked: it is matched against the switches' own `'static` names.
    pub fn parse_mutant(&self, name: &str) -> Result<Mutant, UnknownMutant> {
        self.mutants.iter().copied().find(|m| m.name() == name).map_or_else(|| name.parse(), Ok)
    }

    /// The mutants this registry knows beyond `resident`'s own, in registration order.
    pub fn own_mutants(&self) -> &[Mutant] {
        &self.mutants
    }

    /// Every `(mutant, scenario)` pair of the kill matrix, in registration order.
    pub fn pairs(&self) -> impl Iterator<Item = (Mutant, &Scenario)> {
        self.scenarios.iter().flat_map(|s| s.targets.iter().map(move |m| (*m, s)))
    }
}
