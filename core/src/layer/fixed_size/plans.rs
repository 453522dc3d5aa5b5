//! The cache's decisions, as pure functions of its bookkeeping and of what the stack below
//! answers ([`Below`]): a cold add's admission round (admit it, evict these victims for it, or
//! wait — behind the adds that came earlier, SPEC 2.14, or first in line with its victim
//! designated; over a lowered capacity, evicting first what is owed to it), the victims of a
//! lowered capacity (SPEC 1.12) and of the byte budget. They run
//! under the bookkeeping monitor and touch no runtime and no user code, so they are
//! property-tested alone (`plans/tests.rs`); the layer acts on what they return outside it.

use std::collections::VecDeque;

use super::queue::{BelowCounts, Bookkeeping, PinnedBelow};
use crate::id::ModelId;
use crate::manager::{Designation, Manager};
use crate::mutants::Mutant;
use crate::runtime::{LineStep, Runtime};

/// What a plan asks the stack below: hints that answer at once (they are asked under the
/// bookkeeping monitor), a designation, and where a line's steps are told.
pub(super) trait Below {
    /// What keeps a designated victim closed for its waiter (given up when dropped).
    type Designation;
    /// Some lease of `id` is live.
    fn in_use(&self, id: &ModelId) -> bool;
    /// Some caller holds the lifecycle lock of `id`.
    fn is_locked(&self, id: &ModelId) -> bool;
    /// Designates `id` as the first waiter's victim ([`Manager::designate`]).
    fn designate(&self, id: &ModelId) -> Option<Self::Designation>;
    /// Tells a step of the line at `line` ([`Runtime::observe_line`]).
    fn observe_line(&self, line: usize, step: LineStep);
    /// How many pins were lifted and ids removed below so far, if counted
    /// ([`Manager::unpins`], [`Manager::removals`]).
    fn counts(&self) -> BelowCounts;
}

// ---- The stack below ----------------------------------------------------------------------------

/// The stack a [`FixedSizeCache`](super::FixedSizeCache) wraps, as its plans see it.
pub(super) struct Stack<'a, M>(pub(super) &'a M);

impl<M: Manager> Below for Stack<'_, M> {
    type Designation = Designation<M::Runtime>;

    fn in_use(&self, id: &ModelId) -> bool {
        self.0.in_use(id.as_str())
    }

    fn is_locked(&self, id: &ModelId) -> bool {
        self.0.is_locked(id.as_str())
    }

    fn designate(&self, id: &ModelId) -> Option<Self::Designation> {
        self.0.designate(id.as_str())
    }

    fn observe_line(&self, line: usize, step: LineStep) {
        self.0.runtime().observe_line(line, step);
    }

    fn counts(&self) -> BelowCounts {
        // M-PN2's mutant: a pin lifted or a victim removed below goes unnoticed until this
        // layer changes.
        if self.0.runtime().mutant(Mutant::PINNED_BELOW_STAYS_OUT) {
            return BelowCounts::default();
        }
        BelowCounts { unpins: self.0.unpins(), removals: self.0.removals() }
    }
}

// ---- Admission ----------------------------------------------------------------------------------

/// What a round decided to do about the capacity.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum EvictionPlan {
    /// A slot is free: take it.
    Admit,
    /// Evict these (least recently used first), then take the slot they leave.
    Evict(Vec<ModelId>),
    /// More models are queued than a lowered capacity allows: evict these (what the queue owes
    /// the limit, least recently used first), then plan again, still waiting for a slot.
    Owed(Vec<ModelId>),
    /// Nothing (or too little) is evictable: wait for the stack to change.
    Full { registered: usize, loading: usize },
}

/// What an add brings to every round of its admission (`W`: what wakes it in line).
pub(super) struct Admitting<'a, W> {
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
    /// An add evicts what it can even when that is too few: one that overflows anyway (the
    /// `Overflow` policy), or, as a historical bug, one that would wait
    /// (`partial-eviction-claims`).
    pub(super) partial: bool,
    /// Over a lowered capacity, an add evicts nothing owed to it and designates only when one
    /// victim short (`lowered-limit-starves-adds`).
    pub(super) starve_lowered: bool,
    /// What wakes the add when it waits behind another: bumped only when it becomes first.
    pub(super) wake: W,
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

