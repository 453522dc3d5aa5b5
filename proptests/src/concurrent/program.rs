//! Generated concurrent programs over a manager stack (`FixedSizeCache` over the base): a short
//! sequential prefix, then 2–3 threads of 2–5 operations, plus scripted faults of the user code.
//! Operations name models by index into [`IDS`], so every shrunk program is still meaningful.

use proptest::prelude::*;
use resident_sim::world::manager::Step;

/// The model ids of generated programs: few, so that operations collide.
pub const IDS: [&str; 3] = ["A", "B", "C"];

/// The one alias of generated programs: [`ThreadOp::AddAs`] registers a model of any of [`IDS`]
/// under it.
pub const ALIAS: &str = "X";

/// The resolved ids, indexed as operations that name a registered model index them: [`IDS`],
/// then [`ALIAS`].
pub const RESOLVED: [&str; 4] = ["A", "B", "C", ALIAS];

/// The stack's capacity.
pub const MAX_SIZE: usize = 2;

/// The capacity of a narrow stack's inner cache (see [`Program::narrow`]).
pub const NARROW_SIZE: usize = 1;

/// One operation of a thread.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub enum ThreadOp {
    /// `add_model(IDS[i], None)`.
    Add(usize),
    /// `add_model(IDS[i], Some(ALIAS))`: loads `IDS[i]`, registered under [`ALIAS`].
    AddAs(usize),
    /// `remove(RESOLVED[i])`.
    Remove(usize),
    /// `lease(RESOLVED[i])`, kept by the thread until an [`ThreadOp::EndLease`] or its end.
    Lease(usize),
    /// Drops the thread's held lease number `k` (modulo how many it holds; nothing if none).
    EndLease(usize),
    /// `pin(RESOLVED[i])`.
    Pin(usize),
    /// `unpin(RESOLVED[i])`.
    Unpin(usize),
    /// `infer(RESOLVED[i], f)`; `f` panics if the flag is set.
    Infer(usize, bool),
    /// `add_model_with(IDS[i], None, …)` with a zero timeout: no wait inside it may block
    /// (SPEC 1.10).
    AddNow(usize),
    /// `remove_with(RESOLVED[i], …)` with a zero timeout.
    RemoveNow(usize),
    /// `replace(IDS[i], None, …)`: a new version of `IDS[i]` (SPEC 1.11).
    Replace(usize),
    /// `shutdown(…)` of the whole stack (SPEC 1.13): later adds and leases are refused.
    Shutdown,
    /// `set_max_size(n, …)` of the outermost cache (SPEC 1.12), `n` in `1..=MAX_SIZE`: lowering
    /// evicts idle models down to it, raising wakes the adds waiting for room.
    Resize(usize),
    /// `clear(…)`: removes every registered model, pinned ones too (their pins stay).
    Clear,
    /// `register(IDS[i], model)` of a model of `IDS[i]` built outside the stack: admitted like
    /// a cold add, without a load.
    Register(usize),
    /// `replace_in_place(IDS[i], None, …)`: the old version drained, unloaded and dropped, then
    /// the new one loaded into its slot (SPEC 1.11, S-R2i).
    ReplaceInPlace(usize),
    /// `pin_with(RESOLVED[i], …)` with a zero timeout: its wait for the lifecycle lock may not
    /// block (SPEC 1.10).
    PinNow(usize),
    /// `lease_with(RESOLVED[i], …)` with a zero timeout, kept like [`ThreadOp::Lease`]: no wait
    /// inside it may block (SPEC 1.10).
    LeaseNow(usize),
    /// `peek_until(RESOLVED[i], …)`: a lease that is no use of the model (no layer's LRU order
    /// moves), kept like [`ThreadOp::Lease`].
    Peek(usize),
    /// `lock(RESOLVED[i])`, then one step under that lock, the lock kept after the step until
    /// another thread's call returns (or, every thread blocked, a short while has passed): what
    /// the step frees is noticed by the others while its lock is still held.
    Locked(usize, Under),
}

/// The step a [`ThreadOp::Locked`] takes under its lock.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub enum Under {
    /// `add_locked` of the model of the same id (an index into [`IDS`]).
    Add,
    /// `remove_locked`.
    Remove,
    /// `evict_locked`.
    Evict,
}

