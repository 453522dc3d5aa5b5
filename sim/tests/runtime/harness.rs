//! The public harness an application checks its own stack with: the probes of a `Probed`
//! loader catch what they promise (I1, L1, I14, U1) over any loader; `Checkers` reports a
//! failing scenario with its replay file and a mutant that survives; a registry knows its
//! scenarios and mutants by name.

use super::support;

use resident::mutants::Mutant;
use resident::runtime::Monitor;
use resident::{BoxError, Loader, Model, ModelId};
use resident_sim::check::{CheckFailure, Checkers};
use resident_sim::explore::{Checker, Plan, explore};
use resident_sim::probed::Probed;
use resident_sim::program;
use resident_sim::registry::Registry;
use resident_sim::runtime::SimRuntime;
use resident_sim::scenario::Scenario;
use resident_sim::world::join;

/// A loader of the application's own: a model is its id's length.
struct Lengths;

struct Length(usize);

impl Model for Length {
    fn size_bytes(&self) -> u64 {
        self.0 as u64
    }
}

impl Loader for Lengths {
    type Model = Length;

    fn load(&self, id: &ModelId) -> Result<Length, BoxError> {
        Ok(Length(id.as_str().len()))
    }
}

fn id(s: &str) -> ModelId {
    ModelId::new(s).expect("a valid id")
}

/// The first violation exploring `program` finds under `checker`, by invariant id.
fn found(scenario: Scenario, checker: Checker) -> Option<String> {
    let outcome = explore(&scenario, checker, Plan::new(200, support::seed()));
    outcome.failure.map(|f| {
        println!("{}: {}", scenario.id, f.violation);
        f.violation.invariant
    })
}

