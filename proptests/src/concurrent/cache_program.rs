//! Generated concurrent programs over the shared-weight cache: two device caches of one
//! [`CacheGroup`](resident::cache::CacheGroup) (device budgets on), a prefix of loads by the
//! main thread handed to the threads, 2–3 threads of 2–5 operations — `get_or_put`, `get`,
//! `put`, lock, lock on the device, release, `drop_model`, `make_room`, time passing with
//! keep-alive expiry, a cache's and the group's `shutdown`, lowering and raising the RAM cap
//! (below a key's size too) and a device budget, switching the budget's overflow policy, calls
//! with a zero timeout — plus faults (a panicking tracing subscriber or metrics recorder among
//! them): failing and panicking loads, failing moves to the device,
//! panics of the weights' and device copies' `Drop`. Operations name keys and caches by index,
//! and handles by their position among the thread's own, so every shrunk program is still
//! meaningful.

use proptest::prelude::*;

/// Keys: a model, one of its submodels (`drop_model` of the model takes both), and another.
pub const KEYS: [&str; 3] = ["a", "a:sub", "b"];

/// Bytes of each key's weights (RAM and device alike).
pub const BYTES: [u64; 3] = [40, 20, 30];

/// The group's RAM budget: room for two of the three keys.
pub const CAP: u64 = 80;

/// Each device's budget: room for one or two copies, not three.
pub const DEVICE_BYTES: u64 = 60;

/// The lowered RAM cap of [`CacheOp::SetCap`]: room for `a` (or `b`), not both.
pub const LOWERED_CAP: u64 = 50;

/// The lowered device budget of [`CacheOp::SetDeviceBudget`]: room for one copy of `b` or
/// `a:sub`, not `a`'s.
pub const LOWERED_DEVICE_BYTES: u64 = 30;

/// The lowest RAM cap of [`CacheOp::SetCap`]: below `a` (which is then `TooLarge`), room for
/// `b` or `a:sub`.
pub const LOWEST_CAP: u64 = 30;

/// Caches of the group.
pub const CACHES: usize = 2;

/// The caches' keep-alive, when a program turns it on ([`CacheProgram::keep_alive`]).
pub const KEEP_ALIVE: std::time::Duration = std::time::Duration::from_secs(10);

