//! [`Claims`]: a record's holds and locks, one atomic word in the record itself, so that a hold
//! becomes a lock ([`Claims::lock_held`]) without the cache's state monitor.
//!
//! # Protocol
//! Every change of the word but one happens under the cache's state monitor: a hold or lock
//! counted by a lookup, a claim released, the historical bugs' changes. The one change outside
//! it is a conversion, which turns one of its own holds into a lock in one compare-exchange:
//! the word is never zero on the way, so an eviction under the monitor, which reads the word
//! there and takes only a record whose word (and admissions) are zero, finds the record
//! protected before, during and after the conversion. Every read that decides anything happens
//! under the monitor; whatever a conversion wrote before the converting thread next takes the
//! monitor (its guard's release, a placement) is ordered before that section by the monitor,
//! so relaxed orderings suffice throughout: the word guards no data of its own (the weights
//! were published by the admission, under the monitor).

use std::fmt;

use super::Entry;
use crate::runtime::AtomicWord;
use crate::runtime::Ordering::Relaxed;

/// One hold, in the word.
const HOLD: u64 = 1;
/// One lock, in the word.
const LOCK: u64 = 1 << 32;
/// The holds' half of the word.
const HOLDS: u64 = LOCK - 1;

/// A record's holds (the low half of the word) and locks (the high half). A record has fewer
/// than 2³² handles at once: each is a live value in some thread.
pub(crate) struct Claims<A> {
    word: A,
}

impl<A: AtomicWord> Claims<A> {
    /// No hold, no lock, in `word` (which must hold 0).
    pub(crate) fn new(word: A) -> Self {
        Self { word }
    }

    /// `(holds, locks)`.
    pub(super) fn read(&self) -> (u64, u64) {
        let word = self.word.load(Relaxed);
        (word & HOLDS, word >> 32)
    }

    /// Whether a hold or a lock protects the record.
    pub(super) fn any(&self) -> bool {
        self.word.load(Relaxed) != 0
    }

    /// Counts one hold (`lock`: false) or one lock.
    pub(super) fn count(&self, lock: bool) {
        self.word.fetch_add(if lock { LOCK } else { HOLD }, Relaxed);
    }

    /// Releases one hold (`lock`: false) or one lock; a half already at zero stays so (a claim
    /// was lost: only historical bugs do that). Returns `(holds, locks)` after.
    pub(super) fn release(&self, lock: bool) -> (u64, u64) {
        let word = self.update(|(holds, locks)| {
            if lock { (holds, locks.saturating_sub(1)) } else { (holds.saturating_sub(1), locks) }
        });
        (word & HOLDS, word >> 32)
    }

    /// Turns one of the caller's holds into a lock, in one step (outside the monitor: see the
    /// module docs).
    pub(crate) fn lock_held(&self) {
        self.update(|(holds, locks)| (holds.saturating_sub(1), locks + 1));
    }

    /// `conversion-in-two-steps`: the hold released, then the lock counted, two steps apart; an
    /// eviction between them finds the record free.
    pub(crate) fn lock_held_in_two_steps(&self) {
        self.update(|(holds, locks)| (holds.saturating_sub(1), locks));
        self.word.fetch_add(LOCK, Relaxed);
    }

    /// `sibling-admission-clears-holds`: every hold forgotten.
    pub(super) fn clear_holds(&self) {
        self.update(|(_, locks)| (0, locks));
    }

    /// Applies `change` to `(holds, locks)` in one compare-exchange loop; the word after.
    fn update(&self, change: impl Fn((u64, u64)) -> (u64, u64)) -> u64 {
        let mut word = self.word.load(Relaxed);
        loop {
            let (holds, locks) = change((word & HOLDS, word >> 32));
            let new = (locks << 32) | (holds & HOLDS);
            match self.word.compare_exchange(word, new, Relaxed, Relaxed) {
                Ok(_) => return new,
                Err(actual) => word = actual,
            }
        }
    }
}

/// The next tick of the LRU `clock`: unique, and later than every tick that happened before it
/// (one read-modify-write: relaxed is enough for both).
pub(super) fn tick<A: AtomicWord>(clock: &A) -> u64 {
    clock.fetch_add(1, Relaxed) + 1
}

/// Turns one of the caller's holds on `record` into a lock outside the cache's state monitor
/// ([`Claims`]), in two steps under the `in_two_steps` mutant; the tick of this use on
/// `clock` (the table's), which the lock's release stamps ([`Table::release`](super::Table::release)).
pub(crate) fn lock_held<E: Entry>(record: &E, clock: &E::Word, in_two_steps: bool) -> u64 {
    if in_two_steps {
        record.claims().lock_held_in_two_steps();
    } else {
        record.claims().lock_held();
    }
    tick(clock)
}

impl<A: AtomicWord> fmt::Debug for Claims<A> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (holds, locks) = self.read();
        f.debug_struct("Claims").field("holds", &holds).field("locks", &locks).finish()
    }
}
