//! [`Drops`]: the store's record of `drop_model` and `invalidate`, so that a load in flight across
//! a drop of its key never registers the weights it built as the key's canonical (C-D6).
//!
//! A load takes a [`Drops::mark`] before it builds its weights, and its admission asks
//! [`Drops::moved`]: whether a drop covering its key (of the key itself, or of a model it is a
//! submodel of) came after the mark. Each dropped name keeps the sequence number of its last
//! drop, and a key is covered by at most one name per `:` in it, so the question costs a few
//! lookups, never a scan of every name ever dropped.
//!
//! Only the [`DROPS_KEPT`] most recently dropped names are kept: a process that drops model
//! after model (versioned keys, say) keeps a bounded record, not one entry per name for its
//! whole life. A name that falls out raises a floor, and a mark below the floor reads as moved:
//! a load that straddled that many drops admits its weights unregistered (they serve it, and the
//! next load reads afresh), which is the safe side.

use std::collections::{BTreeMap, HashMap};

/// How many dropped names [`Drops`] remembers.
pub(crate) const DROPS_KEPT: usize = 1024;

/// The drops of the most recent [`DROPS_KEPT`] names, by the sequence number of each one's last
/// drop.
#[derive(Debug, Default)]
pub(crate) struct Drops {
    /// Drops so far.
    seq: u64,
    /// The last drop of a name no longer kept (0: none fell out yet).
    floor: u64,
    last: HashMap<String, u64>,
    /// The kept names, oldest drop first.
    order: BTreeMap<u64, String>,
}

impl Drops {
    /// Counts a drop of `name` (a key, or a model and its submodels).
    pub(crate) fn record(&mut self, name: &str) {
        self.seq += 1;
        if let Some(previous) = self.last.insert(name.to_owned(), self.seq) {
            self.order.remove(&previous);
        }
        self.order.insert(self.seq, name.to_owned());
        while self.order.len() > DROPS_KEPT {
            let Some((seq, oldest)) = self.order.pop_first() else { break };
            self.last.remove(&oldest);
            self.floor = seq;
        }
    }

    /// A mark to compare later drops with ([`Drops::moved`]).
    pub(crate) fn mark(&self) -> u64 {
        self.seq
    }

    /// Whether a drop covering `key` may have come after `mark`: one of a name covering it did,
    /// or a drop after the mark is no longer kept.
    pub(crate) fn moved(&self, key: &str, mark: u64) -> bool {
        mark < self.floor || covering(key).any(|name| self.last.get(name).is_some_and(|&seq| seq > mark))
    }

    /// How many names are kept.
    #[cfg(test)]
    fn kept(&self) -> usize {
        self.last.len()
    }
}

/// The names whose drop covers `key`: every prefix of it that ends before a `:`, and `key`.
fn covering(key: &str) -> impl Iterator<Item = &str> {
    key.match_indices(':').map(|(at, _)| &key[..at]).chain(std::iter::once(key))
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::super::weights::is_model_or_submodel;
    use super::*;

    #[test]
    fn a_key_is_covered_by_itself_and_the_models_it_is_a_submodel_of() {
        assert_eq!(covering("a:b:c").collect::<Vec<_>>(), ["a", "a:b", "a:b:c"]);
        assert_eq!(covering("a").collect::<Vec<_>>(), ["a"]);
        for name in covering("a:b:c") {
            assert!(is_model_or_submodel("a:b:c", name));
        }
    }

    #[test]
    fn a_drop_after_the_mark_moves_the_keys_it_covers_only() {
        let mut drops = Drops::default();
        drops.record("a");
        let mark = drops.mark();
        assert!(!drops.moved("a", mark));
        drops.record("ab");
        drops.record("b:a");
        assert!(!drops.moved("a", mark), "neither names a or a model of it");
        drops.record("a");
        assert!(drops.moved("a", mark));
        assert!(drops.moved("a:x", mark), "a submodel of a");
        assert!(!drops.moved("b", mark));
        assert!(drops.moved("b:a", mark));
    }

    #[test]
    fn the_record_stays_bounded_and_errs_on_the_moved_side() {
        let mut drops = Drops::default();
        let before = drops.mark();
        for n in 0..DROPS_KEPT + 10 {
            drops.record(&format!("m{n}"));
        }
        assert_eq!(drops.kept(), DROPS_KEPT);
        assert!(drops.moved("x", before), "a mark older than a forgotten drop reads as moved");
        assert!(!drops.moved("x", drops.mark()));
    }

    proptest! {
        /// Against every drop remembered: the same answer while nothing was forgotten, and
        /// never "not moved" where a covering drop came after the mark.
        #[test]
        fn it_agrees_with_the_whole_history(
            steps in prop::collection::vec((0..6usize, any::<bool>()), 0..60),
            keys in prop::collection::vec(0..6usize, 1..4),
        ) {
            const NAMES: [&str; 6] = ["a", "a:b", "a:b:c", "b", "ab", "b:a"];
            let mut drops = Drops::default();
            let mut history: Vec<&str> = Vec::new();
            let mut marks = Vec::new();
            for (name, mark) in steps {
                if mark {
                    marks.push((drops.mark(), history.len()));
                }
                drops.record(NAMES[name]);
                history.push(NAMES[name]);
            }
            for (mark, at) in marks {
                for &key in &keys {
                    let key = NAMES[key];
                    let truly = history[at..].iter().any(|name| is_model_or_submodel(key, name));
                    prop_assert_eq!(drops.moved(key, mark), truly);
                }
            }
        }
    }
}
