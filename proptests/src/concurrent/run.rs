//! Runs a generated manager [`Program`] on the sim: the stack on a shuttle runtime, each thread's calls
//! recorded (with plain std primitives, so recording adds no scheduling point), then every
//! invariant the sim world checks and linearizability against the [`Stack`] specification.

use std::collections::BTreeMap;
use std::sync::Mutex;
use std::time::Duration;

use resident::runtime::Arc;
use resident::{
    Added, CacheError, CallOptions, CapacityPolicy, Eviction, FixedSizeCache, FixedSizeConfig, Lease,
    Manager, ManagerError, ManagerExt, ModelId, RemovalReport, Replaced, Traced,
};
use resident_sim::bypass::Calls;
use resident_sim::latch::Latch;
use resident_sim::runtime::{ShuttleRuntime, SimRuntime, Time};
use resident_sim::unwinding::catch;
use resident_sim::violation::{InjectedPanic, Violation};
use resident_sim::world::checks::check_queue;
use resident_sim::world::checks::ensure_outside_monitors;
use resident_sim::world::manager::{CallObserver, ManagerWorld, Probe, SimModel};

use super::generated::Generated;
use super::history::{History, ensure_linearizable};
use super::program::{ALIAS, IDS, MAX_SIZE, Program, REPORT_FAULTS, RESOLVED, ThreadOp, Under};
use super::stack::{Op, Ret, Stack, State, split_calls};

/// What a [`Recorder`] reads of the runtime about the calling thread, without a scheduling
/// point.
trait Waits: Send + Sync {
    /// Its bounded waits that ended by their deadline so far.
    fn timed_out(&self) -> u64;
    /// Which deadline of the execution ended the last of them (see
    /// [`SimRuntime::last_timeout_here`]).
    fn last_timeout(&self) -> u64;
    /// Its waits that blocked so far.
    fn blocked(&self) -> u64;
    /// Its name.
    fn thread(&self) -> String;
}

impl<R: SimRuntime> Waits for R {
    fn timed_out(&self) -> u64 {
        self.timeouts_here()
    }

    fn last_timeout(&self) -> u64 {
        self.last_timeout_here()
    }

    fn blocked(&self) -> u64 {
        self.blocked_here()
    }

    fn thread(&self) -> String {
        R::thread_name().unwrap_or_default()
    }
}

/// The calls and unload events of one execution, in invocation order.
struct Recorder {
    history: History<Op, Ret>,
    /// The call each checker thread is in (by thread name), for the unloads it runs.
    current: Mutex<BTreeMap<String, (usize, usize)>>,
    waits: Arc<dyn Waits>,
    /// Deadlines fire only while every thread is blocked ([`Time::Auto`]).
    auto: bool,
    /// Notes that a call returned, in programs with a [`ThreadOp::Locked`] (in no other: it
    /// adds scheduling points).
    returned: Option<Box<dyn Fn() + Send + Sync>>,
    /// Blocks until some call returns, or [`HOLD`] passes.
    hold: Option<Box<dyn Fn() + Send + Sync>>,
}

/// How long a [`ThreadOp::Locked`] keeps its lock past its step, at most, once every thread is
/// blocked: longer than any other wait of a program, so that a waiter its lock does not concern
/// times out (and is checked) while the lock is still held.
const HOLD: Duration = Duration::from_secs(3600);

impl Recorder {
    fn new<R: SimRuntime>(rt: &R, holds: bool) -> Self {
        let returned = holds.then(|| Arc::new(Latch::new(rt)));
        let hold = returned.clone().map(|latch| {
            Box::new(move || {
                latch.wait_for_within(latch.get() + 1, HOLD);
            }) as Box<dyn Fn() + Send + Sync>
        });
        let auto = rt.time() == Time::Auto;
        let stamps = rt.clone();
        Self {
            history: History::stamped(Box::new(move || stamps.expiries())),
            current: Mutex::default(),
            waits: Arc::new(rt.clone()),
            auto,
            returned: returned.map(|latch| Box::new(move || latch.add(1)) as Box<dyn Fn() + Send + Sync>),
            hold,
        }
    }

    /// Begins call [`Op::Hold`] of `thread`: the lock of `RESOLVED[i]`, taken by a call that
    /// has not returned yet, is kept past it. Its index, for [`Recorder::hold`].
    fn holding(&self, thread: usize, i: usize) -> usize {
        self.history.begin(thread, Op::Hold(i))
    }

