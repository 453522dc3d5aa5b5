//! The sim runtimes themselves: a notify nobody sends is lost for real (a deadlock, or in
//! `Time::Auto` a flagged lost wakeup) under shuttle random, PCT and loom; shorter deadlines fire
//! first; the clock moves in atomic steps; shuttle wakes spuriously now and then, loom never; the
//! determinism check notices a program that is not deterministic; the watchdog ends a stalled
//! exploration with a diagnostic; and a batch runs its explorations on worker threads.

mod support;

/// A failed exploration leaves nothing behind (one test binary with the runtime's tests).
#[path = "runtime/leftover.rs"]
mod leftover;

/// Checking an application's own stack (one test binary with the runtime's tests).
#[path = "runtime/harness.rs"]
mod harness;

/// The explorer's command line.
#[path = "runtime/cli.rs"]
mod cli;

/// Reports armed to panic while a thread unwinds.
#[path = "runtime/unwinding.rs"]
mod unwinding;

/// Sets of mutant switches.
#[path = "runtime/mutant_set.rs"]
mod mutant_set;

/// Traces read back as timelines.
#[path = "runtime/timeline.rs"]
mod timeline;

/// The exploration watchdog.
#[path = "runtime/watchdog.rs"]
mod watchdog;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use resident::runtime::{Monitor, TimedOut};
use resident_sim::explore::batch::{Batch, explore_batch, throughput};
use resident_sim::explore::{Checker, Plan, check_determinism, explore};
use resident_sim::program;
use resident_sim::runtime::{SimRuntime, Time};
use resident_sim::scenarios::{Scenario, find};
use resident_sim::violation::Violation;

macro_rules! scenario {
    ($id:literal, $time:ident, $body:path) => {
        &Scenario::new($id, "a runtime self-test", program!($body)).time(Time::$time)
    };
}

const CHECKERS: [Checker; 3] = [Checker::Random, Checker::Pct, Checker::Loom];

fn failure(scenario: &Scenario, checker: Checker) -> Option<Violation> {
    explore(scenario, checker, Plan::new(200, support::seed())).failure.map(|f| f.violation)
}

/// T1 waits for a flag that the main thread sets, notifying if `notify`.
fn flag<R: SimRuntime>(rt: &R, notify: bool, timeout: Option<Duration>) {
    let flag = std::sync::Arc::new(rt.monitor(false));
    let waiter = std::sync::Arc::clone(&flag);
    let t1 = rt.spawn("T1", move || waiter.wait_until(timeout, |set| set.then_some(())));
    flag.with(|set| *set = true);
    if notify {
        flag.notify_all();
    }
    let waited = R::join(t1).unwrap_or_else(|p| std::panic::resume_unwind(p));
    assert_eq!(waited, Ok(()), "the flag was set");
}

fn unnotified<R: SimRuntime>(rt: R) {
    flag(&rt, false, None);
}

fn notified<R: SimRuntime>(rt: R) {
    flag(&rt, true, None);
}

fn unnotified_bounded<R: SimRuntime>(rt: R) {
    flag(&rt, false, Some(Duration::from_secs(1)));
}

fn notified_bounded<R: SimRuntime>(rt: R) {
    flag(&rt, true, Some(Duration::from_secs(1)));
    assert_eq!(rt.now(), Duration::ZERO, "no deadline passed");
}

#[test]
fn a_notify_nobody_sends_is_a_deadlock_without_time() {
    for checker in CHECKERS {
        let found = failure(scenario!("unnotified", Off, unnotified), checker);
        assert!(found.is_some_and(|v| v.invariant == "deadlock"), "{checker} missed the lost wakeup");
        assert_eq!(failure(scenario!("notified", Off, notified), checker), None, "{checker}");
    }
}

#[test]
fn a_notify_nobody_sends_is_a_flagged_lost_wakeup_in_auto_time() {
    for checker in CHECKERS {
        let found = failure(scenario!("unnotified-bounded", Auto, unnotified_bounded), checker);
        assert!(found.is_some_and(|v| v.invariant == "lost-wakeup"), "{checker} missed the lost wakeup");
        assert_eq!(
            failure(scenario!("notified-bounded", Auto, notified_bounded), checker),
            None,
            "{checker}"
        );
    }
}