/// What each model's user code does: loads and unloads call by call (then `Ok`), and panics
/// of `size_bytes` and of a model's `Drop`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default, serde::Serialize, serde::Deserialize)]
pub struct Faults {
    /// `loads[i][n]`: what the `n`-th load of `IDS[i]` does.
    pub loads: [Vec<Step>; 3],
    /// `unloads[i][n]`: what the `n`-th unload of a model of `IDS[i]` does.
    pub unloads: [Vec<Step>; 3],
    /// `size_panics[i]`: the first `size_bytes` of a model of `IDS[i]` panics.
    #[serde(default)]
    pub size_panics: [bool; 3],
    /// `drop_panics[i]`: the `Drop` of a model of `IDS[i]` panics once it was unloaded.
    #[serde(default)]
    pub drop_panics: [bool; 3],
}

/// A generated program.
#[derive(Debug, Clone, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub struct Program {
    /// Ids added by the main thread before any thread starts.
    pub prefix: Vec<usize>,
    /// Leases the main thread takes after the prefix, `(IDS index, thread)`: each is handed to
    /// that thread (modulo how many there are) as its first held lease, so programs often start
    /// with the capacity taken by leases some thread will end.
    #[serde(default)]
    pub handed: Vec<(usize, usize)>,
    /// Ids the main thread pins after the prefix (before handing leases), so that programs
    /// often start with the capacity held by pins some thread may lift.
    #[serde(default)]
    pub pins: Vec<usize>,
    /// The threads' operations.
    pub threads: Vec<Vec<ThreadOp>>,
    /// Scripted faults of loads and unloads.
    pub faults: Faults,
    /// The stack is two `FixedSizeCache`s of the same capacity over the base (a nested stack
    /// behaves like one layer), instead of one.
    #[serde(default)]
    pub nested: bool,
    /// With [`Program::nested`], the inner cache holds only [`NARROW_SIZE`] models: the stack
    /// behaves like one layer of that capacity, the inner one evicts, and the outer must learn
    /// of those removals and forward its pins.
    #[serde(default)]
    pub narrow: bool,
    /// Deadlines may fire at any scheduling point ([`Time::Any`](resident_sim::runtime::Time::Any)), not only while every thread is
    /// blocked: lock, drain and capacity waits time out under contention.
    #[serde(default)]
    pub any_time: bool,
    /// The execution's metrics recorder and `tracing` subscriber panic at every report of
    /// [`REPORT_FAULTS`]`[k]` (the library's own reports are user code, SPEC 3.10).
    #[serde(default)]
    pub report_fault: Option<usize>,
    /// Every cache of the stack runs the `Overflow` policy (SPEC 2.7): an add that finds no
    /// idle victim loads past `max_size` at once, after evicting every idle one it finds,
    /// instead of waiting or failing `CapacityExhausted`.
    #[serde(default)]
    pub overflow: bool,
}

/// The reports a program's recorder or subscriber may panic at ([`Program::report_fault`]):
/// the waits for a lifecycle lock and for a lease (reported right after the claim they end
/// in), refusals, loads (a replace's, once the old version is dropped), the event of a
/// finished unload (once the model is dropped), the exit of the `Traced` layer's span
/// around an add (left once a panicking load is caught, never in its unwind), a failed load's
/// count (its error held across it), a change of `max_size` (once the stack fits) and a
/// shutdown's or a clear's report of an id left registered (once every id is settled).
pub static REPORT_FAULTS: [&str; 9] = [
    "resident_lock_wait_seconds",
    "resident_lease_wait_seconds",
    "resident_refusals_total",
    "resident_model_loads_total",
    "remove: unloaded",
    "span exit: add_model",
    "resident_model_load_failures_total",
    "max_size changed",
    "still registered",
];

impl Program {
    /// Whether some call of it has a zero deadline: its waits may time out at any point, as
    /// under [`Program::any_time`].
    pub fn has_calls_now(&self) -> bool {
        self.threads.iter().flatten().any(|op| {
            matches!(
                op,
                ThreadOp::AddNow(_) | ThreadOp::RemoveNow(_) | ThreadOp::PinNow(_) | ThreadOp::LeaseNow(_)
            )
        })
    }

