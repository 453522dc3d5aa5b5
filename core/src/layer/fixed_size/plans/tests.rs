//! The plans alone, with no runtime, no monitor and no threads: random bookkeeping states, a
//! fake stack below with fixed answers, and the properties a plan owes the cache.
//!
//! Every plan leaves the queue, the pins and the version exactly as they were (I4, I5, I6: only
//! completed evictions and adds change the queue). Admission: victims are the least recently
//! used models that are neither the new id (I6), pinned here or below (I10), in use nor locked,
//! exactly as many as the capacity needs (never more: no needless eviction; never fewer: no
//! partial claims, but for an add that overflows anyway, which takes every evictable victim
//! and overflows only once none is left, SPEC 2.7); an admitted or evicting add fits `max_size` with every load in flight; it
//! counts its slot exactly once; an add behind an earlier waiter never takes room (SPEC 2.14);
//! over a lowered capacity, the first add evicts every evictable victim owed to it at once, and
//! waits only when none is evictable; it joins the line once; only the first in line, one
//! victim short or over a lowered capacity, designates, and only a model that leases alone
//! keep, its held one while that still qualifies. Lowering and the byte budget: the least
//! recently used idle models, only as many as are over.
//!
//! The mutant flags a plan takes (`partial`, `evict_leased`, `barge`, `count_inflight` off,
//! `starve_lowered`)
//! each make these properties fail: [`each_mutant_flag_breaks_a_property`].

use std::cell::RefCell;
use std::collections::BTreeSet;

use proptest::prelude::*;
use proptest::test_runner::{Config, TestCaseError, TestError, TestRunner};

use super::{
    Admitting, Below, BelowCounts, EvictionPlan, Lowering, Round, Standing, admission, bytes_victim, lowering,
};
use crate::id::ModelId;
use crate::layer::fixed_size::queue::{Bookkeeping, PinnedBelow};
use crate::runtime::LineStep;

const NAMES: [&str; 6] = ["a", "b", "c", "d", "e", "f"];

fn id(i: usize) -> ModelId {
    ModelId::new(NAMES[i]).expect("a valid id")
}

/// The stack below: fixed answers, and what the plan asked of it.
#[derive(Debug, Default)]
struct Fake {
    in_use: BTreeSet<ModelId>,
    locked: BTreeSet<ModelId>,
    /// Ids whose designation fails (no longer registered at the base).
    undesignatable: BTreeSet<ModelId>,
    designated: RefCell<Vec<ModelId>>,
    steps: RefCell<Vec<LineStep>>,
}

impl Below for Fake {
    type Designation = ModelId;

    fn in_use(&self, id: &ModelId) -> bool {
        self.in_use.contains(id)
    }

    fn is_locked(&self, id: &ModelId) -> bool {
        self.locked.contains(id)
    }

    fn designate(&self, id: &ModelId) -> Option<ModelId> {
        self.designated.borrow_mut().push(id.clone());
        (!self.undesignatable.contains(id)).then(|| id.clone())
    }

    fn observe_line(&self, _line: usize, step: LineStep) {
        self.steps.borrow_mut().push(step);
    }

    fn counts(&self) -> BelowCounts {
        BelowCounts::default()
    }
}

/// The mutant flags an admission takes (all off in production).
#[derive(Debug, Clone, Copy, Default)]
struct Flags {
    partial: bool,
    evict_leased: bool,
    barge: bool,
    ignore_inflight: bool,
    starve_lowered: bool,
}

/// A bookkeeping state, the stack below, and where an add stands.
#[derive(Debug, Clone)]
struct Case {
    /// Queued ids, least recently used first.
    queue: Vec<usize>,
    pinned: BTreeSet<usize>,
    /// Loads in flight besides the add's own slot.
    others: usize,
    max: usize,
    /// Adds in line before this one.
    ahead: usize,
    id: usize,
    beside: bool,
    in_line: bool,
    mine: bool,
    /// It joined the line already (after the `ahead` ones).
    ticket: bool,
    held: Option<usize>,
    pinned_below: BTreeSet<usize>,
    /// The pins found below were found at this version (else they are forgotten).
    fresh: bool,
    in_use: BTreeSet<usize>,
    locked: BTreeSet<usize>,
    undesignatable: BTreeSet<usize>,
    sizes: Vec<u64>,
    max_bytes: u64,
}

