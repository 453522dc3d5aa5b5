//! Named switches that put historical bugs back, so the model checker can prove that each
//! scenario catches the bug it targets.
//!
//! A [`Mutant`] is a name. Code asks its runtime whether a switch is on with
//! [`Runtime::mutant`](crate::runtime::Runtime::mutant); the production [`StdRuntime`]
//! answers `false` as a constant, so every historical-bug body compiles away and production
//! types carry no mutant state. The model-checking runtimes of `resident-sim` carry the set of
//! switches a scenario turned on. A user's own stack can name switches of its own with
//! [`Mutant::named`] and ask its runtime the same way.
//!
//! A switch site is one recognisable line in the protocol:
//! `if runtime.mutant(Mutant::SOME_BUG) { .. }` (or a `let` binding of that test, used as a
//! condition), with at most three lines of historical body in place. A longer body is a
//! function in its file's `// Historical bugs:` section, after the code it alters, called from
//! the switch in one line (a test holds every file to it). The bugs of a caller going around
//! the lock protocol — which [`ManagerExt`](crate::ManagerExt) no longer allows — live in
//! `resident-sim`, over the real stack, under the same names.
//!
//! [`StdRuntime`]: crate::runtime::StdRuntime

use std::fmt;
use std::str::FromStr;

/// One named switch that puts a historical bug back (core's own are the associated constants).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Mutant(&'static str);

impl Mutant {
    /// A switch named `name` (kebab-case by convention), for a user's own historical bugs.
    pub const fn named(name: &'static str) -> Self {
        Self(name)
    }

    /// The stable name used on the command line and in replay files.
    pub const fn name(self) -> &'static str {
        self.0
    }
}

macro_rules! mutants {
    ($list:ident; $($(#[doc = $doc:literal])* $name:ident = $slug:literal,)*) => {
        impl Mutant {
            $($(#[doc = $doc])* pub const $name: Mutant = Mutant($slug);)*
        }

        /// The switches of this file, in declaration order.
        pub(super) const $list: &[Mutant] = &[$(Mutant::$name,)*];
    };
}

// The switches themselves, one per historical bug, by where their sites are.
mod cache_switches;
mod switches;

impl Mutant {
    /// Every switch of `resident` itself: the manager's, its layers' and the runtime's, then
    /// the cache group's, each in declaration order.
    pub const ALL: &'static [Mutant] = &joined::<{ switches::MANAGER.len() + cache_switches::CACHE.len() }>(
        switches::MANAGER,
        cache_switches::CACHE,
    );
}

/// `a` then `b`, in an array of their total length `N`.
const fn joined<const N: usize>(a: &[Mutant], b: &[Mutant]) -> [Mutant; N] {
    let mut all = [Mutant(""); N];
    let mut i = 0;
    while i < N {
        all[i] = if i < a.len() { a[i] } else { b[i - a.len()] };
        i += 1;
    }
    all
}

impl fmt::Display for Mutant {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.0)
    }
}

/// A name that is not one of `resident`'s own switches.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown mutant {0:?}")]
pub struct UnknownMutant(pub String);

impl FromStr for Mutant {
    type Err = UnknownMutant;

    /// Parses one of `resident`'s own switches ([`Mutant::ALL`]) by name.
    fn from_str(s: &str) -> Result<Self, UnknownMutant> {
        Mutant::ALL.iter().copied().find(|m| m.name() == s).ok_or_else(|| UnknownMutant(s.to_owned()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_switch_has_a_distinct_name_that_round_trips() {
        let names: std::collections::BTreeSet<_> = Mutant::ALL.iter().map(|m| m.name()).collect();
        assert_eq!(names.len(), Mutant::ALL.len(), "one distinct name per switch");
        for &m in Mutant::ALL {
            assert_eq!(m.name().parse::<Mutant>(), Ok(m));
            assert_eq!(m.to_string(), m.name());
        }
        assert!("no-such-bug".parse::<Mutant>().is_err());
    }
}