/// One operation of a thread.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub enum CacheOp {
    /// `get_or_put(KEYS[key])` on cache `cache`; the loaded model is kept as a handle.
    GetOrPut {
        /// Index of the cache.
        cache: usize,
        /// Index into [`KEYS`].
        key: usize,
    },
    /// `get(KEYS[key])` on cache `cache`; a hit is kept as a handle.
    Get {
        /// Index of the cache.
        cache: usize,
        /// Index into [`KEYS`].
        key: usize,
    },
    /// `get_locked(KEYS[key])` on cache `cache` (the lookup and the lock in one step); a hit is
    /// kept as a lock.
    GetLocked {
        /// Index of the cache.
        cache: usize,
        /// Index into [`KEYS`].
        key: usize,
    },
    /// `put` of fresh weights, shared through the store or a private copy; kept as a handle.
    Put {
        /// Index of the cache.
        cache: usize,
        /// Index into [`KEYS`].
        key: usize,
        /// `PutOptions::shared`.
        shared: bool,
    },
    /// Locks the thread's handle number `k` (modulo how many it holds), if it is a loaded model.
    Lock(usize),
    /// Locks and places the thread's handle number `k` on its cache's device.
    LockOnDevice(usize),
    /// Drops the thread's handle number `k`.
    Release(usize),
    /// Drops the thread's handle number `k` while the thread unwinds a panic of user code (the
    /// release runs no user code then: a peer's room request it finds is left for later).
    ReleaseUnwinding(usize),
    /// `drop_model(KEYS[key])` through cache `cache` (it drops the key from the whole group).
    DropModel {
        /// Index of the cache.
        cache: usize,
        /// Index into [`KEYS`].
        key: usize,
    },
    /// `make_room(bytes)` on cache `cache`.
    MakeRoom {
        /// Index of the cache.
        cache: usize,
        /// Bytes asked for.
        bytes: u64,
    },
    /// [`KEEP_ALIVE`] passes on the runtime's clock, then `expire_idle()` on cache `cache`.
    Idle(usize),
    /// `shutdown()` of cache `cache`.
    Shutdown(usize),
    /// `shutdown()` of the whole group.
    GroupShutdown,
    /// `set_cap(bytes, …)` of the group's RAM budget (SPEC 1.12): [`LOWERED_CAP`] or back to
    /// [`CAP`].
    SetCap(u64),
    /// `set_device_budget(Some(bytes), …)` of cache `cache` (SPEC 1.12): [`LOWERED_DEVICE_BYTES`]
    /// or back to [`DEVICE_BYTES`].
    SetDeviceBudget {
        /// Index of the cache.
        cache: usize,
        /// The new device budget.
        bytes: u64,
    },
    /// `set_overflow(on)` of the group's RAM budget: the loads waiting for room re-read the
    /// policy (SPEC 3.11).
    SetOverflow(bool),
    /// `get_or_put_with(KEYS[key], …)` with a zero timeout on cache `cache`: none of its waits
    /// may block (SPEC 1.10); kept like [`CacheOp::GetOrPut`].
    GetOrPutNow {
        /// Index of the cache.
        cache: usize,
        /// Index into [`KEYS`].
        key: usize,
    },
    /// `put_with` of fresh weights with a zero timeout: its wait for room may not block.
    PutNow {
        /// Index of the cache.
        cache: usize,
        /// Index into [`KEYS`].
        key: usize,
        /// `PutOptions::shared`.
        shared: bool,
    },
    /// `lock_on_device_with` of the thread's handle number `k` with a zero timeout: its waits
    /// for another move and for device room may not block.
    LockOnDeviceNow(usize),
}

/// Faults of user code, per key (while the scenario's script is armed).
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default, serde::Serialize, serde::Deserialize)]
pub struct CacheFaults {
    /// The weights' `Drop` of `KEYS[i]` panics.
    pub weights_drop: [bool; 3],
    /// The device copy's `Drop` of `KEYS[i]` panics.
    pub copy_drop: [bool; 3],
    /// `to_device` of `KEYS[i]`'s weights fails.
    #[serde(default)]
    pub move_fails: [bool; 3],
    /// The first `get_or_put` load of `KEYS[i]` fails, and the second panics.
    #[serde(default)]
    pub load_fails: [bool; 3],
}

/// A load the main thread makes before any thread starts, handing the handle to a thread.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub struct Prefix {
    /// Index of the cache.
    pub cache: usize,
    /// Index into [`KEYS`].
    pub key: usize,
    /// The main thread locks the loaded model before handing the lock over.
    pub lock: bool,
    /// The thread (modulo how many there are) that gets the handle as one of its own.
    pub to: usize,
}

/// A generated cache program.
#[derive(Debug, Clone, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub struct CacheProgram {
    /// `get_or_put` loads by the main thread before the threads start, so that programs often
    /// begin with keys resident on both devices, held or locked by threads that then race
    /// `drop_model`, shutdowns, evictions and admissions of the same keys.
    #[serde(default)]
    pub prefix: Vec<Prefix>,
    /// The threads' operations.
    pub threads: Vec<Vec<CacheOp>>,
    /// Scripted panics.
    pub faults: CacheFaults,
    /// Both caches evict what stays idle for [`KEEP_ALIVE`].
    #[serde(default)]
    pub keep_alive: bool,
    /// Deadlines may fire at any scheduling point ([`Time::Any`](resident_sim::runtime::Time::Any)): load and move waits time out
    /// under contention.
    #[serde(default)]
    pub any_time: bool,
    /// The group's RAM budget is hard (loads reserve their bytes first, wait for room and may be
    /// refused with `NoRoom`); otherwise its overflow policy is on (admissions overshoot, and
    /// releases reconcile).
    #[serde(default)]
    pub hard_budget: bool,
    /// The execution's tracing subscriber or metrics recorder panics at every report named
    /// [`REPORT_FAULTS`]`[k]` while the threads run (the library's own reports are user code,
    /// SPEC 3.10).
    #[serde(default)]
    pub report_fault: Option<usize>,
}