fn set() -> impl Strategy<Value = BTreeSet<usize>> {
    proptest::collection::btree_set(0..NAMES.len(), 0..4)
}

fn case() -> impl Strategy<Value = Case> {
    let queue = proptest::collection::vec(0..NAMES.len(), 0..8).prop_map(|mut q| {
        let mut seen = BTreeSet::new();
        q.retain(|i| seen.insert(*i));
        q
    });
    let shape = (queue, set(), 0..3usize, 1..6usize, 0..3usize, 0..NAMES.len());
    let standing = (any::<[bool; 5]>(), proptest::option::of(0..NAMES.len()), set());
    let below = (set(), set(), set(), proptest::collection::vec(0..100u64, NAMES.len()), 0..400u64);
    (shape, standing, below).prop_map(|(shape, standing, below)| {
        let (queue, pinned, others, max, ahead, id) = shape;
        let ([beside, in_line, mine, ticket, fresh], held, pinned_below) = standing;
        let (in_use, locked, undesignatable, sizes, max_bytes) = below;
        // An add that holds its slot left the line when it took it.
        let ticket = ticket && !mine;
        Case {
            queue,
            pinned,
            others,
            max,
            ahead,
            id,
            beside,
            in_line,
            mine,
            ticket,
            held,
            pinned_below,
            fresh,
            in_use,
            locked,
            undesignatable,
            sizes,
            max_bytes,
        }
    })
}

/// The case's bookkeeping (at version 7), its fake below, the pins found below, and the add's
/// ticket if it joined.
fn build(c: &Case) -> (Bookkeeping<()>, Fake, PinnedBelow, Option<u64>) {
    let ids = |s: &BTreeSet<usize>| s.iter().map(|&i| id(i)).collect::<BTreeSet<_>>();
    let mut b = Bookkeeping::default();
    c.queue.iter().for_each(|&i| b.push(&id(i)));
    c.queue.iter().for_each(|&i| b.set_size(&id(i), c.sizes[i]));
    b.pinned = ids(&c.pinned);
    (b.loading, b.max_size, b.version) = (c.others + usize::from(c.mine), c.max, 7);
    for _ in 0..c.ahead {
        b.waiters.join(());
    }
    let ticket = c.ticket.then(|| b.waiters.join(()));
    let fake = Fake {
        in_use: ids(&c.in_use),
        locked: ids(&c.locked),
        undesignatable: ids(&c.undesignatable),
        ..Fake::default()
    };
    let mut pinned_below = PinnedBelow::default();
    let version = if c.fresh { 7 } else { 6 };
    pinned_below.remember(version, BelowCounts::default(), c.pinned_below.iter().map(|&i| id(i)));
    (b, fake, pinned_below, ticket)
}

/// What a plan must leave alone.
fn untouched(b: &Bookkeeping<()>, c: &Case) -> Result<(), TestCaseError> {
    prop_assert_eq!(
        b.queue.iter().cloned().collect::<Vec<_>>(),
        c.queue.iter().map(|&i| id(i)).collect::<Vec<_>>()
    );
    prop_assert_eq!(&b.pinned, &c.pinned.iter().map(|&i| id(i)).collect::<BTreeSet<_>>());
    prop_assert_eq!(b.version, 7);
    Ok(())
}

// ---- Admission ----------------------------------------------------------------------------------

