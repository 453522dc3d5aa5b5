//! One round of a cold add's admission, decided under the bookkeeping monitor: admit it (its
//! slot is free), evict these victims for it, or wait — behind the adds that came earlier
//! (SPEC 2.14: arrival order), or first in line with its victim designated.

use super::FixedSizeCache;
use super::queue::{Bookkeeping, PinnedBelow};
use crate::id::ModelId;
use crate::manager::{Designation, Manager};
use crate::mutants::Mutant;
use crate::runtime::{Arc, LineStep, Runtime};

/// What a round decided to do about the capacity.
pub(super) enum EvictionPlan {
    /// A slot is free: take it.
    Admit,
    /// Evict these (least recently used first), then take the slot they leave.
    Evict(Vec<ModelId>),
    /// Nothing (or too little) is evictable: wait for the stack to change.
    Full { registered: usize, loading: usize },
}

/// What an add brings to every round of its admission.
pub(super) struct Admitting<'a, M: Manager> {
    /// The id being added.
    pub(super) id: &'a ModelId,
    /// A replace: `id` is registered and stays while its new version loads, and counts.
    pub(super) beside: bool,
    /// Cold loads in flight count against `max_size` (not: `capacity-ignores-inflight`).
    pub(super) count_inflight: bool,
    /// Leased models are victims too (`evict-leased`).
    pub(super) evict_leased: bool,
    /// Waiting adds stand in line (every policy but `Overflow`).
    pub(super) in_line: bool,
    /// An add ignores the line (`capacity-waiters-barge`).
    pub(super) barge: bool,
    /// What wakes the add when it waits behind another: bumped only when it becomes first.
    pub(super) wake: super::Wake<M>,
}

/// Where an add stands as a round starts.
pub(super) struct Standing<'a> {
    /// It holds its slot already (it decided to evict for it in an earlier round).
    pub(super) mine: bool,
    /// Its place in line, if it joined.
    pub(super) ticket: Option<u64>,
    /// The victim it designated as the first in line, if any.
    pub(super) held: Option<&'a ModelId>,
}

/// What a round decided, for the add to act on outside the monitor.
pub(super) struct Round<R: Runtime> {
    pub(super) plan: EvictionPlan,
    /// The bookkeeping version the plan was made at.
    pub(super) seen: u64,
    /// The add took its slot in this round.
    pub(super) claim: bool,
    /// The add joined the line in this round, with this ticket.
    pub(super) joined: Option<u64>,
    /// `Some`: the add's designation is replaced (`None` in it: given up).
    pub(super) redesignated: Option<Option<(ModelId, Designation<R>)>>,
    /// The add waits behind another in line.
    pub(super) behind: bool,
}

impl<M: Manager> FixedSizeCache<M> {
    /// Plans one round of `a`'s admission from where it stands (`s`), under the book's monitor
    /// (`b`). The hints it asks the stack below (`in_use`, `is_locked`, `designate`) answer at
    /// once: they run under this monitor.
    pub(super) fn plan_round(
        &self,
        b: &mut Bookkeeping<super::Wake<M>>,
        a: &Admitting<'_, M>,
        s: &Standing<'_>,
        pinned_below: &mut PinnedBelow,
    ) -> Round<M::Runtime> {
        let (id, mine, ticket) = (a.id, s.mine, s.ticket);
        let (seen, max) = (b.version, b.max_size);
        let round = |plan, claim, joined, redesignated, behind| Round {
            plan,
            seen,
            claim,
            joined,
            redesignated,
            behind,
        };
        pinned_below.refresh(seen);
        let queued = b.queue.iter().filter(|q| *q != id).count() + usize::from(a.beside);
        let others = b.loading - usize::from(mine);
        let occupied = queued + if a.count_inflight { others } else { 0 };
        let full = EvictionPlan::Full { registered: queued, loading: b.loading };
        // Behind the adds that came earlier and still wait (an add that holds its slot was
        // served already).
        if a.in_line && !a.barge && !mine && b.waiters.ahead(ticket) {
            let joined = ticket.is_none().then(|| self.join_line(b, &a.wake));
            return round(full, false, joined, None, true);
        }
        if occupied < max {
            self.serve(b, mine, ticket);
            return round(EvictionPlan::Admit, !mine, None, None, false);
        }
        let needed = occupied + 1 - max;
        let victims = b.victims(needed, Some(id), |v| {
            !pinned_below.contains(v) && (a.evict_leased || !self.inner.in_use(v)) && !self.inner.is_locked(v)
        });
        // Too few to admit it: evicting them would only take room that another add needs (two
        // adds each evicting a share of what both need, then waiting for each other's slot
        // until their deadlines).
        if victims.is_empty() || (victims.len() < needed && !self.mutant(Mutant::PARTIAL_EVICTION_CLAIMS)) {
            let joined = (a.in_line && !mine && ticket.is_none()).then(|| self.join_line(b, &a.wake));
            // First in line: designate the least recently used victim that only leases keep,
            // so that its last lease hands it over (in this monitor, so that no lease can end
            // unseen between the plan and the designation).
            let short = needed - victims.len();
            let redesignated = a
                .in_line
                .then(|| self.designation_for(b, id, s.held, short, &victims, pinned_below))
                .flatten();
            return round(full, false, joined, redesignated, false);
        }
        self.serve(b, mine, ticket);
        round(EvictionPlan::Evict(victims), !mine, None, None, false)
    }

    /// Puts an add in line (under the book's monitor), to be woken through `wake`; its ticket.
    fn join_line(&self, b: &mut Bookkeeping<super::Wake<M>>, wake: &super::Wake<M>) -> u64 {
        b.waiters.join_observed(Arc::clone(wake), self.inner.runtime())
    }

    /// Counts an add's slot (under the book's monitor), unless it holds one already (`mine`).
    fn serve(&self, b: &mut Bookkeeping<super::Wake<M>>, mine: bool, ticket: Option<u64>) {
        if !mine {
            b.loading += 1;
            self.inner.runtime().observe_line(b.waiters.key(), LineStep::Served { ticket });
        }
    }
}