/// The reports a cache program's subscriber or recorder may panic at
/// ([`CacheProgram::report_fault`]): a lookup, the conversion and release of a claim, an
/// admission, an eviction, a refusal, a cache's shutdown, a private copy's charge (whose
/// caller's weights are held until charged: a panic there drops them in the unwind).
pub static REPORT_FAULTS: [&str; 8] = [
    "get",
    "claim converted",
    "claim released",
    "admitted",
    "resident_evictions_total",
    "resident_refusals_total",
    "shutdown",
    "charged non-shared",
];

/// Makes the report a program's subscriber or recorder panics at one its operations reach: a
/// cache's shutdown, a refusal and a private copy's charge come with few drawn programs (none
/// of 5 and 4 armed with the first two fired them). For a shutdown, the first thread ends by
/// shutting cache 0 down; for a refusal, by shutting the group down and asking cache 0 for a
/// key (refused: a shut-down cache alone admits, stale at birth, SPEC 3.4; a shut-down group
/// refuses); for a private charge, by putting a private copy of key 0 into cache 0, whose
/// weights' `Drop` panics. The other reports come with most programs.
fn reach_report(report_fault: Option<usize>, threads: &mut [Vec<CacheOp>], faults: &mut CacheFaults) {
    let Some(thread) = threads.first_mut() else { return };
    match report_fault.map(|k| REPORT_FAULTS[k]) {
        Some("shutdown") => thread.push(CacheOp::Shutdown(0)),
        Some("resident_refusals_total") => {
            thread.extend([CacheOp::GroupShutdown, CacheOp::GetOrPut { cache: 0, key: 0 }]);
        }
        Some("charged non-shared") => {
            thread.push(CacheOp::Put { cache: 0, key: 0, shared: false });
            // The seam that report guards: the caller's weights, whose `Drop` panics, held
            // across it.
            faults.weights_drop[0] = true;
        }
        _ => {}
    }
}

impl CacheProgram {
    /// The bound bytes in use plus reserved stay within whatever the cap is now: [`CAP`] if some
    /// thread changes the cap (a lowering takes a while to be reached), else 0 (the cap itself).
    pub fn cap_bound(&self) -> u64 {
        let resizes = self.threads.iter().flatten().any(|op| matches!(op, CacheOp::SetCap(_)));
        if resizes { CAP } else { 0 }
    }

    /// Whether some thread switches the budget's policy ([`CacheOp::SetOverflow`]): the hard
    /// budget's bounds then hold only part of the time, and either policy's refusals may come.
    pub fn switches_policy(&self) -> bool {
        self.threads.iter().flatten().any(|op| matches!(op, CacheOp::SetOverflow(_)))
    }

    /// Whether the hard budget's bounds hold throughout: a hard budget never switched.
    pub fn always_hard(&self) -> bool {
        self.hard_budget && !self.switches_policy()
    }

    /// Per key: whether some thread sets a cap below its bytes (its loads and puts may then be
    /// `TooLarge`).
    pub fn too_large(&self) -> [bool; 3] {
        let lowest = self.threads.iter().flatten().filter_map(|op| match op {
            CacheOp::SetCap(bytes) => Some(*bytes),
            _ => None,
        });
        let lowest = lowest.min().unwrap_or(u64::MAX);
        BYTES.map(|bytes| lowest < bytes)
    }
}

fn cache() -> impl Strategy<Value = usize> {
    0..CACHES
}

fn key() -> impl Strategy<Value = usize> {
    0..KEYS.len()
}

fn handle() -> impl Strategy<Value = usize> {
    0..3usize
}