/// Plans one admission round for `c` with `flags`, and checks what it decided.
fn check_admission(c: &Case, flags: Flags) -> Result<(), TestCaseError> {
    let (mut b, fake, mut pinned_below, ticket) = build(c);
    let new = id(c.id);
    let held = c.held.map(id);
    let a = Admitting {
        id: &new,
        beside: c.beside,
        count_inflight: !flags.ignore_inflight,
        evict_leased: flags.evict_leased,
        in_line: c.in_line,
        barge: flags.barge,
        // As production: an add that overflows anyway (no line) evicts what it can first.
        partial: flags.partial || !c.in_line,
        starve_lowered: flags.starve_lowered,
        wake: (),
    };
    let s = Standing { mine: c.mine, ticket, held: held.as_ref() };
    let (loading, line) = (b.loading, b.waiters.len());
    let round = admission(&mut b, &a, &s, &mut pinned_below, &fake, |_| ());
    untouched(&b, c)?;
    let taken = matches!(round.plan, EvictionPlan::Admit | EvictionPlan::Evict(_));
    prop_assert_eq!(round.claim, taken && !c.mine, "a slot is claimed once, when taken");
    prop_assert_eq!(b.loading, loading + usize::from(round.claim), "the claim is counted");
    prop_assert_eq!(round.seen, 7);
    // Someone else is first: an earlier add (one that joined after it is never first).
    let behind = c.in_line && !c.mine && c.ahead > 0;
    prop_assert_eq!(round.behind, behind, "behind an earlier waiter (SPEC 2.14)");
    if behind {
        prop_assert!(!taken, "an add behind an earlier waiter takes no room (SPEC 2.14)");
        prop_assert!(round.redesignated.is_none(), "only the first in line designates");
    }
    let joins = c.in_line && !c.mine && ticket.is_none() && !taken;
    prop_assert_eq!(round.joined.is_some(), joins, "a waiting add joins the line once");
    prop_assert_eq!(b.waiters.len(), line + usize::from(joins));
    check_steps(&fake, &round, ticket)?;
    let (needed, eligible) = need(c, &b, &round, &fake, &new);
    check_capacity(c, &b, &round, needed, &eligible)?;
    // Waiting first in line, this many victims short, and whether more are queued than the
    // limit (a victim is owed).
    let waits =
        c.in_line && !behind && matches!(round.plan, EvictionPlan::Full { .. } | EvictionPlan::Owed(_));
    // A designated victim among the owed ones stays designated through their eviction.
    let evicting_held =
        matches!(&round.plan, EvictionPlan::Owed(v) if held.as_ref().is_some_and(|h| v.contains(h)));
    let waits = waits && !evicting_held;
    let queued = c.queue.iter().filter(|&&i| i != c.id).count() + usize::from(c.beside);
    let evicting = if let EvictionPlan::Owed(v) = &round.plan { v.len() } else { 0 };
    let owed = queued.saturating_sub(c.max) > evicting;
    check_designation(c, &round, &fake, &new, waits.then(|| (needed - eligible.len(), owed)))
}

/// The line's steps told below: a join with the ticket it got, a slot served with the add's.
fn check_steps(fake: &Fake, round: &Round<ModelId>, ticket: Option<u64>) -> Result<(), TestCaseError> {
    let mut expected = Vec::new();
    expected.extend(round.joined.map(|ticket| LineStep::Joined { ticket }));
    expected.extend(round.claim.then_some(LineStep::Served { ticket }));
    prop_assert_eq!(&*fake.steps.borrow(), &expected);
    Ok(())
}

/// Whether `v` may be evicted for `new` in `c`, in production.
fn evictable(c: &Case, fake: &Fake, v: &ModelId, new: &ModelId) -> bool {
    let below = c.fresh && c.pinned_below.iter().any(|&i| id(i) == *v);
    v != new && !c.pinned.iter().any(|&i| id(i) == *v) && !below && !fake.in_use(v) && !fake.is_locked(v)
}