/// What a round decided, for the add to act on outside the monitor (`D`: a designation).
pub(super) struct Round<D> {
    pub(super) plan: EvictionPlan,
    /// The bookkeeping version the plan was made at.
    pub(super) seen: u64,
    /// The add took its slot in this round.
    pub(super) claim: bool,
    /// The add joined the line in this round, with this ticket.
    pub(super) joined: Option<u64>,
    /// `Some`: the add's designation is replaced (`None` in it: given up).
    pub(super) redesignated: Option<Option<(ModelId, D)>>,
    /// The add waits behind another in line.
    pub(super) behind: bool,
}

/// Plans one round of `a`'s admission from where it stands (`s`), under the book's monitor:
/// it changes only the slots counted (`loading`) and the line, never the queue's members or
/// the pins. `order` puts the queue in LRU order; it is called only if the round picks
/// victims.
pub(super) fn admission<W: Clone, B: Below>(
    b: &mut Bookkeeping<W>,
    a: &Admitting<'_, W>,
    s: &Standing<'_>,
    pinned_below: &mut PinnedBelow,
    below: &B,
    order: impl FnOnce(&mut VecDeque<ModelId>),
) -> Round<B::Designation> {
    let (id, mine, ticket) = (a.id, s.mine, s.ticket);
    let (seen, max) = (b.version, b.max_size);
    let round =
        |plan, claim, joined, redesignated, behind| Round { plan, seen, claim, joined, redesignated, behind };
    pinned_below.refresh(seen, || below.counts());
    let queued = b.queue.iter().filter(|q| *q != id).count() + usize::from(a.beside);
    let others = b.loading - usize::from(mine);
    let occupied = queued + if a.count_inflight { others } else { 0 };
    let full = EvictionPlan::Full { registered: queued, loading: b.loading };
    // Behind the adds that came earlier and still wait (an add that holds its slot was served
    // already).
    if a.in_line && !a.barge && !mine && b.waiters.ahead(ticket) {
        let joined = ticket.is_none().then(|| join_line(b, a, below));
        return round(full, false, joined, None, true);
    }
    if occupied < max {
        serve(b, mine, ticket, below);
        return round(EvictionPlan::Admit, !mine, None, None, false);
    }
    order(&mut b.queue);
    let needed = occupied + 1 - max;
    let victims = b.victims(needed, Some(id), |v| nameable(v, a, pinned_below, below));
    // Too few to admit it: evicting them would only take room that another add needs (two adds
    // each evicting a share of what both need, then waiting for each other's slot until their
    // deadlines).
    if victims.is_empty() || (victims.len() < needed && !a.partial) {
        let joined = (a.in_line && !mine && ticket.is_none()).then(|| join_line(b, a, below));
        // The queued models beyond the capacity (a lowered `max_size`, SPEC 1.12) are owed to
        // the limit whoever is served. Loads in flight do not count here: a slot claimed by an
        // add still evicting for it is not over the limit once its victim goes.
        let owed = if a.starve_lowered { 0 } else { queued.saturating_sub(max) };
        // Waiting in line, the owed victims found evictable go now, each once found idle, not
        // only when all it needs are idle together: leases on two would starve it (SPEC 2.14).
        let owing = a.in_line && owed > 0 && !victims.is_empty();
        let evicting = if owing { &victims[..owed.min(victims.len())] } else { &[] };
        // First in line: designate the least recently used victim that only leases keep, so
        // that its last lease hands it over (in this monitor, so that no lease can end unseen
        // between the plan and the designation). A designated victim among the owed ones stays
        // designated (closed) through their eviction, as in an `Evict` round.
        let keep = s.held.is_some_and(|held| evicting.contains(held));
        // Only a victim owed beyond those going now goes whether or not the add is served.
        let owed = owed - evicting.len();
        let to = Short { id, held: s.held, short: needed - victims.len(), owed, victims: &victims };
        let redesignated = (a.in_line && !keep).then(|| designation(b, &to, pinned_below, below)).flatten();
        let plan = if owing { EvictionPlan::Owed(evicting.to_vec()) } else { full };
        return round(plan, false, joined, redesignated, false);
    }
    serve(b, mine, ticket, below);
    round(EvictionPlan::Evict(victims), !mine, None, None, false)
}

/// Whether a round of `a` may name `v` as a victim: not found pinned below, not in use (but
/// under the `evict-leased` bug), not locked.
fn nameable<W>(v: &ModelId, a: &Admitting<'_, W>, pinned_below: &PinnedBelow, below: &impl Below) -> bool {
    !pinned_below.contains(v) && (a.evict_leased || !below.in_use(v)) && !below.is_locked(v)
}

