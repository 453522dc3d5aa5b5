//! Runs a generated [`CacheProgram`] on the sim: two device caches of one group, every thread's
//! operations with their handles, then the accounting checks.
//!
//! Checked in every execution:
//! - U1: user code (loads, weights' and copies' `Drop`, `to_device`) runs outside every
//!   internal monitor (the scripted weights check it themselves);
//! - A7: device copies alive plus moves in flight stay within each device's budget (checked
//!   from inside every move);
//! - A7 under the hard RAM budget (half the programs): inside every load, its bytes are
//!   reserved and bytes in use plus bytes reserved are within the cap (within the largest cap
//!   set, in programs that lower it: a lowering takes a while to be reached); the same inside
//!   every eviction callback; the budget's high-water mark never passed the cap;
//! - resizing: `set_cap` and `set_device_budget` end `Ok` or with their typed "still over"
//!   error;
//! - single flight: two `get_or_put` loads of one key never run at once in the group;
//! - A2: a `get_or_put` never loads a key whose shared weights, admitted before its call began
//!   (by a cache not shut down by then), are alive and were never dropped: it adopts them;
//! - freshness: a call that begins after `drop_model(k)` returned is never served weights of
//!   `k` admitted before the drop began ([`Freshness`]);
//! - keep-alive: expiry evicts only idle records (a held one stays, so a later lock keeps it:
//!   A5);
//! - A5: a locked record stays in its cache — resident, or detached by a newer admission of its
//!   key while still held — from its lock to its release;
//! - A1 at quiescence: the budget counts each distinct live canonical once plus every private
//!   record, and nothing else;
//! - A2 at quiescence: every resident shared record uses the canonical the store holds for its
//!   key (none adopted across a `drop_model`, no duplicate);
//! - C-D6 at quiescence: the store holds no weights as a key's current ones that were read (by
//!   a load in flight) or handed over before a drop of the key began;
//! - reconcile: with every handle gone, the budget is within the cap in force (an overshoot while
//!   everything was in use is reconciled at the releases, SPEC 3.2), in programs where no
//!   `Drop` of weights or copies panics;
//! - A6: with every handle gone, a cache the program shut down holds nothing, and shutting
//!   the others down leaves nothing resident or counted;
//! - 1.10: a call with a zero timeout (`get_or_put_with`, `put_with`, `lock_on_device_with`)
//!   blocks in none of its waits (counted by the sim runtime per thread);
//! - a `get_or_put` that begins after the group's shutdown returned is refused with
//!   `ShutDown`;
//! - linearizability: the history of `get_or_put`, `get`, `put`, `drop_model` and shutdowns
//!   (recorded with plain std primitives) is explained by some order of the calls under the
//!   [`CacheSpec`]: nothing is served that must be gone.

use resident::cache::{DeviceCache, DeviceGuard, LoadedModel, ModelGuard, PutOptions};
use resident::runtime::Arc;
use resident::{CacheError, CallOptions};
use resident_sim::ensure;
use resident_sim::runtime::{Counter, ShuttleRuntime, SimRuntime};
use resident_sim::violation::{InjectedPanic, catching};
use resident_sim::world::cache::{Behaviour, CacheWorld, Script, Weights};

use super::cache_program::{
    BYTES, CACHES, CAP, CacheOp, CacheProgram, DEVICE_BYTES, KEEP_ALIVE, KEYS, REPORT_FAULTS,
};
use super::cache_spec::{CacheCall, CacheRet, CacheSpec, CacheState, split_drops};
use super::freshness::Freshness;
use super::generated::Generated;
use super::history::{History, ensure_linearizable};

type Cache<R> = Arc<DeviceCache<Weights<R>, R>>;

/// A handle a thread holds (a loaded model with the tick its call was invoked at).
enum Held<R: SimRuntime> {
    Loaded(LoadedModel<Weights<R>, R>, u64),
    Locked(ModelGuard<Weights<R>, R>),
    Placed(DeviceGuard<Weights<R>, R>),
}