/// How many victims the add needs (with its own slot), and the evictable models in LRU order.
fn need(
    c: &Case,
    b: &Bookkeeping<()>,
    round: &Round<ModelId>,
    fake: &Fake,
    new: &ModelId,
) -> (usize, Vec<ModelId>) {
    let queued = c.queue.iter().filter(|&&i| id(i) != *new).count() + usize::from(c.beside);
    let slots = queued + b.loading + usize::from(!round.claim && !c.mine);
    let eligible = c.queue.iter().map(|&i| id(i)).filter(|v| evictable(c, fake, v, new)).collect();
    (slots.saturating_sub(c.max), eligible)
}

/// Victims: the least recently used evictable models, exactly as many as the capacity needs,
/// and an add that takes room fits `max_size` with every load in flight.
fn check_capacity(
    c: &Case,
    b: &Bookkeeping<()>,
    round: &Round<ModelId>,
    needed: usize,
    eligible: &[ModelId],
) -> Result<(), TestCaseError> {
    let queued = c.queue.iter().filter(|&&i| id(i) != id(c.id)).count() + usize::from(c.beside);
    // Every slot counted now, the add's own included once it holds one.
    let slots = queued + b.loading;
    match &round.plan {
        EvictionPlan::Admit => prop_assert!(slots <= c.max, "admitted over max_size: {} > {}", slots, c.max),
        EvictionPlan::Evict(victims) => {
            prop_assert_eq!(
                &victims[..],
                &eligible[..victims.len().min(eligible.len())],
                "LRU-first evictable victims (I6, I10)"
            );
            if c.in_line || victims.len() >= needed {
                prop_assert_eq!(slots - victims.len(), c.max, "evicts exactly what the capacity needs");
            } else {
                prop_assert_eq!(victims.len(), eligible.len(), "overflows past an evictable victim (2.7)");
            }
        }
        EvictionPlan::Owed(victims) => {
            prop_assert!(
                c.in_line && !round.behind && !victims.is_empty(),
                "evicts what is owed first in line"
            );
            let owed = queued.saturating_sub(c.max);
            let first = &eligible[..owed.min(eligible.len())];
            prop_assert_eq!(
                &victims[..],
                first,
                "the LRU evictable victims the queue owes, no more (I6, I10)"
            );
        }
        EvictionPlan::Full { .. } if !round.behind => {
            prop_assert!(eligible.len() < needed, "waits although {} victims would do", needed);
            prop_assert!(
                c.in_line || eligible.is_empty(),
                "overflows although {:?} are evictable (2.7)",
                eligible
            );
            let owed = c.in_line && queued > c.max;
            prop_assert!(!owed || eligible.is_empty(), "waits although {:?} are owed to the limit", eligible);
        }
        EvictionPlan::Full { .. } => {}
    }
    Ok(())
}

/// The first in line, one victim short or with its victim owed to a lowered capacity (`short`:
/// how many, and whether owed), designates a model that only leases keep: its held one while
/// that still qualifies, else the least recently used such; else it designates nothing, and
/// gives up what it held.
fn check_designation(
    c: &Case,
    round: &Round<ModelId>,
    fake: &Fake,
    new: &ModelId,
    short: Option<(usize, bool)>,
) -> Result<(), TestCaseError> {
    let asked = fake.designated.borrow().clone();
    let got = round.redesignated.as_ref().map(|r| r.as_ref().map(|(v, d)| (v.clone(), d.clone())));
    let blocked = |v: &ModelId| {
        v == new
            || c.pinned.iter().any(|&i| id(i) == *v)
            || c.fresh && c.pinned_below.iter().any(|&i| id(i) == *v)
            || fake.is_locked(v)
    };
    let qualifies = |v: &ModelId| c.queue.iter().any(|&i| id(i) == *v) && !blocked(v) && fake.in_use(v);
    if !short.is_some_and(|(short, owed)| short == 1 || owed) {
        prop_assert!(asked.is_empty(), "designated {:?} while {:?} short", asked, short);
        // Waiting first in line, it gives up what it held; otherwise its designation stays.
        let expected = short.and(c.held).map(|_| None);
        prop_assert_eq!(got, expected);
        return Ok(());
    }
    let expected = c
        .held
        .map(id)
        .filter(|h| qualifies(h))
        .or_else(|| c.queue.iter().map(|&i| id(i)).find(|v| qualifies(v)));
    prop_assert_eq!(
        &asked,
        &Vec::from_iter(expected.clone()),
        "keeps its held victim, else the LRU one leases alone keep"
    );
    let designated = expected.filter(|v| !fake.undesignatable.contains(v)).map(|v| (v.clone(), v));
    prop_assert_eq!(got, Some(designated));
    Ok(())
}