    /// The most models alive at once: the capacity, plus one old version per replace (a
    /// version whose leases outlive the drain is detached, alive until its last lease ends, and
    /// no longer counted by the cache).
    pub fn alive_at_most(&self) -> usize {
        // So is a model built for a register until the stack takes it or hands it back.
        let extra = |op: &&ThreadOp| matches!(op, ThreadOp::Replace(_) | ThreadOp::Register(_));
        // Under the `Overflow` policy each add may load past the capacity.
        let overflows = |op: &&ThreadOp| {
            self.overflow
                && matches!(
                    op,
                    ThreadOp::Add(_)
                        | ThreadOp::AddAs(_)
                        | ThreadOp::AddNow(_)
                        | ThreadOp::Replace(_)
                        | ThreadOp::ReplaceInPlace(_)
                        | ThreadOp::Register(_)
                        | ThreadOp::Locked(_, Under::Add)
                )
        };
        let ops = self.threads.iter().flatten();
        self.capacity() + ops.clone().filter(extra).count() + ops.filter(overflows).count()
    }

    /// The capacity the stack behaves as.
    pub fn capacity(&self) -> usize {
        if self.nested && self.narrow { NARROW_SIZE } else { MAX_SIZE }
    }
}

fn index() -> impl Strategy<Value = usize> {
    0..IDS.len()
}

/// A resolved id: one of [`IDS`], or [`ALIAS`] a fifth of the time.
fn resolved() -> impl Strategy<Value = usize> {
    prop_oneof![4 => index(), 1 => Just(IDS.len())]
}

fn thread_op() -> impl Strategy<Value = ThreadOp> {
    prop_oneof![
        8 => index().prop_map(ThreadOp::Add),
        2 => index().prop_map(ThreadOp::AddAs),
        4 => resolved().prop_map(ThreadOp::Remove),
        6 => resolved().prop_map(ThreadOp::Lease),
        4 => (0..2usize).prop_map(ThreadOp::EndLease),
        2 => resolved().prop_map(ThreadOp::Pin),
        2 => resolved().prop_map(ThreadOp::Unpin),
        2 => (resolved(), rare()).prop_map(|(i, panics)| ThreadOp::Infer(i, panics)),
        1 => index().prop_map(ThreadOp::AddNow),
        1 => resolved().prop_map(ThreadOp::RemoveNow),
        1 => index().prop_map(ThreadOp::Replace),
        1 => Just(ThreadOp::Shutdown),
        1 => (1..=MAX_SIZE).prop_map(ThreadOp::Resize),
    ]
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![6 => Just(Step::Ok), 2 => Just(Step::Fail), 1 => Just(Step::Panic)]
}

fn script() -> impl Strategy<Value = Vec<Step>> {
    prop::collection::vec(step(), 0..3)
}

/// A panic of some user code, now and then.
fn rare() -> impl Strategy<Value = bool> {
    prop::bool::weighted(0.1)
}

fn faults() -> impl Strategy<Value = Faults> {
    (
        [script(), script(), script()],
        [script(), script(), script()],
        [rare(), rare(), rare()],
        [rare(), rare(), rare()],
    )
        .prop_map(|(loads, unloads, size_panics, drop_panics)| Faults {
            loads,
            unloads,
            size_panics,
            drop_panics,
        })
}

/// Up to two adds; as often as not the two that fill the capacity.
fn prefix() -> impl Strategy<Value = Vec<usize>> {
    prop_oneof![1 => prop::collection::vec(index(), 0..=2), 1 => Just(vec![0, 1])]
}

/// Up to two leases handed to threads.
fn handed() -> impl Strategy<Value = Vec<(usize, usize)>> {
    prop::collection::vec((index(), 0..3usize), 0..=2)
}

/// One layer (70%), a nested stack of two equal layers, or a nested stack whose inner layer is
/// narrower.
fn shape() -> impl Strategy<Value = (bool, bool)> {
    prop_oneof![7 => Just((false, false)), 2 => Just((true, false)), 1 => Just((true, true))]
}

