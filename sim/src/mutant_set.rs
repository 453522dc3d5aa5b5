//! [`MutantSet`]: the switches one exploration turns on, carried by the execution's runtime.

use resident::mutants::Mutant;

/// A set of switched-on mutants (`resident`'s own or a user's [`Mutant::named`] ones); empty by
/// default. The sim runtimes answer [`Runtime::mutant`](resident::runtime::Runtime::mutant)
/// from it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct MutantSet(Vec<Mutant>);

impl MutantSet {
    /// No mutant on.
    pub const NONE: MutantSet = MutantSet(Vec::new());

    /// Only `mutant` on.
    pub fn only(mutant: Mutant) -> Self {
        Self::NONE.with(mutant)
    }

    /// This set plus `mutant`.
    pub fn with(mut self, mutant: Mutant) -> Self {
        if let Err(at) = self.0.binary_search(&mutant) {
            self.0.insert(at, mutant);
        }
        self
    }

    /// Whether `mutant` is on.
    pub fn contains(&self, mutant: Mutant) -> bool {
        // Sets hold zero or one switch almost always: a scan beats a search.
        self.0.contains(&mutant)
    }

    /// Whether no mutant is on.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The mutants that are on, in name order.
    pub fn iter(&self) -> impl Iterator<Item = Mutant> + '_ {
        self.0.iter().copied()
    }
}

impl FromIterator<Mutant> for MutantSet {
    fn from_iter<I: IntoIterator<Item = Mutant>>(iter: I) -> Self {
        iter.into_iter().fold(Self::NONE, Self::with)
    }
}