    /// Keeps `guard` until another call returns, or every thread is blocked for [`HOLD`], then
    /// drops it and ends the hold `at` ([`Recorder::holding`]).
    fn hold<G>(&self, at: usize, guard: G) {
        if let Some(hold) = &self.hold {
            hold();
        }
        drop(guard);
        self.history.end(at, Some(Ret::Done));
        if let Some(returned) = &self.returned {
            returned();
        }
    }

    /// Runs `call`, a call of `op` with a zero deadline: none of its waits may block (SPEC
    /// 1.10), whatever it returns.
    fn now<T>(&self, op: &ThreadOp, call: impl FnOnce() -> T) -> T {
        let before = self.waits.blocked();
        let out = call();
        let blocked = self.waits.blocked() - before;
        resident_sim::ensure!(
            blocked == 0,
            "1.10",
            "{} {op:?} with a zero deadline blocked in {blocked} wait(s)",
            self.thread()
        );
        out
    }

    /// The calling thread's timeouts so far (under [`Time::Auto`]; else none), and which
    /// deadline ended the last of them.
    fn timeouts(&self) -> (u64, u64) {
        if self.auto { (self.waits.timed_out(), self.waits.last_timeout()) } else { (0, 0) }
    }

    fn thread(&self) -> String {
        self.waits.thread()
    }

    /// Records `f` as call `op` of `thread`; a panic leaves its result unknown.
    fn call<T>(&self, thread: usize, op: Op, f: impl FnOnce() -> (Ret, T)) -> Option<T> {
        let at = self.history.begin(thread, op);
        self.current.lock().expect("recorder lock").insert(self.thread(), (thread, at));
        let timeouts = self.timeouts();
        let result = catch(f);
        self.current.lock().expect("recorder lock").remove(&self.thread());
        // Only a scripted panic of user code may reach a caller; a violation was recorded when
        // it was raised.
        if let Err(payload) = &result
            && !payload.is::<InjectedPanic>()
            && !payload.is::<Violation>()
        {
            let message = payload
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| payload.downcast_ref::<&str>().map(|s| (*s).to_owned()))
                .unwrap_or_default();
            Violation::raise("panic", format!("{} {op:?} panicked: {message}", self.thread()));
        }
        // Under `auto` time a deadline fires only while every thread is blocked: a call that
        // then succeeds found the state changed while it slept, and nobody woke it.
        let (timed_out, decided) = self.timeouts();
        let timed_out = timed_out > timeouts.0;
        if let Ok((ret @ (Ret::Loaded | Ret::Warm | Ret::Done), _)) = &result
            && timed_out
        {
            Violation::raise(
                "lost-wakeup",
                format!(
                    "{} {op:?} gave {ret:?} after one of its waits timed out while every thread was \
                     blocked: what it waited for happened, and nothing woke it",
                    self.thread()
                ),
            );
        }
        let value = match result {
            Ok((ret, value)) => {
                // A refusal that gave up on a wait: decided once that wait's deadline fired,
                // with every thread blocked, and explained by the state then.
                let gave_up = matches!(ret, Ret::CapacityExhausted | Ret::LockTimeout | Ret::Busy)
                    && matches!(
                        op,
                        Op::Add { .. }
                            | Op::Remove(_)
                            | Op::Evict(_)
                            | Op::Pin(_)
                            | Op::Unpin(_)
                            | Op::Lease(_)
                            | Op::Infer(_)
                    );
                self.history.end(at, Some(ret));
                if gave_up && timed_out {
                    self.history.decided_after(at, decided);
                }
                Some(value)
            }
            Err(_) => {
                self.history.end(at, None);
                None
            }
        };
        if let Some(returned) = &self.returned {
            returned();
        }
        value
    }
}

impl CallObserver for Recorder {
    fn started(&self, resolved: &str) -> usize {
        let v = RESOLVED.iter().position(|i| *i == resolved).expect("a program id");
        let (thread, by) = *self
            .current
            .lock()
            .expect("recorder lock")
            .get(&self.thread())
            .expect("unloads run inside a recorded call");
        self.history.begin(thread, Op::Unload { v, by })
    }

    fn ended(&self, token: usize, ok: Option<bool>) {
        let Op::Unload { v, .. } = self.history.get(token).op else {
            unreachable!("tokens are unload events")
        };
        self.history.end(token, ok.map(|ok| if ok { Ret::Done } else { Ret::UnloadFailed(v) }));
    }