/// Programs of 2–3 threads × 2–5 operations, with a prefix of up to two adds, often pins, up to
/// two leases handed to the threads, and faults, over one layer or a nested stack; a fifth of
/// them with deadlines that fire at any point. Chosen by hashes of the draw (so that stored
/// programs and the draws of the rest stay as they were): a `clear` or `register`, an in-place
/// replace, a pin or lease with a zero timeout, a peek, a step under a lock held past it, a load whose
/// caller's wait expires inside it, a panicking metrics recorder, the `Overflow` policy.
pub fn program() -> impl Strategy<Value = Program> {
    let threads = prop::collection::vec(prop::collection::vec(thread_op(), 2..=5), 2..=3);
    let pins = prop_oneof![2 => Just(Vec::new()), 1 => prop::collection::vec(index(), 1..=2)];
    (prefix(), handed(), pins, threads, faults(), shape()).prop_map(
        |(prefix, handed, pins, mut threads, mut faults, (nested, narrow))| {
            let drawn = (&prefix, &handed, &pins, &threads, &faults, nested, narrow);
            let any_time = super::generated::any_time_for(&drawn);
            let extra = super::generated::hash_of(&(drawn, "clear or register"));
            let in_place = super::generated::hash_of(&(drawn, "replace in place"));
            let report_fault = report_fault_for(super::generated::hash_of(&(drawn, "report fault")));
            let now = super::generated::hash_of(&(drawn, "call now"));
            let expiry = super::generated::hash_of(&(drawn, "expiry"));
            let locked = super::generated::hash_of(&(drawn, "locked"));
            let peek = super::generated::hash_of(&(drawn, "peek"));
            let overflow = super::generated::hash_of(&(drawn, "overflow")).is_multiple_of(5);
            insert_clear_or_register(&mut threads, extra);
            insert_replace_in_place(&mut threads, in_place);
            insert_call_now(&mut threads, now);
            insert_peek(&mut threads, peek);
            let mut prefix = prefix;
            reach_report(report_fault, &mut prefix, &mut threads);
            insert_locked(&mut threads, &mut faults, &prefix, locked);
            insert_expiry(&mut faults, expiry);
            Program {
                prefix,
                handed,
                pins,
                threads,
                faults,
                nested,
                narrow,
                any_time,
                report_fault,
                overflow,
            }
        },
    )
}

/// In a third of the programs, one `clear` or `register` at a place in a thread chosen by
/// `hash` (a hash of the draw, like [`any_time_for`](super::generated::any_time_for): drawing
/// it would draw every later program anew, and which campaign finds what depends on every
/// draw).
fn insert_clear_or_register(threads: &mut [Vec<ThreadOp>], hash: u64) {
    if !hash.is_multiple_of(3) || threads.is_empty() {
        return;
    }
    let pick = |shift: u32, n: usize| usize::try_from((hash >> shift) % n as u64).unwrap_or(0);
    // Disjoint bits of the hash for each choice (8 bits each: far wider than any choice).
    let op = match pick(32, 3) {
        0 => ThreadOp::Clear,
        _ => ThreadOp::Register(pick(40, IDS.len())),
    };
    let thread = &mut threads[pick(16, threads.len())];
    thread.insert(pick(24, thread.len() + 1), op);
}

/// In a quarter of the programs, one `replace_in_place` of a model at a place in a thread
/// chosen by `hash` (as for [`insert_clear_or_register`]).
fn insert_replace_in_place(threads: &mut [Vec<ThreadOp>], hash: u64) {
    if !hash.is_multiple_of(4) || threads.is_empty() {
        return;
    }
    let pick = |shift: u32, n: usize| usize::try_from((hash >> shift) % n as u64).unwrap_or(0);
    let thread = &mut threads[pick(16, threads.len())];
    thread.insert(pick(24, thread.len() + 1), ThreadOp::ReplaceInPlace(pick(40, IDS.len())));
}

/// In a third of the programs, one `pin_with` or `lease_with` with a zero timeout at a place in
/// a thread chosen by `hash` (as for [`insert_clear_or_register`]).
fn insert_call_now(threads: &mut [Vec<ThreadOp>], hash: u64) {
    if !hash.is_multiple_of(3) || threads.is_empty() {
        return;
    }
    let pick = |shift: u32, n: usize| usize::try_from((hash >> shift) % n as u64).unwrap_or(0);
    let i = pick(40, RESOLVED.len());
    let op = if pick(32, 2) == 0 { ThreadOp::PinNow(i) } else { ThreadOp::LeaseNow(i) };
    let thread = &mut threads[pick(16, threads.len())];
    thread.insert(pick(24, thread.len() + 1), op);
}