/// A5: the record `guard` locks is still in `cache` (resident, or detached while held).
fn ensure_kept<R: SimRuntime>(cache: &Cache<R>, guard: &ModelGuard<Weights<R>, R>, thread: &str) {
    let id = guard.canonical_id();
    // Reading the cache honours the reconcile requests peers left it, which may evict (and run
    // a scripted panicking `Drop`): then this look tells nothing.
    let Some(resident) = catching(|| cache.resident()) else { return };
    let kept = resident.iter().any(|r| r.key == guard.key() && r.canonical == id);
    ensure!(kept, "A5", "{thread} locked {} but its record was evicted", guard.key());
}

/// What every thread of one execution shares.
struct Shared<R: SimRuntime> {
    world: CacheWorld<R>,
    script: Arc<Script<R>>,
    /// Per key: `get_or_put` loads running now.
    loading: Vec<R::Counter>,
    /// Per key: `get_or_put` loads begun.
    loads: Vec<R::Counter>,
    /// Per cache: whether the program shut it down.
    shut: Vec<R::Counter>,
    /// Whether a shutdown of the group has returned.
    group_shut: R::Counter,
    /// Which weights were dropped when.
    freshness: Freshness,
    /// Shared weights admitted, for A2, and per cache whether a shutdown of it began: plain
    /// std bookkeeping, no scheduling point (`shut` says the same for the end checks, through
    /// the checker; its scheduling points are part of the stored schedules).
    canonicals: std::sync::Mutex<Vec<Admitted>>,
    shutting: [std::sync::atomic::AtomicBool; CACHES],
    /// The calls the specification decides on.
    history: History<CacheCall, CacheRet>,
}

/// Shared weights a call admitted.
#[derive(Debug, Clone, Copy)]
struct Admitted {
    key: usize,
    serial: u64,
    /// When the admitting call began and returned.
    invoked: u64,
    returned: u64,
}

/// One thread's view: the shared world, the program, its handles.
struct Thread<'a, R: SimRuntime> {
    name: &'static str,
    /// The thread's index in the history (the main thread's is past the program's threads).
    index: usize,
    shared: &'a Shared<R>,
    program: &'a CacheProgram,
    held: Vec<(usize, Held<R>)>,
}

