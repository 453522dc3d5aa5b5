//! A model slot's use state in one atomic word: the live leases, why the slot is closed (if it
//! is) and its designations. A lease and a close are each one compare-exchange on the word, so
//! they can never both win, and no reader serialises on a lock; a monitor beside the word is
//! only for the threads that wait for it to change.

use std::time::Duration;

use crate::mutants::Mutant;
use crate::runtime::Ordering::{AcqRel, Acquire, Release};
use crate::runtime::{AtomicWord, Monitor, Runtime, TimedOut};

/// Why a slot refuses new leases.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Closing {
    /// `remove` drains the live leases: new ones get `Removing`.
    Draining,
    /// An eviction closed an idle slot and is unloading: new leases wait for its outcome.
    Evicting,
    /// A waiter for capacity designated the slot and its last lease ended: closed for that
    /// eviction, new leases wait for its outcome as for `Evicting` (the slot reopens if the
    /// designation goes first).
    Designated,
    /// The eviction unloaded the model: new leases find it gone (`NotFound`).
    Evicted,
    /// A replace switched the registry to a new version: new leases look the id up again.
    Replaced,
    /// An in-place replace drains the slot to unload it: new leases look the id up again, and
    /// wait there for the swap to settle.
    Swapping,
}

impl Closing {
    const ALL: [Closing; 6] = [
        Closing::Draining,
        Closing::Evicting,
        Closing::Designated,
        Closing::Evicted,
        Closing::Replaced,
        Closing::Swapping,
    ];

    /// The word's closing code: 0 open, else one more than the reason's place in [`Closing::ALL`].
    fn code(closing: Option<Closing>) -> u64 {
        match closing {
            None => 0,
            Some(Closing::Draining) => 1,
            Some(Closing::Evicting) => 2,
            Some(Closing::Designated) => 3,
            Some(Closing::Evicted) => 4,
            Some(Closing::Replaced) => 5,
            Some(Closing::Swapping) => 6,
        }
    }

    fn decode(code: u64) -> Option<Closing> {
        code.checked_sub(1).and_then(|i| Self::ALL.get(usize::try_from(i).ok()?).copied())
    }
}

/// Bits 0..32: live leases; 32..40: the closing code; 40..64: live designations.
const LEASE_BITS: u32 = 32;
const CLOSING_SHIFT: u32 = 32;
const DESIGNATED_SHIFT: u32 = 40;
const LEASE_MASK: u64 = (1 << LEASE_BITS) - 1;
const CLOSING_MASK: u64 = 0xff;

/// The use state, unpacked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct UseState {
    pub(super) leases: u64,
    pub(super) closing: Option<Closing>,
    /// Live [`Designation`](super::lease::Designation)s of the slot: its last lease closes it
    /// for their eviction.
    pub(super) designated: u64,
}

impl UseState {
    const OPEN: UseState = UseState { leases: 0, closing: None, designated: 0 };

    /// The word of this state. The counts stay inside their fields: 2³² live leases or 2²⁴
    /// waiting adds of one model cannot exist at once (each holds memory).
    fn pack(self) -> u64 {
        debug_assert!(self.leases <= LEASE_MASK && self.designated < 1 << (64 - DESIGNATED_SHIFT));
        self.leases | Closing::code(self.closing) << CLOSING_SHIFT | self.designated << DESIGNATED_SHIFT
    }

    fn unpack(word: u64) -> Self {
        UseState {
            leases: word & LEASE_MASK,
            closing: Closing::decode(word >> CLOSING_SHIFT & CLOSING_MASK),
            designated: word >> DESIGNATED_SHIFT,
        }
    }
}

// ---- The word and its waiters ------------------------------------------------------------------

/// The word, and a monitor for the threads that wait for it to change.
pub(super) struct UseCell<R: Runtime> {
    word: R::Atomic,
    waits: R::Monitor<()>,
}

impl<R: Runtime> UseCell<R> {
    pub(super) fn new(runtime: &R) -> Self {
        Self { word: runtime.atomic(UseState::OPEN.pack()), waits: runtime.monitor(()) }
    }

    /// The state right now.
    pub(super) fn get(&self) -> UseState {
        UseState::unpack(self.word.load(Acquire))
    }

    /// Applies `f` to the state in one atomic step (a compare-exchange, retried from the state
    /// it found if another thread changed the word first; no write when `f` changes nothing).
    /// `f` may run more than once and must only compute. Returns what the successful run of
    /// `f` returned and the state it started from.
    pub(super) fn update<U>(&self, f: impl FnMut(&mut UseState) -> U) -> (U, UseState) {
        self.update_from(self.word.load(Acquire), f)
    }