    fn loading_as(&self) -> Option<String> {
        let (_, at) = *self.current.lock().expect("recorder lock").get(&self.thread())?;
        match self.history.get(at).op {
            Op::Add { r, c, .. } if r != c => Some(RESOLVED[r].to_owned()),
            _ => None,
        }
    }
}

/// The index of a resolved id in [`RESOLVED`].
fn index(id: &resident::ModelId) -> Option<usize> {
    RESOLVED.iter().position(|i| *i == id.as_str())
}

fn error(e: ManagerError) -> Ret {
    match e {
        ManagerError::NotFound { .. } => Ret::NotFound,
        // The caller's own wait expired inside the load (S-F2).
        ManagerError::Load { source, .. }
            if source.downcast_ref::<CacheError>().is_some_and(CacheError::is_wait_expiry) =>
        {
            Ret::Expired
        }
        ManagerError::Load { .. } => Ret::LoadFailed,
        ManagerError::Unload { id, .. } => {
            index(&id).map_or_else(|| Ret::Unexpected(id.to_string()), Ret::UnloadFailed)
        }
        ManagerError::Busy { .. } => Ret::Busy,
        ManagerError::Removing { .. } => Ret::Removing,
        ManagerError::LockTimeout { .. } => Ret::LockTimeout,
        ManagerError::CapacityExhausted { .. } => Ret::CapacityExhausted,
        ManagerError::ShutDown { .. } => Ret::ShutDown,
        ManagerError::OverLimit { .. } => Ret::OverLimit,
        ManagerError::AlreadyRegistered { .. } => Ret::AlreadyRegistered,
        ManagerError::NoSlotBeside { .. } => Ret::NoSlotBeside,
        other => Ret::Unexpected(other.to_string()),
    }
}

fn done(result: Result<(), ManagerError>) -> Ret {
    result.map_or_else(error, |()| Ret::Done)
}

/// Runs `removal` (a shutdown or a clear), which settles every id past a panic of user code
/// (M-P3): only a panicking report (`reports_panic`, the program's recorder fault) may escape it.
fn never_panics<T>(reports_panic: bool, what: &str, removal: impl FnOnce() -> T) -> T {
    match catch(removal) {
        Ok(report) => report,
        Err(payload) if reports_panic || payload.is::<Violation>() => {
            resident_sim::unwinding::resume(payload)
        }
        Err(_) => Violation::raise(
            "M-P3",
            format!("a panic of user code escaped {what}: later ids were not settled"),
        ),
    }
}

/// The leases a thread holds, with the index of their model.
type Held<M> = Vec<(usize, Lease<<M as Manager>::Model, <M as Manager>::Runtime>)>;

/// `lease_with(RESOLVED[i], options)` as call of `thread`; the lease, if one was granted.
fn lease<M: Manager>(m: &M, recorder: &Recorder, thread: usize, i: usize, options: CallOptions) -> Held<M> {
    let lease = recorder.call(thread, Op::Lease(i), || match m.lease_with(RESOLVED[i], options) {
        Ok(lease) => (Ret::Done, Some((i, lease))),
        Err(e) => (error(e), None),
    });
    lease.flatten().into_iter().collect()
}

/// `peek_until(RESOLVED[i])` as a call of `thread`: to the reference model, a lease (no model
/// of the stack's orders is kept there).
fn peek<M: Manager>(m: &M, recorder: &Recorder, thread: usize, i: usize) -> Held<M> {
    let deadline = CallOptions::new().deadline(m.runtime());
    let lease = recorder.call(thread, Op::Lease(i), || match m.peek_until(RESOLVED[i], deadline) {
        Ok(lease) => (Ret::Done, Some((i, lease))),
        Err(e) => (error(e), None),
    });
    lease.flatten().into_iter().collect()
}

/// `add_model(IDS[c], alias)` as call of `thread`.
fn add<M: Calls>(
    m: &M,
    recorder: &Recorder,
    thread: usize,
    c: usize,
    alias: Option<&str>,
    options: CallOptions,
) {
    let r = alias.map_or(c, |_| IDS.len());
    recorder.call(thread, Op::Add { r, c, built: false }, || {
        let ret = match m.call_add(IDS[c], alias, options) {
            Ok(Added::Loaded) => Ret::Loaded,
            Ok(Added::Warm) => Ret::Warm,
            Err(e) => error(e),
        };
        (ret, ())
    });
}