impl<R: SimRuntime> Thread<'_, R> {
    /// Fresh weights of `key`, numbered.
    fn weights(&self, key: usize) -> Weights<R> {
        let behaviour = Behaviour {
            drop_panics: self.program.faults.weights_drop[key],
            copy_drop_panics: self.program.faults.copy_drop[key],
            gated_move: false,
            move_fails: self.program.faults.move_fails[key],
        };
        Weights::scripted(BYTES[key], behaviour, &self.shared.script).numbered(self.shared.freshness.now())
    }

    /// Freshness: the weights a lock of a handle obtained at `invoked` serves were not dropped
    /// before that call began.
    fn ensure_fresh(&self, guard: &ModelGuard<Weights<R>, R>, invoked: u64) {
        let dropped = self.shared.freshness.dropped_before(guard.key(), guard.serial, invoked);
        ensure!(
            !dropped,
            "C-D1",
            "{} was served weights of {} dropped before its call began",
            self.name,
            guard.key()
        );
    }

    /// Shared weights of `key` (numbered `serial`) were admitted by a call on `cache` invoked at
    /// `invoked` (`loaded`: read by its load); kept for A2 unless that cache was being shut down.
    fn admitted_shared(&self, cache: usize, key: usize, serial: u64, invoked: u64, loaded: bool) {
        let returned = self.shared.freshness.now();
        self.shared.freshness.admitted(serial, loaded);
        if !self.shared.shutting[cache].load(std::sync::atomic::Ordering::SeqCst) {
            let admitted = Admitted { key, serial, invoked, returned };
            self.shared.canonicals.lock().expect("canonicals lock").push(admitted);
        }
    }

    /// A2: a load of `key` for a call invoked at `invoked` finds no weights of `key` it should
    /// have adopted.
    fn ensure_nothing_to_adopt(&self, key: usize, invoked: u64) {
        let canonicals = self.shared.canonicals.lock().expect("canonicals lock").clone();
        let adoptable = canonicals.iter().find(|a| {
            a.key == key
                && a.returned < invoked
                && self.shared.freshness.never_dropped(KEYS[key], a.invoked)
                && self.shared.script.alive(a.serial)
        });
        ensure!(
            adoptable.is_none(),
            "A2",
            "{} loads {} again while weights #{} admitted before its call began are alive and were never dropped",
            self.name,
            KEYS[key],
            adoptable.map_or(0, |a| a.serial)
        );
    }

    /// A `get_or_put` load for a call invoked at `invoked`: fresh weights, checking that no
    /// other load of the key runs and that none was due (A2). With the key's load fault, the
    /// first load fails and the second panics.
    fn load(&self, key: usize, invoked: u64) -> Result<Weights<R>, String> {
        self.ensure_nothing_to_adopt(key, invoked);
        let loading = &self.shared.loading[key];
        let others = loading.add(1);
        ensure!(
            others == 0,
            "single-flight",
            "{} loads of {} ran at once in the group",
            others + 1,
            KEYS[key]
        );
        if self.program.always_hard() {
            // A7 at the moment the load allocates: its own bytes are reserved, and bytes in use
            // plus bytes reserved are within the cap.
            let budget = self.shared.world.group.budget();
            let reserved = budget.reserved();
            ensure!(
                reserved >= BYTES[key],
                "A7",
                "{} loads {} ({} bytes) with {reserved} bytes reserved",
                self.name,
                KEYS[key],
                BYTES[key]
            );
            within_cap(budget, self.program.cap_bound(), &format!("{} loading {}", self.name, KEYS[key]));
        }
        R::yield_now();
        loading.sub(1);
        let attempt = self.shared.loads[key].add(1);
        match (self.program.faults.load_fails[key], attempt) {
            (true, 0) => Err(format!("scripted load failure of {}", KEYS[key])),
            (true, 1) => std::panic::panic_any(InjectedPanic),
            _ => Ok(self.weights(key)),
        }
    }

    /// Runs `f` as call `op` of the history (catching a scripted panic: its outcome is unknown);
    /// `ret` says what it returned.
    ///
    /// Under [`Time::Auto`](resident_sim::runtime::Time::Auto) a deadline fires only while every
    /// thread is blocked: a call that then succeeds found what it waited for happened while it
    /// slept, and nobody woke it (the manager programs' check, SPEC's one wake-up rule).
    fn record<T>(&self, op: CacheOp, f: impl FnOnce() -> T, ret: impl FnOnce(&T) -> CacheRet) -> Option<T> {
        let at = self.shared.history.begin(self.index, CacheCall::Called(op));
        let rt = &self.shared.world.rt;
        let timeouts = rt.timeouts_here();
        let result = catching(f);
        let ret = result.as_ref().map(ret);
        let succeeded = matches!(
            ret,
            Some(CacheRet::Loaded | CacheRet::Served | CacheRet::Hit | CacheRet::Admitted | CacheRet::Done)
        );
        ensure!(
            self.program.any_time || !succeeded || rt.timeouts_here() == timeouts,
            "lost-wakeup",
            "{} {op:?} gave {ret:?} after one of its waits timed out while every thread was blocked: \
             what it waited for happened, and nothing woke it",
            self.name
        );
        self.shared.history.end(at, ret);
        result
    }

    fn cache(&self, c: usize) -> &Cache<R> {
        &self.shared.world.caches[c]
    }

    /// Takes the held handle number `k` (modulo how many), if any.
    fn take(&mut self, k: usize) -> Option<(usize, Held<R>)> {
        (!self.held.is_empty()).then(|| self.held.remove(k % self.held.len()))
    }

    fn keep(&mut self, c: usize, handle: Held<R>) {
        self.held.push((c, handle));
    }

    /// Releases a handle, checking A5 first if it is a lock.
    fn release(&self, c: usize, handle: Held<R>) {
        match &handle {
            Held::Loaded(..) => {}
            Held::Locked(guard) => ensure_kept(self.cache(c), guard, self.name),
            Held::Placed(guard) => ensure_kept(self.cache(c), guard.cpu(), self.name),
        }
        catching(|| drop(handle));
    }

    fn run(&mut self, op: CacheOp) {
        // Each operation starts in the trace a failing execution is shown with.
        if resident_sim::trace::capturing() {
            resident_sim::trace::record_here(format!("op {op:?}"));
        }
        match op {
            CacheOp::GetOrPut { cache, key } => self.get_or_put(cache, key, CallOptions::new()),
            CacheOp::GetOrPutNow { cache, key } => self.now(&op, |t| t.get_or_put(cache, key, zero())),
            CacheOp::Get { cache, key } => {
                let invoked = self.shared.freshness.now();
                let got = self.record(
                    op,
                    || self.cache(cache).get(KEYS[key]),
                    |got| if got.is_some() { CacheRet::Hit } else { CacheRet::Miss },
                );
                if let Some(Some(loaded)) = got {
                    self.keep(cache, Held::Loaded(loaded, invoked));
                }
            }
            CacheOp::GetLocked { cache, key } => {
                let invoked = self.shared.freshness.now();
                let got = self.record(
                    op,
                    || self.cache(cache).get_locked(KEYS[key]),
                    |got| if got.is_some() { CacheRet::Hit } else { CacheRet::Miss },
                );
                if let Some(Some(guard)) = got {
                    ensure_kept(self.cache(cache), &guard, self.name);
                    self.ensure_fresh(&guard, invoked);
                    self.keep(cache, Held::Locked(guard));
                }
            }
            CacheOp::Put { cache, key, shared } => self.put(cache, key, shared, CallOptions::new()),
            CacheOp::PutNow { cache, key, shared } => self.now(&op, |t| t.put(cache, key, shared, zero())),
            CacheOp::Lock(k) => match self.take(k) {
                Some((c, Held::Loaded(loaded, invoked))) => {
                    if let Some(guard) = catching(|| loaded.lock()) {
                        ensure_kept(self.cache(c), &guard, self.name);
                        self.ensure_fresh(&guard, invoked);
                        self.keep(c, Held::Locked(guard));
                    }
                }
                Some((c, other)) => self.keep(c, other),
                None => {}
            },
            CacheOp::LockOnDevice(k) => self.lock_on_device(k, CallOptions::new()),
            CacheOp::LockOnDeviceNow(k) => self.now(&op, |t| t.lock_on_device(k, zero())),
            CacheOp::Release(k) => {
                if let Some((c, handle)) = self.take(k) {
                    self.release(c, handle);
                }
            }
            CacheOp::ReleaseUnwinding(k) => {
                if let Some((_, handle)) = self.take(k) {
                    catching(|| {
                        let _released_while_unwinding = handle;
                        std::panic::panic_any(InjectedPanic)
                    });
                }
            }
            CacheOp::DropModel { cache, key } => {
                let began = self.shared.freshness.dropping(KEYS[key]);
                let dropped = self.record(op, || self.cache(cache).drop_model(KEYS[key]), |_| CacheRet::Done);
                if dropped.is_some() {
                    self.shared.freshness.dropped(KEYS[key], began);
                }
            }
            CacheOp::MakeRoom { cache, bytes } => {
                catching(|| self.cache(cache).make_room(bytes));
            }
            // Resizing evicts (or offloads) at the cache's own choice, like `make_room`: the
            // specification allows every miss. Its result is checked here.
            CacheOp::SetCap(bytes) => {
                let group = &self.shared.world.group;
                if let Some(set) = catching(|| group.set_cap(bytes, CallOptions::new())) {
                    ensure!(
                        matches!(set, Ok(()) | Err(CacheError::OverCap { .. })),
                        "contract",
                        "{} set_cap({bytes}) gave {set:?}",
                        self.name
                    );
                }
            }
            CacheOp::SetDeviceBudget { cache, bytes } => {
                let c = self.cache(cache);
                if let Some(set) = catching(|| c.set_device_budget(Some(bytes), CallOptions::new())) {
                    ensure!(
                        matches!(set, Ok(()) | Err(CacheError::DeviceOverBudget { .. })),
                        "contract",
                        "{} set_device_budget({bytes}) on {} gave {set:?}",
                        self.name,
                        c.device()
                    );
                }
            }
            CacheOp::SetOverflow(on) => {
                let budget = self.shared.world.group.budget();
                catching(|| budget.set_overflow(on));
            }
            CacheOp::Idle(cache) => {
                self.shared.world.rt.advance_clock(KEEP_ALIVE);
                catching(|| self.cache(cache).expire_idle());
            }
            CacheOp::Shutdown(cache) => {
                self.shared.shutting[cache].store(true, std::sync::atomic::Ordering::SeqCst);
                self.shared.shut[cache].add(1);
                self.record(op, || self.cache(cache).shutdown(), |_| CacheRet::Done);
            }
            CacheOp::GroupShutdown => {
                for shutting in &self.shared.shutting {
                    shutting.store(true, std::sync::atomic::Ordering::SeqCst);
                }
                for shut in &self.shared.shut {
                    shut.add(1);
                }
                let returned = self.record(op, || self.shared.world.group.shutdown(), |_| CacheRet::Done);
                // One that a panicking report cut short may not have refused loads yet.
                if returned.is_some() {
                    self.shared.group_shut.add(1);
                }
            }
        }
    }

    /// Runs `call`, a call of `op` with a zero deadline: none of its waits may block (SPEC
    /// 1.10), whatever it returns.
    fn now(&mut self, op: &CacheOp, call: impl FnOnce(&mut Self)) {
        let rt = &self.shared.world.rt;
        let before = rt.blocked_here();
        call(self);
        let blocked = rt.blocked_here() - before;
        ensure!(
            blocked == 0,
            "1.10",
            "{} {op:?} with a zero deadline blocked in {blocked} wait(s)",
            self.name
        );
    }

    /// `get_or_put_with(KEYS[key], …, options)` on cache `cache`; the model kept as a handle.
    fn get_or_put(&mut self, cache: usize, key: usize, options: CallOptions) {
        let invoked = self.shared.freshness.now();
        let after_shutdown = self.shared.group_shut.get() > 0;
        let built = std::cell::Cell::new(None);
        let weights = || {
            let weights = self.load(key, invoked)?;
            built.set(Some(weights.serial));
            Ok::<_, String>(weights)
        };
        let loaded = self.record(
            CacheOp::GetOrPut { cache, key },
            || self.cache(cache).get_or_put_with(KEYS[key], BYTES[key], weights, options),
            |loaded| match loaded {
                Ok(_) if built.get().is_some() => CacheRet::Loaded,
                Ok(_) => CacheRet::Served,
                Err(e) => error(e),
            },
        );
        // (Or it panicked in the report of that refusal, when reports may panic.)
        let reported = loaded.is_none() && self.program.report_fault.is_some();
        if after_shutdown && !reported {
            ensure!(
                matches!(loaded, Some(Err(CacheError::ShutDown { .. }))),
                "X-4",
                "{}: get_or_put({}) after the group's shutdown gave {:?}",
                self.name,
                KEYS[key],
                loaded.as_ref().map(|r| r.as_ref().map(|_| ()))
            );
        }
        if let Some(Ok(loaded)) = loaded {
            if let Some(serial) = built.get() {
                self.admitted_shared(cache, key, serial, invoked, true);
            }
            self.keep(cache, Held::Loaded(loaded, invoked));
        }
    }

    /// `put_with` of fresh weights of `KEYS[key]` on cache `cache`; the admission kept as a
    /// handle.
    fn put(&mut self, cache: usize, key: usize, shared: bool, options: CallOptions) {
        let how = PutOptions { shared, ..PutOptions::default() };
        let weights = self.weights(key);
        let serial = weights.serial;
        let invoked = self.shared.freshness.now();
        let admitted = self.record(
            CacheOp::Put { cache, key, shared },
            || self.cache(cache).put_with(KEYS[key], weights, BYTES[key], how, options),
            |admitted| admitted.as_ref().map_or_else(error, |_| CacheRet::Admitted),
        );
        if let Some(Ok(admission)) = admitted {
            if shared {
                self.admitted_shared(cache, key, serial, invoked, false);
            } else {
                self.shared.freshness.admitted(serial, false);
            }
            // The conversion reports (user code, which may panic: the admission is released).
            if let Some(loaded) = catching(|| admission.into_loaded()) {
                self.keep(cache, Held::Loaded(loaded, invoked));
            }
        }
    }

    /// Locks and places the thread's handle number `k` on its cache's device
    /// (`lock_on_device_with(options)`), if it is a loaded model.
    fn lock_on_device(&mut self, k: usize, options: CallOptions) {
        match self.take(k) {
            Some((c, Held::Loaded(loaded, invoked))) => {
                if let Some(Ok(guard)) = catching(|| loaded.lock_on_device_with(options)) {
                    ensure_kept(self.cache(c), guard.cpu(), self.name);
                    self.ensure_fresh(guard.cpu(), invoked);
                    self.keep(c, Held::Placed(guard));
                }
            }
            Some((c, other)) => self.keep(c, other),
            None => {}
        }
    }

    fn finish(mut self) {
        while let Some((c, handle)) = self.take(0) {
            self.release(c, handle);
        }
    }
}

