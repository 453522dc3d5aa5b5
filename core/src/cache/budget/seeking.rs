//! The RAM budget's line (SPEC 2.14, 3.11): loads looking for room stand in it from their first
//! refusal until they return, in arrival order; only the first may reserve, and each one behind
//! it waits on a signal of its own for its turn (or for a lowered cap).

use std::time::Duration;

use super::RamBudget;
use crate::mutants::Mutant;
use crate::runtime::{Arc, Monitor, Runtime, Signal, TimedOut};

/// A load looking for room, in line ([`RamBudget::seek_room`]); dropping it ends the search
/// and, if it was first, wakes the next (only that one).
pub(crate) struct Seeking<R: Runtime> {
    budget: Arc<RamBudget<R>>,
    ticket: u64,
    /// Bumped when this load becomes first, and when the cap is lowered while it is behind:
    /// what it waits on behind the first. A debit cannot serve it (the room is the first
    /// one's), so it does not wake it; a raised cap or the overflow policy switched on wakes
    /// the first, whose leaving wakes the next, and so on; a lowered cap may refuse it at once.
    wake: Arc<Signal<R>>,
}

impl<R: Runtime> Seeking<R> {
    /// Its place in line.
    pub(crate) fn ticket(&self) -> u64 {
        self.ticket
    }

    /// The epoch of its wake-up: read it *before* looking for room, then
    /// [`Seeking::wait_for_turn`] past it.
    pub(crate) fn epoch(&self) -> u64 {
        self.wake.epoch()
    }

    /// Behind another load: waits until this one became first or the cap was lowered since
    /// `seen` was read, at most `timeout`.
    pub(crate) fn wait_for_turn(&self, seen: u64, timeout: Duration) -> Result<(), TimedOut> {
        self.wake.wait_past(seen, Some(timeout))
    }
}

impl<R: Runtime> Drop for Seeking<R> {
    fn drop(&mut self) {
        let rt = self.budget.room.runtime();
        let next = self.budget.counters.with(|c| c.line.leave_observed(self.ticket, rt));
        if let Some(next) = next {
            next.bump_at(Mutant::LOST_WAKEUP_ROOM_SEEKER_LEFT);
        }
    }
}

impl<R: Runtime> RamBudget<R> {
    /// Puts the caller in line as a load looking for room until the returned guard is dropped.
    /// A room request it leaves with a busy peer is honoured at that peer's release while it
    /// looks, even before it waits (it may still be asking other peers).
    pub(crate) fn seek_room(self: &Arc<Self>) -> Seeking<R> {
        let wake = Arc::new(Signal::new(self.room.runtime()));
        let ticket = self.counters.with(|c| c.line.join_observed(Arc::clone(&wake), self.room.runtime()));
        Seeking { budget: Arc::clone(self), ticket, wake }
    }

    /// Whether some load is looking for room now (a hint: one may start or stop at once).
    pub(crate) fn room_seekers(&self) -> bool {
        self.counters.with(|c| !c.line.is_empty())
    }

    /// Whether the load in line with `ticket` is the first in it: only that one may take the
    /// room a debit makes, so only that one evicts or asks the peers for it.
    pub(crate) fn first_in_line(&self, ticket: u64) -> bool {
        self.counters.with(|c| c.line.is_first(ticket))
    }

    /// Loads looking for room right now, in line (a hint: SPEC 2.14 serves them in arrival
    /// order).
    pub fn waiting(&self) -> usize {
        self.counters.with(|c| c.line.len())
    }
}