/// Puts an add in line, to be woken through its waker; its ticket.
fn join_line<W: Clone>(b: &mut Bookkeeping<W>, a: &Admitting<'_, W>, below: &impl Below) -> u64 {
    let ticket = b.waiters.join(a.wake.clone());
    below.observe_line(b.waiters.key(), LineStep::Joined { ticket });
    ticket
}

/// Counts an add's slot, unless it holds one already (`mine`).
fn serve<W>(b: &mut Bookkeeping<W>, mine: bool, ticket: Option<u64>, below: &impl Below) {
    if !mine {
        b.loading += 1;
        below.observe_line(b.waiters.key(), LineStep::Served { ticket });
    }
}

/// A round that found too few victims: for whom, and how far short.
struct Short<'a> {
    id: &'a ModelId,
    held: Option<&'a ModelId>,
    /// Victims missing beyond `victims` (the evictable ones).
    short: usize,
    /// How many of the victims it needs the queue owes a lowered capacity anyway, beyond those
    /// it evicts in this round.
    owed: usize,
    victims: &'a [ModelId],
}

/// The first add in line's designation: `None` keeps none (it held none), `Some` replaces the
/// one it `held` (with `None`, gives it up). A designation is worth its close one victim short,
/// or when the victim is owed to a lowered capacity (it goes whether or not the add is served);
/// otherwise a victim closed while the add still waits for others would keep its leases
/// waiting for nothing. It keeps its victim while that is queued, not pinned here nor found
/// pinned below, not evictable already and its lifecycle lock free; a new one is the least
/// recently used such model.
fn designation<W, B: Below>(
    b: &Bookkeeping<W>,
    s: &Short<'_>,
    pinned_below: &PinnedBelow,
    below: &B,
) -> Option<Option<(ModelId, B::Designation)>> {
    if s.short != 1 && s.owed == 0 {
        return s.held.map(|_| None);
    }
    // Not evictable already (closed for nothing while the add still waits for another), and
    // its lifecycle lock free (a holder, such as a replace waiting behind this add, may need
    // its leases meanwhile).
    let open = |v: &ModelId| !s.victims.contains(v) && !pinned_below.contains(v) && !below.is_locked(v);
    let keeps = |v: &ModelId| b.queue.contains(v) && !b.pinned.contains(v) && v != s.id && open(v);
    let victim = match s.held.filter(|v| keeps(v)) {
        Some(held) => Some(held.clone()),
        None => b.victims(1, Some(s.id), open).pop(),
    };
    // A kept victim is designated again: if it was replaced, or removed and added again, since,
    // the slot now registered is the one designated (the old designation goes after).
    Some(victim.and_then(|victim| below.designate(&victim).map(|d| (victim, d))))
}

// ---- Lowering and bytes -------------------------------------------------------------------------

/// A lowered capacity's plan: how many are over it, and the idle victims that can go now.
#[derive(Debug, PartialEq, Eq)]
pub(super) struct Lowering {
    /// Registered ids and loads in flight beyond the capacity.
    pub(super) over: usize,
    /// Up to `over` of them, least recently used first: not pinned here or found pinned below,
    /// not in use, not locked.
    pub(super) victims: Vec<ModelId>,
    /// The bookkeeping version the plan was made at.
    pub(super) seen: u64,
}

/// Plans evicting down to a lowered capacity, under the book's monitor.
pub(super) fn lowering<W>(
    b: &Bookkeeping<W>,
    pinned_below: &mut PinnedBelow,
    below: &impl Below,
) -> Lowering {
    pinned_below.refresh(b.version, || below.counts());
    let over = (b.queue.len() + b.loading).saturating_sub(b.max_size);
    let victims =
        b.victims(over, None, |v| !pinned_below.contains(v) && !below.in_use(v) && !below.is_locked(v));
    Lowering { over, victims, seen: b.version }
}

/// The byte budget's next victim after a load of `keep`, if the queued models' bytes are over
/// `max_bytes`: the least recently used one that is neither pinned, `keep`, in use, nor passed
/// over already (`skipped`).
pub(super) fn bytes_victim<W>(
    b: &Bookkeeping<W>,
    (keep, skipped): (&ModelId, &[ModelId]),
    max_bytes: u64,
    below: &impl Below,
) -> Option<ModelId> {
    let candidate = |v: &ModelId| !below.in_use(v) && !skipped.contains(v);
    (b.bytes() > max_bytes).then(|| b.victims(1, Some(keep), candidate).pop()).flatten()
}

#[cfg(test)]
mod tests;