/// One execution of `program` on `rt`.
fn run_once<R: SimRuntime>(rt: R, program: &CacheProgram) {
    let world = if program.hard_budget {
        CacheWorld::hard(rt, CAP, CACHES)
    } else {
        CacheWorld::new(rt, CAP, CACHES)
    };
    let script = world.with_device(DEVICE_BYTES);
    if program.always_hard() {
        // A7 inside user code too: every eviction's callback runs at an entry to the budget.
        for cache in &world.caches {
            let budget = Arc::clone(world.group.budget());
            let bound = program.cap_bound();
            cache.on_evict(move |key, _| within_cap(&budget, bound, &format!("evicting {key}")));
        }
    }
    if program.keep_alive {
        for cache in &world.caches {
            ensure!(cache.set_keep_alive(Some(KEEP_ALIVE)), "contract", "keep-alive refused before shutdown");
        }
    }
    let loading = KEYS.iter().map(|_| world.rt.counter()).collect();
    let loads = KEYS.iter().map(|_| world.rt.counter()).collect();
    let shut = world.caches.iter().map(|_| world.rt.counter()).collect();
    let group_shut = world.rt.counter();
    let shared = Arc::new(Shared {
        world,
        script,
        loading,
        loads,
        shut,
        group_shut,
        freshness: Freshness::default(),
        canonicals: std::sync::Mutex::default(),
        shutting: Default::default(),
        history: History::default(),
    });
    let mut handed: Vec<Vec<(usize, Held<R>)>> = program.threads.iter().map(|_| Vec::new()).collect();
    {
        let index = program.threads.len();
        let mut main = Thread { name: "main", index, shared: &shared, program, held: Vec::new() };
        for p in &program.prefix {
            main.run(CacheOp::GetOrPut { cache: p.cache, key: p.key });
            if p.lock && !main.held.is_empty() {
                main.run(CacheOp::Lock(main.held.len() - 1));
            }
            if let Some(handle) = main.held.pop() {
                let to = p.to % handed.len();
                handed[to].push(handle);
            }
        }
    }
    if let Some(k) = program.report_fault {
        resident_sim::instrumentation::panic_at(&REPORT_FAULTS[k..=k]);
    }
    let handles: Vec<_> = (0..program.threads.len())
        .zip(handed)
        .map(|(t, held)| {
            let (shared, program) = (Arc::clone(&shared), program.clone());
            let name = ["T1", "T2", "T3"][t.min(2)];
            shared.world.rt.clone().spawn(name, move || {
                let mut thread = Thread { name, index: t, shared: &shared, program: &program, held };
                for &op in &program.threads[t] {
                    thread.run(op);
                }
                thread.finish();
            })
        })
        .collect();
    for handle in handles {
        R::join(handle).unwrap_or_else(|payload| resident_sim::unwinding::resume(payload));
    }
    resident_sim::instrumentation::disarm();
    shared.script.disarm();
    let spec = CacheSpec {
        load_fails: program.faults.load_fails,
        hard_budget: program.hard_budget || program.switches_policy(),
        too_large: program.too_large(),
    };
    ensure_linearizable(&spec, CacheState::default(), &split_drops(&shared.history.calls()));
    let world = &shared.world;
    if program.always_hard() {
        let high = world.group.budget().high_water();
        ensure!(high <= CAP, "A7", "the hard budget's high-water mark {high} is over its cap {CAP}");
    }
    // A panicking `Drop` of a release's evicted weights or copy cuts that release's reconcile
    // short (left to the next release): only programs without such faults must end reconciled.
    let faults = &program.faults;
    // So does a panicking report of the library's own (user code, SPEC 3.10).
    // And a release while its thread unwinds (it leaves peers' room requests for later).
    let unwinding = program.threads.iter().flatten().any(|op| matches!(op, CacheOp::ReleaseUnwinding(_)));
    let drops_panic = faults.weights_drop.iter().chain(&faults.copy_drop).any(|&p| p)
        || program.report_fault.is_some()
        || unwinding;
    // The cap in force at the end: a lowering that gave up (`OverCap`) leaves the records in
    // use to their releases, which reconcile. The keep-alive timer may be mid-eviction (records
    // out of their slots, their bytes not yet given back): it is stopped and joined first.
    world.stop_expiry();
    let (in_use, cap) = (world.group.budget().in_use(), world.group.budget().cap());
    ensure!(
        drops_panic || in_use <= cap,
        "reconcile",
        "{in_use} bytes in use with every handle dropped, over the budget of {cap}: an overshoot was never reconciled"
    );
    world.check_accounting();
    world.check_store_current();
    for key in KEYS {
        let current = world.group.store().adopt(key).map(|canonical| canonical.serial);
        let dropped = current.is_some_and(|serial| shared.freshness.read_before_a_drop(key, serial));
        ensure!(
            !dropped,
            "C-D6",
            "the store holds weights of {key} read before a drop of it began as its current ones: later loads adopt dropped weights"
        );
    }
    for (cache, shut) in world.caches.iter().zip(&shared.shut) {
        let keys = cache.keys();
        // A shutdown whose own report panicked may have ended early; `check_drained` below
        // still shuts every cache down with the reports disarmed.
        let kept = shut.get() > 0 && !keys.is_empty() && program.report_fault.is_none();
        ensure!(!kept, "A6", "{} keeps {keys:?} after its shutdown with no handle left", cache.device());
    }
    world.check_drained();
}