/// Two loads of one registration at once, as a manager never runs them.
fn concurrent_loads<R: SimRuntime>(rt: R, registered: [&'static str; 2]) {
    let loader = std::sync::Arc::new(Probed::new(&rt, Lengths));
    let other = std::sync::Arc::clone(&loader);
    let t = rt.spawn("T1", move || {
        other.load_as(&id(registered[0]), &id("a"), resident::Deadline::NONE).map(|_| ())
    });
    let _ = loader.load_as(&id(registered[1]), &id("a"), resident::Deadline::NONE);
    let _ = join::<R, _>(t);
}

#[test]
fn the_probes_key_on_the_registration_and_catch_concurrent_loads() {
    for checker in [Checker::Random, Checker::Pct, Checker::Loom] {
        let same = Scenario::new("same", "two loads of a", program!(|rt| concurrent_loads(rt, ["a", "a"])));
        assert_eq!(found(same, checker).as_deref(), Some("I1"), "{checker}");
        // Two aliases of one model may load it at once (SPEC I1 is per resolved id).
        let aliases =
            Scenario::new("aliases", "a under two aliases", program!(|rt| concurrent_loads(rt, ["x", "y"])));
        assert_eq!(found(aliases, checker), None, "{checker}");
    }
}

/// A model used after its unload, and a model built and never registered nor unloaded.
fn used_after_unload<R: SimRuntime>(rt: R) {
    let loader = Probed::new(&rt, Lengths);
    let model = loader.load(&id("a")).expect("loads");
    model.unload().expect("unloads");
    let _ = model.0;
}

fn orphan<R: SimRuntime>(rt: R) {
    let loader = Probed::new(&rt, Lengths);
    let probes = loader.probes();
    let manager = resident::ModelManager::with_runtime(loader, resident::ManagerConfig::default(), rt)
        .expect("valid config");
    // A model built by the manager's loader and registered nowhere: an orphan.
    let built = manager.loader().load(&id("a")).expect("loads");
    probes.check_quiescent(&manager);
    drop(built);
}

/// A model built elsewhere, registered: no orphan.
fn registered_elsewhere<R: SimRuntime>(rt: R) {
    let loader = Probed::new(&rt, Lengths);
    let probes = loader.probes();
    let manager =
        resident::ModelManager::with_runtime(loader, resident::ManagerConfig::default(), rt.clone())
            .expect("valid config");
    let model = manager.loader().prebuilt("b", Length(1));
    resident::ManagerExt::register(&manager, "b", model).map_err(|e| e.error).expect("registers");
    let other = rt.clone();
    let t = rt.spawn("T1", move || other.schedule_point());
    join::<R, _>(t);
    probes.check_quiescent(&manager);
}

fn user_code_in_a_monitor<R: SimRuntime>(rt: R) {
    let loader = Probed::new(&rt, Lengths);
    let monitor = rt.monitor(());
    monitor.with(|()| loader.load(&id("a")).map(|_| ())).expect("loads");
}

#[test]
fn the_probes_catch_a_use_after_unload_an_orphan_and_user_code_in_a_monitor() {
    let cases: [(Scenario, &str); 3] = [
        (Scenario::new("L1", "use after unload", program!(used_after_unload)), "L1"),
        (Scenario::new("I14", "an orphan", program!(orphan)), "I14"),
        (Scenario::new("U1", "a load in a monitor", program!(user_code_in_a_monitor)), "U1"),
    ];
    let fine = Scenario::new("prebuilt", "registered elsewhere", program!(registered_elsewhere));
    assert_eq!(found(fine, Checker::Random), None, "a registered prebuilt model is no orphan");
    for (scenario, invariant) in cases {
        for checker in [Checker::Random, Checker::Loom] {
            assert_eq!(
                found(scenario.clone(), checker).as_deref(),
                Some(invariant),
                "{} under {checker}",
                scenario.id
            );
        }
    }
}

/// A wait nobody ends: a deadlock under every checker.
fn deadlock<R: SimRuntime>(rt: R) {
    let flag = rt.monitor(false);
    let _ = flag.wait_until(None, |set| set.then_some(()));
}

fn quiet<R: SimRuntime>(rt: R) {
    let other = rt.clone();
    let t = rt.spawn("T1", move || other.schedule_point());
    rt.check("never", || true);
    join::<R, _>(t);
}

#[test]
fn checkers_report_a_failure_with_its_replay_file_and_a_surviving_mutant() {
    let dir = std::env::temp_dir().join(format!("resident-sim-harness-{}", std::process::id()));
    let checkers = Checkers::all().only(&[Checker::Random]).iterations(20).seed(7).failures_to(&dir);
    let failing = Scenario::new("APP-DEADLOCK", "a wait nobody ends", program!(deadlock));
    match checkers.verify(&failing) {
        Err(CheckFailure::Failed { scenario, checker, replay: Some(path), violation, .. }) => {
            assert_eq!(
                (scenario, checker, violation.invariant.as_str()),
                ("APP-DEADLOCK", Checker::Random, "deadlock")
            );
            let file = resident_sim::replay_file::ReplayFile::read(&path).expect("written");
            let registry = Registry::new().scenario(failing.clone());
            assert!(file.replay_in(&registry).expect("replays").reproduced);
            assert!(file.replay().is_err(), "the stock catalogue does not know APP-DEADLOCK");
        }
        other => panic!("{other:?}"),
    }
    let mutant = Mutant::named("a-bug-nothing-checks");
    let survivor = Scenario::new("APP-QUIET", "checks nothing", program!(quiet)).must_kill(mutant);
    match checkers.verify(&survivor) {
        Err(CheckFailure::Survived { mutant: name, executions, .. }) => {
            assert_eq!(name, "a-bug-nothing-checks");
            assert!(executions > 0);
        }
        other => panic!("{other:?}"),
    }
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn a_registry_reads_its_mutants_back_by_name() {
    let bug = Mutant::named("app-bug");
    let spare = Mutant::named("app-spare");
    let registry = Registry::new()
        .scenario(Scenario::new("APP-1", "checks nothing", program!(quiet)).must_kill(bug))
        .mutant(spare)
        .mutant(Mutant::EVICT_LEASED);
    assert_eq!(registry.own_mutants(), &[bug, spare], "resident's own are known already");
    assert_eq!(registry.parse_mutant("app-bug"), Ok(bug));
    assert_eq!(registry.parse_mutant("evict-leased"), Ok(Mutant::EVICT_LEASED));
    assert!(registry.parse_mutant("app-other").is_err());
    assert_eq!(registry.pairs().count(), 1);
    assert!(Registry::catalogue().find("M-S1").is_some() && registry.find("M-S1").is_none());
}

/// One critical section under `lock`: nobody else is inside (counted with the checker's own
/// atomic), across a scheduling point.
fn inside<R: SimRuntime>(lock: &resident::runtime::TimedLock<R>, count: &R::Counter) {
    use resident_sim::runtime::Counter;
    assert!(lock.is_held(), "held while inside");
    assert_eq!(count.add(1), 0, "two threads inside the lock");
    R::yield_now();
    count.sub(1);
}

/// Three threads take one `TimedLock` every way it offers: as long as it takes, bounded by a
/// timeout and by a deadline, and if free. Under `Time::Auto` a bound fires only while every
/// thread is blocked, which a holder never is: every bounded take succeeds.
fn timed_lock_excludes<R: SimRuntime>(rt: R) {
    use std::sync::Arc;
    use std::time::Duration;
    let lock = Arc::new(resident::runtime::TimedLock::new(&rt));
    let count = Arc::new(rt.counter());
    let (l1, c1) = (Arc::clone(&lock), Arc::clone(&count));
    let t1 = rt.spawn("T1", move || {
        let _held = l1.lock();
        inside::<R>(&l1, &c1);
    });
    let (l2, c2, rt2) = (Arc::clone(&lock), Arc::clone(&count), rt.clone());
    let t2 = rt.spawn("T2", move || {
        let deadline = resident::Deadline::after(&rt2, Duration::from_secs(1));
        let held = l2.lock_until(deadline).expect("no thread blocks for good: the deadline never fires");
        inside::<R>(&l2, &c2);
        drop(held);
        if let Some(_held) = l2.try_lock() {
            inside::<R>(&l2, &c2);
        }
    });
    let held = lock.lock_for(Duration::from_secs(1)).expect("the timeout never fires");
    inside::<R>(&lock, &count);
    drop(held);
    join::<R, _>(t1);
    join::<R, _>(t2);
    assert!(!lock.is_held(), "every guard released it");
}

#[test]
fn a_timed_lock_excludes_under_every_checker_however_it_is_taken() {
    for checker in [Checker::Random, Checker::Pct, Checker::Loom] {
        let scenario =
            Scenario::new("timed-lock", "three takers of one TimedLock", program!(timed_lock_excludes))
                .time(resident_sim::runtime::Time::Auto);
        assert_eq!(found(scenario, checker), None, "{checker}");
    }
}