/// T1 waits 5 ms and T2 10 ms on one monitor for a flag that only a timed-out waiter sets: the
/// shorter deadline fires first, so T2 is always woken by T1's flag, never by its own deadline.
fn shorter_first<R: SimRuntime>(rt: R) {
    let flag = std::sync::Arc::new(rt.monitor(false));
    let wait = |name: &str, ms: u64| {
        let flag = std::sync::Arc::clone(&flag);
        rt.spawn(name, move || {
            let waited = flag.wait_until(Some(Duration::from_millis(ms)), |set| set.then_some(()));
            if waited.is_err() {
                flag.with(|set| *set = true);
                flag.notify_all();
            }
            waited
        })
    };
    let (t1, t2) = (wait("T1", 5), wait("T2", 10));
    let t1 = R::join(t1).unwrap_or_else(|p| std::panic::resume_unwind(p));
    let t2 = R::join(t2).unwrap_or_else(|p| std::panic::resume_unwind(p));
    assert_eq!((t1, t2), (Err(TimedOut), Ok(())), "the 10 ms deadline fired before the 5 ms one");
    assert_eq!(rt.now(), Duration::from_millis(5));
}

#[test]
fn shorter_deadlines_fire_first() {
    for checker in CHECKERS {
        assert_eq!(failure(scenario!("shorter-first", Auto, shorter_first), checker), None, "{checker}");
    }
}

fn concurrent_advances<R: SimRuntime>(rt: R) {
    let handles = ["T1", "T2"].map(|name| {
        let rt2 = rt.clone();
        rt.spawn(name, move || rt2.advance_clock(Duration::from_millis(1)))
    });
    for handle in handles {
        R::join(handle).unwrap_or_else(|p| std::panic::resume_unwind(p));
    }
    assert_eq!(rt.now(), Duration::from_millis(2), "an advance was lost");
}

#[test]
fn the_clock_moves_in_atomic_steps() {
    for checker in CHECKERS {
        assert_eq!(failure(scenario!("advances", Off, concurrent_advances), checker), None, "{checker}");
    }
}

/// The change signal's protocol under every checker: T1 reads the epoch, looks at a flag, and
/// waits past the epoch it read; the main thread sets the flag, then bumps. T1 always sees the
/// flag, whichever comes first, and no deadline passes.
fn signal_protocol<R: SimRuntime>(rt: R) {
    let signal = std::sync::Arc::new(resident::runtime::Signal::new(&rt));
    let flag = std::sync::Arc::new(rt.monitor(false));
    let (s1, f1) = (std::sync::Arc::clone(&signal), std::sync::Arc::clone(&flag));
    let t1 = rt.spawn("T1", move || {
        loop {
            let seen = s1.epoch();
            if f1.with(|set| *set) {
                return;
            }
            s1.wait_past(seen, Some(Duration::from_secs(1))).expect("the bump wakes T1 before its deadline");
        }
    });
    flag.with(|set| *set = true);
    signal.bump();
    R::join(t1).unwrap_or_else(|p| std::panic::resume_unwind(p));
    assert_eq!(rt.now(), Duration::ZERO, "no deadline passed");
}

#[test]
fn the_change_signal_loses_no_wakeup() {
    for checker in CHECKERS {
        assert_eq!(failure(scenario!("signal", Auto, signal_protocol), checker), None, "{checker}");
    }
}

static CHECKS: AtomicUsize = AtomicUsize::new(0);
static MOST_CHECKS: AtomicUsize = AtomicUsize::new(0);

/// T1 waits for a flag the main thread sets and notifies once; counts T1's condition checks.
fn count_checks<R: SimRuntime>(rt: R) {
    CHECKS.store(0, Ordering::SeqCst);
    let flag = std::sync::Arc::new(rt.monitor(false));
    let waiter = std::sync::Arc::clone(&flag);
    let t1 = rt.spawn("T1", move || {
        waiter.wait_until(None, |set| {
            CHECKS.fetch_add(1, Ordering::SeqCst);
            set.then_some(())
        })
    });
    R::yield_now();
    flag.with(|set| *set = true);
    flag.notify_all();
    let _ = R::join(t1);
    MOST_CHECKS.fetch_max(CHECKS.load(Ordering::SeqCst), Ordering::SeqCst);
}

#[test]
fn shuttle_wakes_spuriously_now_and_then_and_loom_never() {
    // Without spurious wakeups T1 checks at most twice: before it waits, and once notified.
    let scenario = scenario!("spurious", Off, count_checks);
    MOST_CHECKS.store(0, Ordering::SeqCst);
    assert_eq!(failure(scenario, Checker::Loom), None);
    assert!(MOST_CHECKS.load(Ordering::SeqCst) <= 2, "loom woke a waiter spuriously");
    MOST_CHECKS.store(0, Ordering::SeqCst);
    assert_eq!(failure(scenario, Checker::Random), None);
    assert!(MOST_CHECKS.load(Ordering::SeqCst) > 2, "no spurious wakeup in 200 shuttle executions");
}

static RUNS: AtomicUsize = AtomicUsize::new(0);

