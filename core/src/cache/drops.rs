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
//! whole life. A name that falls out raises the floor of its hash's bucket ([`FLOORS`] of
//! them), and a mark below the floor of a covering name's bucket reads as moved: a load that
//! straddled that many drops, one of them possibly of a name covering its key, admits its
//! weights unregistered (they serve it, and the next load reads afresh), which is the safe
//! side; a load of a key no forgotten name shares a bucket with is told exactly.

use std::collections::{BTreeMap, HashMap};

use crate::hashed::hash;

/// How many dropped names [`Drops`] remembers.
pub(crate) const DROPS_KEPT: usize = 1024;

/// How many buckets the floors of forgotten names are kept in.
const FLOORS: usize = 256;

/// The drops of the most recent [`DROPS_KEPT`] names, by the sequence number of each one's last
/// drop.
#[derive(Debug)]
pub(crate) struct Drops {
    /// Drops so far.
    seq: u64,
    /// Per bucket of names' hashes, the last drop of a name of it no longer kept (0: none).
    floors: Box<[u64; FLOORS]>,
    last: HashMap<String, u64>,
    /// The kept names, oldest drop first.
    order: BTreeMap<u64, String>,
    /// How many names are kept at most.
    kept: usize,
}

impl Default for Drops {
    fn default() -> Self {
        Self::keeping(DROPS_KEPT)
    }
}

impl Drops {
    /// A record keeping the last drop of `kept` names.
    fn keeping(kept: usize) -> Self {
        Self { seq: 0, floors: Box::new([0; FLOORS]), last: HashMap::new(), order: BTreeMap::new(), kept }
    }

    /// Counts a drop of `name` (a key, or a model and its submodels).
    pub(crate) fn record(&mut self, name: &str) {
        self.seq += 1;
        if let Some(previous) = self.last.insert(name.to_owned(), self.seq) {
            self.order.remove(&previous);
        }
        self.order.insert(self.seq, name.to_owned());
        while self.order.len() > self.kept {
            let Some((seq, oldest)) = self.order.pop_first() else { break };
            self.last.remove(&oldest);
            self.floors[bucket(&oldest)] = seq;
        }
    }

    /// A mark to compare later drops with ([`Drops::moved`]).
    pub(crate) fn mark(&self) -> u64 {
        self.seq
    }

    /// Whether a drop covering `key` may have come after `mark`: one of a name covering it did,
    /// or a drop after the mark of a name in a covering name's bucket is no longer kept.
    pub(crate) fn moved(&self, key: &str, mark: u64) -> bool {
        covering(key).any(|name| {
            self.last.get(name).is_some_and(|&seq| seq > mark) || self.floors[bucket(name)] > mark
        })
    }

    /// How many names are kept.
    #[cfg(test)]
    fn kept(&self) -> usize {
        self.last.len()
    }
}

/// The bucket of `name`'s floor.
fn bucket(name: &str) -> usize {
    usize::try_from(hash(name) % FLOORS as u64).unwrap_or(0)
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
        for n in 0..10 {
            assert!(drops.moved(&format!("m{n}"), before), "a forgotten drop after the mark reads as moved");
        }
        let unrelated = (0..100).filter(|n| !drops.moved(&format!("x{n}"), before)).count();
        assert!(unrelated > 90, "only keys sharing a bucket with a forgotten name read as moved");
        assert!(!drops.moved("m0", drops.mark()));
    }

    proptest! {
        /// Against every drop remembered: never "not moved" where a covering drop came after
        /// the mark, and the same answer where nothing was forgotten (`kept` large).
        #[test]
        fn it_agrees_with_the_whole_history(
            steps in prop::collection::vec((0..9usize, any::<bool>()), 0..60),
            keys in prop::collection::vec(0..9usize, 1..4),
            kept in prop_oneof![Just(2usize), Just(4), Just(DROPS_KEPT)],
        ) {
            const NAMES: [&str; 9] = ["a", "a:b", "a:b:c", "b", "ab", "b:a", "", "a:", "a::b"];
            let mut drops = Drops::keeping(kept);
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
                    if kept == DROPS_KEPT {
                        prop_assert_eq!(drops.moved(key, mark), truly);
                    } else {
                        prop_assert!(drops.moved(key, mark) || !truly);
                    }
                }
            }
        }
    }
}