fn cache_op() -> impl Strategy<Value = CacheOp> {
    prop_oneof![
        5 => (cache(), key()).prop_map(|(cache, key)| CacheOp::GetOrPut { cache, key }),
        2 => (cache(), key()).prop_map(|(cache, key)| CacheOp::Get { cache, key }),
        2 => (cache(), key(), any::<bool>()).prop_map(|(cache, key, shared)| CacheOp::Put { cache, key, shared }),
        3 => handle().prop_map(CacheOp::Lock),
        3 => handle().prop_map(CacheOp::LockOnDevice),
        3 => handle().prop_map(CacheOp::Release),
        1 => handle().prop_map(CacheOp::ReleaseUnwinding),
        2 => (cache(), key()).prop_map(|(cache, key)| CacheOp::DropModel { cache, key }),
        2 => (cache(), prop_oneof![Just(20u64), Just(CAP)]).prop_map(|(cache, bytes)| CacheOp::MakeRoom { cache, bytes }),
        2 => cache().prop_map(CacheOp::Idle),
        1 => cache().prop_map(CacheOp::Shutdown),
        1 => Just(CacheOp::GroupShutdown),
    ]
}

fn rare() -> impl Strategy<Value = bool> {
    prop::bool::weighted(0.1)
}

fn rare_per_key() -> impl Strategy<Value = [bool; 3]> {
    [rare(), rare(), rare()]
}

/// A third of the time, up to three loads by the main thread, handed to the threads. Drawn
/// after the threads and faults: drawn first, the default campaign no longer met
/// `move-uncharged` (which campaign finds what depends on every draw).
fn prefix() -> impl Strategy<Value = Vec<Prefix>> {
    let load = (cache(), key(), any::<bool>(), 0..3usize).prop_map(|(cache, key, lock, to)| Prefix {
        cache,
        key,
        lock,
        to,
    });
    prop_oneof![2 => Just(Vec::new()), 1 => prop::collection::vec(load, 1..=3)]
}

/// Programs of a prefix of handed loads, then 2–3 threads × 2–5 operations (one more, a resize,
/// in a third of them), with scripted
/// faults, keep-alive on a third of the time (drawn last, like the prefix), deadlines that fire
/// at any point a fifth of the time, and the hard RAM budget half of the time.
pub fn cache_program() -> impl Strategy<Value = CacheProgram> {
    let threads = prop::collection::vec(prop::collection::vec(cache_op(), 2..=5), 2..=3);
    let faults = (rare_per_key(), rare_per_key(), rare_per_key(), rare_per_key()).prop_map(
        |(weights_drop, copy_drop, move_fails, load_fails)| CacheFaults {
            weights_drop,
            copy_drop,
            move_fails,
            load_fails,
        },
    );
    let keep_alive = prop::bool::weighted(1.0 / 3.0);
    (threads, faults, prefix(), keep_alive).prop_map(|(mut threads, mut faults, prefix, keep_alive)| {
        let drawn = (&threads, &faults, &prefix, keep_alive);
        let any_time = super::generated::any_time_for(&drawn);
        let hard_budget = super::generated::hard_budget_for(&drawn);
        let resize = super::generated::hash_of(&(drawn, "resize"));
        let now = super::generated::hash_of(&(drawn, "call now"));
        let policy = super::generated::hash_of(&(drawn, "policy"));
        let report = super::generated::hash_of(&(drawn, "report fault"));
        let locked = super::generated::hash_of(&(drawn, "get locked"));
        let report_fault = report
            .is_multiple_of(6)
            .then(|| usize::try_from((report >> 16) % REPORT_FAULTS.len() as u64).unwrap_or(0));
        insert_resize(&mut threads, resize);
        insert_call_now(&mut threads, now);
        insert_get_locked(&mut threads, locked);
        if now.is_multiple_of(4) {
            // A quarter of the programs place on the device with a zero timeout only.
            for op in threads.iter_mut().flatten() {
                if let CacheOp::LockOnDevice(k) = *op {
                    *op = CacheOp::LockOnDeviceNow(k);
                }
            }
        }
        insert_policy_switch(&mut threads, policy, hard_budget);
        reach_report(report_fault, &mut threads, &mut faults);
        CacheProgram { prefix, threads, faults, keep_alive, any_time, hard_budget, report_fault }
    })
}