    /// [`UseCell::update`] from `current`, a value of the word just read (a fast path that
    /// gave up hands over what it read: no second read, so the checkers see the same
    /// operations on the word as through `update` alone).
    pub(super) fn update_from<U>(
        &self,
        mut current: u64,
        mut f: impl FnMut(&mut UseState) -> U,
    ) -> (U, UseState) {
        loop {
            let before = UseState::unpack(current);
            let mut after = before;
            let out = f(&mut after);
            if after == before {
                return (out, before);
            }
            match self.word.compare_exchange(current, after.pack(), AcqRel, Acquire) {
                Ok(_) => return (out, before),
                Err(actual) => current = actual,
            }
        }
    }

    /// Counts one lease if the slot is open: the lease's fast path, one compare-exchange on
    /// the raw word, retried while the word stays open. `Err` with the word it read once that
    /// is closed: the caller decides from there ([`UseCell::update_from`]). The same operations
    /// on the word as `update` counting an open slot's lease.
    pub(super) fn count_if_open(&self) -> Result<(), u64> {
        let mut current = self.word.load(Acquire);
        while current >> CLOSING_SHIFT & CLOSING_MASK == 0 {
            debug_assert!(current & LEASE_MASK < LEASE_MASK, "the lease count stays inside its field");
            match self.word.compare_exchange(current, current + 1, AcqRel, Acquire) {
                Ok(_) => return Ok(()),
                Err(actual) => current = actual,
            }
        }
        Err(current)
    }

    /// Uncounts one lease when that is all the end of the lease changes (another lease stays,
    /// or no designation waits for the slot): the end of a lease's fast path, one
    /// compare-exchange on the raw word. Returns the state before; `Err` with the word it read
    /// when the end of the lease may close the slot (unless `!hand_over`: the historical bug
    /// [`Mutant::CAPACITY_WAITER_LOSES_RACE`](crate::mutants::Mutant::CAPACITY_WAITER_LOSES_RACE),
    /// whose last lease never closes its slot), or counts none: the caller decides from there
    /// ([`UseCell::update_from`]).
    pub(super) fn uncount_plainly(&self, hand_over: bool) -> Result<UseState, u64> {
        let mut current = self.word.load(Acquire);
        loop {
            let leases = current & LEASE_MASK;
            if leases == 0 || (hand_over && leases == 1 && current >> DESIGNATED_SHIFT > 0) {
                return Err(current);
            }
            match self.word.compare_exchange(current, current - 1, AcqRel, Acquire) {
                Ok(_) => return Ok(UseState::unpack(current)),
                Err(actual) => current = actual,
            }
        }
    }

    /// Stores `state` over whatever the word holds: only the historical bug
    /// [`Mutant::EVICTION_CLOSE_NOT_ATOMIC`](crate::mutants::Mutant::EVICTION_CLOSE_NOT_ATOMIC)
    /// writes the word this way.
    pub(super) fn overwrite(&self, state: UseState) {
        self.word.store(state.pack(), Release);
    }

    /// Counts one lease without looking at the close first: only the historical bug
    /// [`Mutant::LEASE_COUNTS_BEFORE_CHECK`](crate::mutants::Mutant::LEASE_COUNTS_BEFORE_CHECK)
    /// counts this way. Returns the state before.
    pub(super) fn count_blindly(&self) -> UseState {
        UseState::unpack(self.word.fetch_add(1, AcqRel))
    }

    /// Waits until `f` returns `Some` for the state (applied as by [`UseCell::update`]), at
    /// most `timeout`; `then` runs once on what the successful run returned, in the same step
    /// (to observe it). `f` must only compute.
    pub(super) fn wait_until<U>(
        &self,
        timeout: Option<Duration>,
        mut f: impl FnMut(&mut UseState) -> Option<U>,
        mut then: impl FnMut(&U),
    ) -> Result<U, TimedOut> {
        self.waits.wait_until(timeout, |()| {
            let done = self.update(&mut f).0;
            if let Some(done) = &done {
                then(done);
            }
            done
        })
    }

    /// Wakes every thread waiting on the word, after a change made to it. The monitor is taken
    /// first: a waiter looks at the word under it, so either it sees the change or it is
    /// already waiting when the notification comes.
    pub(super) fn notify_all(&self, runtime: &R) {
        if !runtime.mutant(Mutant::USE_WORD_NOTIFY_UNPASSED) {
            self.waits.with(|()| ());
        }
        self.waits.notify_all();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_state_survives_its_word() {
        for (place, closing) in Closing::ALL.into_iter().enumerate() {
            assert_eq!(Closing::code(Some(closing)), place as u64 + 1, "{closing:?}'s code is its place");
        }
        for closing in std::iter::once(None).chain(Closing::ALL.map(Some)) {
            for (leases, designated) in [(0, 0), (1, 0), (0, 1), (LEASE_MASK, (1 << 24) - 1), (7, 3)] {
                let state = UseState { leases, closing, designated };
                assert_eq!(UseState::unpack(state.pack()), state);
            }
        }
        assert_eq!(UseState::OPEN.pack(), 0);
    }
}