/// Every other execution takes one more step: what a std static or a HashMap order does.
fn nondeterministic<R: SimRuntime>(_rt: R) {
    if RUNS.fetch_add(1, Ordering::SeqCst).is_multiple_of(2) {
        R::yield_now();
    }
}

#[test]
fn the_determinism_check_notices_uncontrolled_nondeterminism() {
    let found = check_determinism(scenario!("nondeterministic", Off, nondeterministic), 10, support::seed());
    assert!(found.is_some(), "a program that changes between runs passed the determinism check");
}

static TRY_FAILED: AtomicUsize = AtomicUsize::new(0);

/// T1 takes a monitor while T2 tries it.
fn try_while_held<R: SimRuntime>(rt: R) {
    let m = std::sync::Arc::new(rt.monitor(0usize));
    let m1 = std::sync::Arc::clone(&m);
    let t1 = rt.spawn("T1", move || m1.with(|v| *v += 1));
    if m.try_with(|v| *v += 1).is_none() {
        TRY_FAILED.fetch_add(1, Ordering::SeqCst);
    }
    R::join(t1).unwrap_or_else(|p| std::panic::resume_unwind(p));
}

#[test]
fn loom_never_fails_a_try_lock() {
    // Why C-R19 and C-R21 run under shuttle only: loom 0.7.3 treats a thread whose next step is
    // a try_lock of a held mutex as blocked (loom #376), so the try always succeeds. shuttle
    // does fail it.
    TRY_FAILED.store(0, Ordering::SeqCst);
    assert_eq!(failure(scenario!("try-loom", Off, try_while_held), Checker::Loom), None);
    assert_eq!(
        TRY_FAILED.load(Ordering::SeqCst),
        0,
        "loom failed a try_lock: C-R19 and C-R21 can run under loom"
    );
    assert_eq!(failure(scenario!("try-shuttle", Off, try_while_held), Checker::Random), None);
    assert!(TRY_FAILED.load(Ordering::SeqCst) > 0, "shuttle never failed a try_lock");
}

/// One seed gives one schedule: every scenario, run twice per schedule under shuttle's
/// nondeterminism checker, takes the same steps and the same data choices (spurious wakeups
/// included); and a recorded failure replays to the same per-thread trace every time.
mod determinism {
    use resident::mutants::Mutant;
    use resident_sim::explore::{Checker, Plan, check_determinism, explore, replay};
    use resident_sim::mutant_set::MutantSet;
    use resident_sim::scenarios::{CATALOGUE, ONE_DEEP, find};

    /// Schedules per scenario (each runs twice).
    const SCHEDULES: usize = 20;

    #[test]
    fn every_scenario_is_deterministic_under_shuttle() {
        for scenario in CATALOGUE.iter().chain(ONE_DEEP.iter()) {
            if let Some(violation) = check_determinism(scenario, SCHEDULES, crate::support::seed()) {
                panic!("{} is not deterministic: {violation}", scenario.id);
            }
        }
    }

    #[test]
    fn a_recorded_failure_replays_to_the_same_trace_twice() {
        let scenario = find("M-S1").expect("catalogue id");
        let mutants = MutantSet::only(Mutant::RETIRE_WHILE_HELD);
        let plan = Plan::new(5000, crate::support::seed()).with_mutants(mutants.clone());
        let failure = explore(scenario, Checker::Random, plan).failure.expect("the mutant is caught");
        let schedule = failure.schedule.expect("shuttle failures carry a schedule");
        let first = replay(scenario, &schedule, &mutants).expect("replays");
        let second = replay(scenario, &schedule, &mutants).expect("replays");
        assert_eq!(first.diverged, None);
        assert_eq!(first.violation, Some(failure.violation));
        assert_eq!(first, second, "two replays of one schedule differ");
        assert!(!first.trace.is_empty(), "the replay recorded a trace");
    }
}

/// A `tracing` event and a metric reported inside a monitor (user code under an internal lock).
fn reports_inside_a_monitor<R: SimRuntime>(rt: R, metric: bool) {
    let monitor = rt.monitor(0_u32);
    monitor.with(|_| {
        if metric {
            metrics::counter!("resident_test_total").increment(1);
        } else {
            tracing::debug!(target: "resident::test", "inside");
        }
    });
}

fn event_inside_a_monitor<R: SimRuntime>(rt: R) {
    reports_inside_a_monitor(rt, false);
}

fn metric_inside_a_monitor<R: SimRuntime>(rt: R) {
    reports_inside_a_monitor(rt, true);
}

#[test]
fn instrumentation_inside_a_monitor_is_a_violation() {
    for checker in CHECKERS {
        for scenario in [
            scenario!("event-in-monitor", Off, event_inside_a_monitor),
            scenario!("metric-in-monitor", Off, metric_inside_a_monitor),
        ] {
            let found = failure(scenario, checker);
            assert_eq!(found.map(|v| v.invariant), Some("U1".to_owned()), "{} under {checker}", scenario.id);
        }
    }
}