// ---- Lowering and bytes -------------------------------------------------------------------------

/// A lowered capacity's victims: the least recently used idle models, only as many as are over.
fn check_lowering(c: &Case) -> Result<(), TestCaseError> {
    let (b, fake, mut pinned_below, _) = build(c);
    let Lowering { over, victims, seen } = lowering(&b, &mut pinned_below, &fake);
    untouched(&b, c)?;
    prop_assert_eq!(seen, 7);
    prop_assert_eq!(over, (c.queue.len() + b.loading).saturating_sub(c.max));
    let none = ModelId::new("none").expect("a valid id");
    let eligible: Vec<ModelId> =
        c.queue.iter().map(|&i| id(i)).filter(|v| evictable(c, &fake, v, &none)).take(over).collect();
    prop_assert_eq!(victims, eligible);
    Ok(())
}

/// The byte budget's victim: while the queued bytes are over, the least recently used model
/// that is neither pinned, the one just loaded, nor in use (locks and pins below are the
/// eviction's to find).
fn check_bytes(c: &Case) -> Result<(), TestCaseError> {
    let (b, fake, _, _) = build(c);
    let keep = id(c.id);
    let victim = bytes_victim(&b, (&keep, &[]), c.max_bytes, &fake);
    untouched(&b, c)?;
    let bytes: u64 = c.queue.iter().map(|&i| c.sizes[i]).sum();
    let pinned = |v: &ModelId| c.pinned.iter().any(|&i| id(i) == *v);
    let expected = (bytes > c.max_bytes)
        .then(|| c.queue.iter().map(|&i| id(i)).find(|v| *v != keep && !pinned(v) && !fake.in_use(v)))
        .flatten();
    prop_assert_eq!(victim, expected);
    Ok(())
}

proptest! {
    #![proptest_config(Config { cases: 2048, ..Config::default() })]

    /// Admission, lowering and the byte budget's plans owe the cache their properties (module
    /// docs) from every state, with the production flags.
    #[test]
    fn the_plans_keep_their_promises(c in case()) {
        check_admission(&c, Flags::default())?;
        check_lowering(&c)?;
        check_bytes(&c)?;
    }
}

/// The property test has teeth: each mutant flag of the admission plan is caught from some
/// state (proptest searches for it, then shrinks it).
#[test]
fn each_mutant_flag_breaks_a_property() {
    let flags = [
        ("partial-eviction-claims", Flags { partial: true, ..Flags::default() }),
        ("evict-leased", Flags { evict_leased: true, ..Flags::default() }),
        ("capacity-waiters-barge", Flags { barge: true, ..Flags::default() }),
        ("capacity-ignores-inflight", Flags { ignore_inflight: true, ..Flags::default() }),
        ("lowered-limit-starves-adds", Flags { starve_lowered: true, ..Flags::default() }),
    ];
    for (name, flags) in flags {
        let mut runner =
            TestRunner::new(Config { cases: 4096, failure_persistence: None, ..Config::default() });
        match runner.run(&case(), |c| check_admission(&c, flags)) {
            Err(TestError::Fail(why, c)) => eprintln!("{name}: caught ({why}) at {c:?}"),
            other => panic!("{name}: not caught: {other:?}"),
        }
    }
}