/// In a quarter of the programs, one look at a model that is no use of it
/// ([`ThreadOp::Peek`]) at a place in a thread chosen by `hash` (as for
/// [`insert_clear_or_register`]).
fn insert_peek(threads: &mut [Vec<ThreadOp>], hash: u64) {
    if !hash.is_multiple_of(4) || threads.is_empty() {
        return;
    }
    let pick = |shift: u32, n: usize| usize::try_from((hash >> shift) % n as u64).unwrap_or(0);
    let thread = &mut threads[pick(16, threads.len())];
    thread.insert(pick(24, thread.len() + 1), ThreadOp::Peek(pick(40, RESOLVED.len())));
}

/// In a quarter of the programs, one call that holds a lifecycle lock across a step and past
/// it ([`ThreadOp::Locked`]) at a place in a thread chosen by `hash` (as for
/// [`insert_clear_or_register`]): an add, a removal or an eviction a third of the time each.
/// Half the adds of a model the prefix does not add have its first load fail (the prefix
/// would take the failure): a claim given back under the held lock is the slot an add waiting
/// beside it must be woken for (S-O1h), which drawn faults alone rarely line up with the lock.
fn insert_locked(threads: &mut [Vec<ThreadOp>], faults: &mut Faults, prefix: &[usize], hash: u64) {
    if !hash.is_multiple_of(4) || threads.is_empty() {
        return;
    }
    let pick = |shift: u32, n: usize| usize::try_from((hash >> shift) % n as u64).unwrap_or(0);
    let op = match pick(32, 3) {
        0 => {
            let i = pick(40, IDS.len());
            if pick(48, 2) == 0 && !prefix.contains(&i) {
                faults.loads[i].insert(0, Step::Fail);
            }
            ThreadOp::Locked(i, Under::Add)
        }
        1 => ThreadOp::Locked(pick(40, RESOLVED.len()), Under::Remove),
        _ => ThreadOp::Locked(pick(40, RESOLVED.len()), Under::Evict),
    };
    let thread = &mut threads[pick(16, threads.len())];
    thread.insert(pick(24, thread.len() + 1), op);
}

/// In a quarter of the programs, one load of one model returns the expiry of a wait inside it
/// ([`Step::Expire`]: its caller's deadline passed), at a place in its script chosen by `hash`
/// (as for [`insert_clear_or_register`]): the caller's own error, never shared (S-F2).
fn insert_expiry(faults: &mut Faults, hash: u64) {
    if !hash.is_multiple_of(4) {
        return;
    }
    let pick = |shift: u32, n: usize| usize::try_from((hash >> shift) % n as u64).unwrap_or(0);
    let script = &mut faults.loads[pick(16, IDS.len())];
    script.insert(pick(24, script.len() + 1), Step::Expire);
}

/// Makes the report a program's recorder panics at more likely to come: a lease's wait for an
/// eviction's outcome needs a lease racing an eviction of its model, which the drawn
/// operations rarely make (none of the 5 programs of the default campaign armed with it fired
/// it, 3 of 46 in a campaign of 1,200). The prefix adds `A` and `B` (the capacity, unless the
/// stack is narrow), then, after the drawn operations, one thread adds `C` (which evicts the
/// least recently used, `A`, if nothing drawn pinned, leased or removed it) while another
/// leases `A`. The other reports come with most programs.
fn reach_report(report_fault: Option<usize>, prefix: &mut Vec<usize>, threads: &mut [Vec<ThreadOp>]) {
    if report_fault.map(|k| REPORT_FAULTS[k]) != Some("resident_lease_wait_seconds") || threads.len() < 2 {
        return;
    }
    *prefix = vec![0, 1];
    threads[0].push(ThreadOp::Add(2));
    threads[1].push(ThreadOp::Lease(0));
}

/// In a sixth of the programs, a recorder that panics at one of [`REPORT_FAULTS`], chosen by
/// `hash` (as for [`insert_clear_or_register`]).
fn report_fault_for(hash: u64) -> Option<usize> {
    let pick = usize::try_from((hash >> 40) % REPORT_FAULTS.len() as u64).unwrap_or(0);
    hash.is_multiple_of(6).then_some(pick)
}