/// `lock(RESOLVED[i])` and `under` under it, as one call of `thread`, then the lock kept past
/// it ([`Recorder::hold`]).
fn locked<M: Manager>(m: &M, recorder: &Recorder, thread: usize, i: usize, under: Under) {
    // An add under a lock loads the model of its own id: none for the alias.
    if under == Under::Add && i >= IDS.len() {
        return;
    }
    let op = match under {
        Under::Add => Op::Add { r: i, c: i, built: false },
        Under::Remove => Op::Remove(i),
        Under::Evict => Op::Evict(i),
    };
    let guard = recorder.call(thread, op, || {
        let guard = match m.lock(RESOLVED[i]) {
            Ok(guard) => guard,
            Err(e) => return (error(e), None),
        };
        let ret = match under {
            Under::Add => match m.add_locked(&guard, &ModelId::new(IDS[i]).expect("a program id")) {
                Ok(Added::Loaded) => Ret::Loaded,
                Ok(Added::Warm) => Ret::Warm,
                Err(e) => error(e),
            },
            Under::Remove => done(m.remove_locked(&guard)),
            Under::Evict => match m.evict_locked(&guard) {
                Ok(Eviction::Evicted) => Ret::Done,
                Ok(Eviction::Pinned | Eviction::InUse) => Ret::Kept,
                Ok(Eviction::NotRegistered) => Ret::NotFound,
                Err(e) => error(e),
            },
        };
        // Held past the call's return: recorded as held from before it.
        (ret, Some((recorder.holding(thread, i), guard)))
    });
    if let Some((at, guard)) = guard.flatten() {
        recorder.hold(at, guard);
    }
}

/// One thread's program against the stack (its outermost cache), starting with the leases in
/// `held`.
fn run_thread<M>(
    m: &FixedSizeCache<M>,
    probe: &Arc<Probe<M::Runtime>>,
    recorder: &Recorder,
    thread: usize,
    ops: &[ThreadOp],
    mut held: Held<FixedSizeCache<M>>,
    reports_panic: bool,
) where
    M: Calls<Runtime: SimRuntime, Model = SimModel<<M as Manager>::Runtime>>,
{
    let now = CallOptions::new().with_timeout(Duration::ZERO);
    for op in ops {
        match *op {
            ThreadOp::Add(c) => add(m, recorder, thread, c, None, CallOptions::new()),
            ThreadOp::AddNow(c) => recorder.now(op, || add(m, recorder, thread, c, None, now)),
            ThreadOp::AddAs(c) => add(m, recorder, thread, c, Some(ALIAS), CallOptions::new()),
            ThreadOp::Remove(i) => {
                recorder.call(thread, Op::Remove(i), || (done(m.remove(RESOLVED[i])), ()));
            }
            ThreadOp::Replace(i) => {
                recorder.call(thread, Op::Replace(i), || {
                    let ret = match m.replace(IDS[i], None) {
                        Ok(Replaced::Added) => Ret::Loaded,
                        Ok(Replaced::Unloaded) => Ret::Done,
                        Ok(Replaced::Detached(detached)) => error(detached),
                        Err(e) => error(e),
                    };
                    (ret, ())
                });
            }
            ThreadOp::ReplaceInPlace(i) => {
                recorder.call(thread, Op::Swap(i), || {
                    let ret = match m.replace_in_place(IDS[i], None) {
                        Ok(Replaced::Added) => Ret::Loaded,
                        Ok(Replaced::Unloaded) => Ret::Done,
                        Ok(Replaced::Detached(detached)) => Ret::Unexpected(format!("detached: {detached}")),
                        Err(e) => error(e),
                    };
                    (ret, ())
                });
            }
            ThreadOp::Shutdown => {
                recorder.call(thread, Op::Shutdown, || {
                    let report = never_panics(reports_panic, "shutdown", || m.shutdown());
                    check_report(&report, "S-G1", "shutdown");
                    // Whatever stays registered was reported as not unloaded (no half state).
                    let failed: Vec<_> = report.failed.iter().map(|(id, _)| id.clone()).collect();
                    let stray: Vec<_> = m.ids().into_iter().filter(|id| !failed.contains(id)).collect();
                    resident_sim::ensure!(
                        stray.is_empty(),
                        "S-G1",
                        "{stray:?} registered after a shutdown that reported {report:?}"
                    );
                    let ret = if report.is_complete() {
                        Ret::Done
                    } else {
                        Ret::Registered(failed.iter().filter_map(index).fold(0u8, |m, i| m | 1 << i))
                    };
                    (ret, ())
                });
            }
            ThreadOp::Resize(n) => {
                recorder.call(thread, Op::Resize(n), || (done(m.set_max_size(n, CallOptions::new())), ()));
            }
            ThreadOp::Clear => {
                recorder.call(thread, Op::Clear, || {
                    let report = never_panics(reports_panic, "clear", || m.call_clear(CallOptions::new()));
                    check_report(&report, "1.13", "clear");
                    let failed = report.failed.iter().filter_map(|(id, _)| index(id));
                    let ret = if report.is_complete() {
                        Ret::Done
                    } else {
                        Ret::Registered(failed.fold(0u8, |m, i| m | 1 << i))
                    };
                    (ret, ())
                });
            }
            ThreadOp::Register(i) => {
                // Built before the call, outside the stack; a refused one is dropped by its caller.
                let model = probe.prebuilt(IDS[i]);
                recorder.call(thread, Op::Add { r: i, c: i, built: true }, || {
                    (
                        m.call_register(IDS[i], model, CallOptions::new())
                            .map_err(|refused| refused.error)
                            .map_or_else(error, |()| Ret::Done),
                        (),
                    )
                });
            }
            ThreadOp::RemoveNow(i) => recorder.now(op, || {
                recorder.call(thread, Op::Remove(i), || (done(m.remove_with(RESOLVED[i], now)), ()));
            }),
            ThreadOp::Lease(i) => held.extend(lease(m, recorder, thread, i, CallOptions::new())),
            ThreadOp::LeaseNow(i) => held.extend(recorder.now(op, || lease(m, recorder, thread, i, now))),
            ThreadOp::Peek(i) => held.extend(peek(m, recorder, thread, i)),
            ThreadOp::PinNow(i) => recorder.now(op, || {
                recorder.call(thread, Op::Pin(i), || (done(m.call_pin(RESOLVED[i], now)), ()));
            }),
            ThreadOp::EndLease(k) if !held.is_empty() => {
                let (i, lease) = held.remove(k % held.len());
                end_lease(recorder, thread, i, lease);
            }
            ThreadOp::EndLease(_) => {}
            ThreadOp::Pin(i) => {
                recorder.call(thread, Op::Pin(i), || (done(m.call_pin(RESOLVED[i], CallOptions::new())), ()));
            }
            ThreadOp::Unpin(i) => {
                recorder
                    .call(thread, Op::Unpin(i), || (done(m.call_unpin(RESOLVED[i], CallOptions::new())), ()));
            }
            ThreadOp::Locked(i, under) => locked(m, recorder, thread, i, under),
            ThreadOp::Infer(i, panics) => {
                recorder.call(thread, Op::Infer(i), || {
                    let served = m.infer(RESOLVED[i], |model| {
                        ensure_outside_monitors::<M::Runtime>("an infer callback");
                        model.check_loaded(&recorder.thread());
                        if panics {
                            std::panic::panic_any(InjectedPanic);
                        }
                    });
                    (done(served), ())
                });
            }
        }
    }
    for (i, lease) in held {
        end_lease(recorder, thread, i, lease);
    }
}