/// In a third of the programs, one resize — the RAM cap or a device budget, lowered or raised
/// back — at a place in a thread chosen by `hash` (a hash of the draw, like
/// [`any_time_for`](super::generated::any_time_for): drawing it would draw every later program
/// anew, and which campaign finds what depends on every draw).
fn insert_resize(threads: &mut [Vec<CacheOp>], hash: u64) {
    if !hash.is_multiple_of(3) || threads.is_empty() {
        return;
    }
    let pick = |shift: u32, n: usize| usize::try_from((hash >> shift) % n as u64).unwrap_or(0);
    let lowered = pick(8, 2) == 0;
    let op = if pick(9, 2) == 0 {
        CacheOp::SetCap(if lowered { LOWERED_CAP } else { CAP })
    } else {
        let bytes = if lowered { LOWERED_DEVICE_BYTES } else { DEVICE_BYTES };
        CacheOp::SetDeviceBudget { cache: pick(10, CACHES), bytes }
    };
    let thread = &mut threads[pick(16, threads.len())];
    thread.insert(pick(24, thread.len() + 1), op);
}

/// Where in `threads` an operation chosen by `hash` goes: thread and place from disjoint bits.
fn insert_at(threads: &mut [Vec<CacheOp>], hash: u64, op: CacheOp) {
    let pick = |shift: u32, n: usize| usize::try_from((hash >> shift) % n as u64).unwrap_or(0);
    if let Some(n) = std::num::NonZeroUsize::new(threads.len()) {
        let thread = &mut threads[pick(16, n.get())];
        thread.insert(pick(24, thread.len() + 1), op);
    }
}

/// In a third of the programs, one call with a zero timeout — `get_or_put_with`, `put_with` or
/// `lock_on_device_with` — at a place chosen by `hash` (as for [`insert_resize`]).
fn insert_call_now(threads: &mut [Vec<CacheOp>], hash: u64) {
    if !hash.is_multiple_of(3) {
        return;
    }
    let pick = |shift: u32, n: usize| usize::try_from((hash >> shift) % n as u64).unwrap_or(0);
    let (cache, key) = (pick(40, CACHES), pick(44, KEYS.len()));
    let op = match pick(32, 3) {
        0 => CacheOp::GetOrPutNow { cache, key },
        1 => CacheOp::PutNow { cache, key, shared: pick(48, 2) == 0 },
        _ => CacheOp::LockOnDeviceNow(pick(48, 3)),
    };
    insert_at(threads, hash, op);
}

/// In a third of the programs, one `get_locked` (the lookup and the lock in one step) at a place
/// chosen by `hash` (as for [`insert_resize`]).
fn insert_get_locked(threads: &mut [Vec<CacheOp>], hash: u64) {
    if !hash.is_multiple_of(3) {
        return;
    }
    let pick = |shift: u32, n: usize| usize::try_from((hash >> shift) % n as u64).unwrap_or(0);
    insert_at(threads, hash, CacheOp::GetLocked { cache: pick(40, CACHES), key: pick(44, KEYS.len()) });
}

/// In a quarter of the programs, the RAM budget's policy switched (the overflow policy on in a
/// program under the hard budget, off in one under the overflow policy), or, in a twelfth, the
/// cap lowered to [`LOWEST_CAP`], below `a`: a load of `a` waiting for room is then refused at
/// once (S-Z2, S-Z3). At a place chosen by `hash` (as for [`insert_resize`]).
fn insert_policy_switch(threads: &mut [Vec<CacheOp>], hash: u64, hard_budget: bool) {
    let op = match hash % 12 {
        0..=2 => CacheOp::SetOverflow(hard_budget),
        3 => CacheOp::SetCap(LOWEST_CAP),
        _ => return,
    };
    insert_at(threads, hash >> 8, op);
}