/// A `std::sync::Mutex` that one checker thread holds while it waits in the checker, and that
/// another then locks, blocks the exploration's one OS thread for good: the watchdog ends the
/// process with a diagnostic naming the likely cause instead of a silent hang. The hanging
/// exploration runs in a child process (this test binary again), which the watchdog ends.
#[test]
fn a_blocking_std_lock_ends_the_exploration_with_a_diagnostic() {
    const NAME: &str = "a_blocking_std_lock_ends_the_exploration_with_a_diagnostic";
    if std::env::var_os("RESIDENT_SIM_STALL_CHILD").is_some() {
        hang_on_a_std_mutex();
        return;
    }
    let mut child = std::process::Command::new(std::env::current_exe().expect("the test binary"))
        .args(["--exact", NAME, "--nocapture", "--test-threads=1"])
        .env("RESIDENT_SIM_STALL_CHILD", "1")
        .env("RESIDENT_SIM_STALL_SECS", "1")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("the child runs");
    // An outer bound, so that a watchdog that never acts fails this test instead of hanging it
    // (the child needs about a second).
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    let status = loop {
        if let Some(status) = child.try_wait().expect("the child can be waited for") {
            break status;
        }
        if std::time::Instant::now() > deadline {
            let _ = child.kill();
            panic!("the watchdog did not end the stalled exploration within a minute");
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let mut stdout = String::new();
    std::io::Read::read_to_string(&mut child.stdout.take().expect("piped"), &mut stdout).expect("utf-8");
    assert_eq!(status.code(), Some(resident_sim::explore::watchdog::STALLED), "{stdout}");
    assert!(stdout.contains("a program under shuttle: execution 1 made no progress"), "{stdout}");
    assert!(stdout.contains("std::sync::Mutex"), "{stdout}");
}

/// T1 takes a std lock, tells the main thread through the checker's channel, and waits there
/// for an answer; the main thread then locks the std lock: no checker thread can run again.
fn hang_on_a_std_mutex() {
    let _ = resident_sim::explore::explore_program(Checker::Random, 10, 1, || {
        let lock = std::sync::Arc::new(std::sync::Mutex::new(()));
        let (held_tx, held_rx) = shuttle::sync::mpsc::channel::<()>();
        let (go_tx, go_rx) = shuttle::sync::mpsc::channel::<()>();
        let theirs = std::sync::Arc::clone(&lock);
        let t1 = shuttle::thread::spawn(move || {
            let _held = theirs.lock().expect("not poisoned");
            held_tx.send(()).expect("main listens");
            let _ = go_rx.recv();
        });
        held_rx.recv().expect("T1 holds the lock");
        let _blocked = lock.lock().expect("not poisoned");
        let _ = go_tx.send(());
        let _ = t1.join();
    });
    unreachable!("the watchdog ends the process");
}

// Many explorations at once (`explore::batch`).

#[test]
fn a_batch_runs_every_job_once_and_answers_in_job_order() {
    let (s1, l1) = (find("M-S1").expect("catalogue id"), find("M-L1").expect("catalogue id"));
    let jobs = [(s1, Checker::Random), (l1, Checker::Pct), (s1, Checker::Pct), (l1, Checker::Random)];
    let finished = AtomicUsize::new(0);
    let batch = Batch { threads: 2, time: None };
    let outcomes = explore_batch(&jobs, &Plan::new(40, 7), batch, |o, done| {
        assert_eq!(o.iterations, 40);
        finished.fetch_max(done, Ordering::Relaxed);
    });
    let got: Vec<(&str, Checker)> = outcomes.iter().map(|o| (o.scenario, o.checker)).collect();
    assert_eq!(got, jobs.map(|(s, c)| (s.id, c)));
    assert_eq!(finished.load(Ordering::Relaxed), jobs.len());
    let rates = throughput(&outcomes);
    assert_eq!(
        rates.iter().map(|(c, t)| (*c, t.executions)).collect::<Vec<_>>(),
        [(Checker::Random, 80), (Checker::Pct, 80)]
    );
}

#[test]
fn a_time_budget_stops_an_exploration_with_the_executions_it_ran() {
    let s1 = find("M-S1").expect("catalogue id");
    let batch = Batch { threads: 1, time: Some(Duration::from_millis(300)) };
    let outcomes = explore_batch(&[(s1, Checker::Random)], &Plan::new(usize::MAX, 7), batch, |_, _| {});
    assert!(outcomes[0].iterations > 0 && outcomes[0].failure.is_none());
    assert!(outcomes[0].elapsed < Duration::from_secs(60), "it stopped at its share of the budget");
}