/// A shutdown's or a clear's report says only what can keep a model registered: its unload
/// failed, its leases outlived the drain, or its lock was not had in time. No id is both
/// removed and failed, and none is reported twice.
fn check_report(report: &RemovalReport, rule: &str, call: &str) {
    for (id, error) in &report.failed {
        resident_sim::ensure!(
            matches!(
                error,
                ManagerError::Unload { .. } | ManagerError::Busy { .. } | ManagerError::LockTimeout { .. }
            ),
            rule,
            "{call} reported {id} as not removed for a reason it cannot have: {error}"
        );
    }
    let mut ids: Vec<&ModelId> =
        report.removed.iter().chain(report.failed.iter().map(|(id, _)| id)).collect();
    let listed = ids.len();
    ids.sort();
    ids.dedup();
    resident_sim::ensure!(ids.len() == listed, rule, "{call} reported an id twice: {report:?}");
}

/// Drops `lease` of `RESOLVED[i]` as a call of `thread`, once it checked that its model was
/// never unloaded while it lived (L1: a lease protects its model until it ends).
fn end_lease<R: SimRuntime>(recorder: &Recorder, thread: usize, i: usize, lease: Lease<SimModel<R>, R>) {
    lease.check_loaded(&recorder.thread());
    recorder.call(thread, Op::EndLease(i), || (Ret::Done, drop(lease)));
}