/// A zero timeout: the call's one look at each condition decides.
fn zero() -> CallOptions {
    CallOptions::new().with_timeout(std::time::Duration::ZERO)
}

/// A7 at `at`: bytes in use plus bytes reserved are within the cap, or within `bound` (while a
/// lowered cap is being reached, the bytes may be over it, never over the largest cap set).
fn within_cap<R: SimRuntime>(budget: &resident::cache::RamBudget<R>, bound: u64, at: &str) {
    // One read of the sum: two reads (in use, then reserved) could straddle a debit and a
    // reservation made after it.
    let (committed, cap) = (budget.committed(), budget.cap().max(bound));
    ensure!(committed <= cap, "A7", "{committed} bytes in use or reserved, over the cap {cap} ({at})");
}

/// An error as the specification sees it.
fn error(e: &CacheError) -> CacheRet {
    match e {
        CacheError::ShutDown { .. } => CacheRet::ShutDown,
        CacheError::LoadWaitTimeout { .. } => CacheRet::LoadWaitTimeout,
        CacheError::Load { .. } => CacheRet::LoadFailed,
        CacheError::NoRoom { .. } => CacheRet::NoRoom,
        CacheError::TooLarge { .. } => CacheRet::TooLarge,
        CacheError::InvalidKey { .. } => CacheRet::Unexpected("InvalidKey"),
        CacheError::SizeOverflow { .. } => CacheRet::Unexpected("SizeOverflow"),
        _ => CacheRet::Unexpected("a device error"),
    }
}

impl Generated for CacheProgram {
    const KIND: &'static str = "cache-program";

    fn execute(&self, rt: ShuttleRuntime) {
        run_once(rt, self);
    }

    fn any_time(&self) -> bool {
        self.any_time
    }
}