/// One execution of `program` on `rt`.
fn run_once<R: SimRuntime>(rt: R, program: &Program) {
    let holds = program.threads.iter().flatten().any(|op| matches!(op, ThreadOp::Locked(..)));
    let recorder = Arc::new(Recorder::new(&rt, holds));
    let observer: Arc<dyn CallObserver> = Arc::clone(&recorder) as _;
    let mut builder = ManagerWorld::builder(rt)
        .work(1)
        .capacity(program.alive_at_most())
        .observe_calls(observer)
        .alias(ALIAS);
    for (i, id) in IDS.iter().enumerate() {
        builder = builder.model(id, &program.faults.loads[i], &program.faults.unloads[i]);
        if program.faults.size_panics[i] {
            builder = builder.size_panics(id);
        }
        if program.faults.drop_panics[i] {
            builder = builder.drop_panics(id);
        }
    }
    let policy = if program.overflow { CapacityPolicy::Overflow } else { CapacityPolicy::Strict };
    let config =
        FixedSizeConfig::new(MAX_SIZE).with_capacity_wait(Duration::from_secs(1)).with_policy(policy);
    if program.nested {
        let inner_config = FixedSizeConfig::new(program.capacity())
            .with_capacity_wait(Duration::from_secs(1))
            .with_policy(policy);
        let world = builder.stack(|base| {
            let inner = FixedSizeCache::new(Traced::new(base), inner_config).expect("valid config");
            FixedSizeCache::new(inner, config).expect("valid config")
        });
        run_stack(&world, &recorder, program);
        check_queue(world.manager.get_ref());
    } else {
        let world =
            builder.stack(|base| FixedSizeCache::new(Traced::new(base), config).expect("valid config"));
        run_stack(&world, &recorder, program);
    }
}

/// The program's threads on `world`'s stack, then every check.
fn run_stack<R, M>(world: &ManagerWorld<R, FixedSizeCache<M>>, recorder: &Arc<Recorder>, program: &Program)
where
    R: SimRuntime,
    M: Calls<Model = SimModel<R>, Runtime = R>,
{
    let main = program.threads.len();
    let adds = program.prefix.iter().map(|&i| ThreadOp::Add(i));
    let prefix: Vec<ThreadOp> = adds.chain(program.pins.iter().map(|&i| ThreadOp::Pin(i))).collect();
    let reports_panic = program.report_fault.is_some();
    if let Some(k) = program.report_fault {
        resident_sim::instrumentation::panic_at(&REPORT_FAULTS[k..=k]);
    }
    run_thread(&world.manager, &world.probe, recorder, main, &prefix, Vec::new(), reports_panic);
    let mut handed: Vec<Held<FixedSizeCache<M>>> = program.threads.iter().map(|_| Vec::new()).collect();
    for &(i, t) in &program.handed {
        handed[t % program.threads.len()].extend(lease(
            &world.manager,
            recorder,
            main,
            i,
            CallOptions::new(),
        ));
    }
    let handles: Vec<_> = program
        .threads
        .iter()
        .zip(handed)
        .enumerate()
        .map(|(t, (ops, held))| {
            let (recorder, ops) = (Arc::clone(recorder), ops.clone());
            world.spawn(["T1", "T2", "T3"][t.min(2)], move |m, _| {
                run_thread(&m.manager, &m.probe, &recorder, t, &ops, held, reports_panic)
            })
        })
        .collect();
    for handle in handles {
        R::join(handle).unwrap_or_else(|payload| resident_sim::unwinding::resume(payload));
    }
    resident_sim::instrumentation::disarm();
    world.check_quiescent();
    check_queue(&world.manager);
    let registered = world.manager.ids().iter().filter_map(index).fold(0u8, |m, i| m | 1 << i);
    recorder.call(main, Op::Final, || (Ret::Registered(registered), ()));
    let pinned =
        (0..RESOLVED.len()).filter(|&i| world.manager.is_pinned(RESOLVED[i])).fold(0u8, |m, i| m | 1 << i);
    recorder.call(main, Op::FinalPins, || (Ret::Pinned(pinned), ()));
    let history = split_calls(&recorder.history.calls());
    let spec = Stack {
        faults: program.faults.clone(),
        capacity: program.capacity(),
        any_time: program.any_time || program.has_calls_now(),
        overflow: program.overflow,
    };
    ensure_linearizable(&spec, State::default(), &history);
}

impl Generated for Program {
    const KIND: &'static str = "program";

    fn execute(&self, rt: ShuttleRuntime) {
        run_once(rt, self);
    }

    fn any_time(&self) -> bool {
        self.any_time
    }
}
