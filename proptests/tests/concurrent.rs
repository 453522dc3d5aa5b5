//! Generated concurrent programs over the manager stack, each explored under shuttle random and
//! PCT, checked after every execution for every invariant the sim world watches and for
//! linearizability against the stack's specification. The campaign must pass, and must fail with
//! each of three historical bugs switched back on.

use std::collections::BTreeMap;
use std::time::Instant;

use proptest::strategy::Strategy;
use proptest::test_runner::{Config, RngAlgorithm, TestError, TestRng, TestRunner};
use resident::mutants::Mutant;
use resident_proptests::concurrent::cache_program::{CacheProgram, cache_program};
use resident_proptests::concurrent::generated::{Generated, StoredFailure, check_program, replay};
use resident_proptests::concurrent::program::{Faults, Program, ThreadOp, Under, program};
use resident_sim::mutant_set::MutantSet;
use resident_sim::world::manager::Step;

/// Programs per campaign (`RESIDENT_PROGRAMS`), and schedules per program and scheduler
/// (`RESIDENT_SCHEDULES`): the defaults keep `cargo test` under a minute; `just deep` raises them.
fn budget() -> (u32, usize) {
    budget_at_least(0)
}

/// [`budget`], with at least `programs` programs.
fn budget_at_least(programs: u32) -> (u32, usize) {
    let get =
        |name: &str, default: usize| std::env::var(name).ok().and_then(|v| v.parse().ok()).unwrap_or(default);
    ((get("RESIDENT_PROGRAMS", 200) as u32).max(programs), get("RESIDENT_SCHEDULES", 50))
}

/// Where failing programs are written: `RESIDENT_FAILURES`, default `fixtures/failures/`.
fn failures_dir() -> std::path::PathBuf {
    std::env::var_os("RESIDENT_FAILURES").map_or_else(
        || std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../fixtures/failures"),
        Into::into,
    )
}

/// Stores `program`'s failure (found again on the shrunk program) as replayable JSON.
fn store<P: Generated + serde::Serialize>(program: &P, mutants: &MutantSet) -> Option<std::path::PathBuf> {
    let (_, schedules) = budget();
    let (checker, failure) = check_program(program, schedules, mutants).failure?;
    let stored = StoredFailure {
        program: program.clone(),
        mutant: mutants.iter().next().map(|m| m.name().to_owned()),
        scheduler: checker.name().to_owned(),
        violation: failure.violation.to_string(),
        schedule: failure.schedule?,
    };
    let dir = failures_dir();
    std::fs::create_dir_all(&dir).ok()?;
    let name =
        format!("{}-{}-{:016x}.json", P::KIND, stored.mutant.as_deref().unwrap_or("none"), program.seed());
    let path = dir.join(name);
    std::fs::write(&path, serde_json::to_string_pretty(&stored).ok()?).ok()?;
    Some(path)
}

/// What a campaign ran: programs, schedules, and how many programs armed each report fault
/// and in how many of them it fired.
#[derive(Debug)]
struct Ran {
    programs: u32,
    schedules: usize,
    faults: BTreeMap<&'static str, (u32, u32)>,
}

/// Runs the campaign with `mutants` on; the failing program (shrunk, stored) and its violation.
fn campaign<S>(strategy: &S, mutants: &MutantSet) -> Result<Ran, String>
where
    S: Strategy,
    S::Value: Generated + serde::Serialize + std::fmt::Debug,
{
    campaign_of(strategy, mutants, budget())
}

/// [`campaign`] with `(programs, schedules)`.
fn campaign_of<S>(
    strategy: &S,
    mutants: &MutantSet,
    (programs, schedules): (u32, usize),
) -> Result<Ran, String>
where
    S: Strategy,
    S::Value: Generated + serde::Serialize + std::fmt::Debug,
{
    // A failure that will be stored (a real one, or any with RESIDENT_FAILURES set) is shrunk
    // first; a mutant's campaign only has to find it, and shrinking (each candidate run on
    // every schedule again) would cost more than the search.
    let store_it = mutants.is_empty() || std::env::var_os("RESIDENT_FAILURES").is_some();
    let shrink = if store_it { Config::default().max_shrink_iters } else { 0 };
    let config =
        Config { cases: programs, failure_persistence: None, max_shrink_iters: shrink, ..Config::default() };
    let mut runner = TestRunner::new_with_rng(config, TestRng::deterministic_rng(RngAlgorithm::ChaCha));
    let ran = std::cell::Cell::new(0);
    let faults = std::cell::RefCell::new(BTreeMap::<&'static str, (u32, u32)>::new());
    let result = runner.run(strategy, |p| {
        let checked = check_program(&p, schedules, mutants);
        ran.set(ran.get() + checked.schedules);
        for (name, fired) in checked.faults {
            let mut faults = faults.borrow_mut();
            let counts = faults.entry(name).or_default();
            *counts = (counts.0 + 1, counts.1 + u32::from(fired));
        }
        match checked.failure {
            None => Ok(()),
            Some((checker, failure)) => Err(proptest::test_runner::TestCaseError::fail(format!(
                "{checker} execution {}: {}",
                failure.iteration, failure.violation
            ))),
        }
    });
    match result {
        Ok(()) => Ok(Ran { programs, schedules: ran.get(), faults: faults.into_inner() }),
        Err(TestError::Fail(why, program)) => {
            let (stored, shrunk) = if store_it {
                let stored = store(&program, mutants).map(|p| format!("\nstored: {}", p.display()));
                (stored.unwrap_or_default(), "shrunk")
            } else {
                (String::new(), "not shrunk (RESIDENT_FAILURES=DIR shrinks and stores it)")
            };
            Err(format!("{why}\nprogram, {shrunk}: {program:#?}{stored}"))
        }
        Err(TestError::Abort(why)) => Err(format!("aborted: {why}")),
    }
}

/// How many programs must arm a report fault before the campaign requires it to fire.
const ARMED_ENOUGH: u32 = 3;

/// Runs the campaign of `strategy` with no mutant, and reports its speed.
fn passes<S>(strategy: &S)
where
    S: Strategy,
    S::Value: Generated + serde::Serialize + std::fmt::Debug,
{
    let start = Instant::now();
    match campaign(strategy, &MutantSet::NONE) {
        Ok(Ran { programs, schedules, faults }) => {
            let secs = start.elapsed().as_secs_f64();
            println!(
                "{programs} programs, {schedules} schedules in {secs:.1}s ({:.0}/s)",
                schedules as f64 / secs
            );
            // A report fault armed in programs whose executions never reach that report tests
            // nothing: each one armed in a few programs must fire in some (armed in fewer, as
            // with a small budget like `just mutation`'s, a miss says little).
            for (name, (armed, fired)) in &faults {
                println!("report fault `{name}`: armed in {armed} programs, fired in {fired}");
            }
            let unfired: Vec<_> = faults
                .iter()
                .filter(|(_, (armed, fired))| *armed >= ARMED_ENOUGH && *fired == 0)
                .map(|(name, _)| name)
                .collect();
            assert!(unfired.is_empty(), "report faults armed but never fired in any program: {unfired:?}");
        }
        Err(failure) => panic!("{failure}"),
    }
}

#[test]
fn generated_programs_are_linearizable_and_keep_every_invariant() {
    passes(&program());
}

#[test]
fn generated_cache_programs_keep_every_invariant() {
    passes(&cache_program());
}

/// The campaign of `strategy` fails with `mutant` on.
fn finds_with<S>(strategy: &S, mutant: Mutant)
where
    S: Strategy,
    S::Value: Generated + serde::Serialize + std::fmt::Debug,
{
    let start = Instant::now();
    let found = campaign(strategy, &MutantSet::only(mutant));
    let failure = found.expect_err(&format!("the generated {} campaign missed {mutant}", S::Value::KIND));
    println!("{mutant} found in {:.1}s:\n{failure}", start.elapsed().as_secs_f64());
}

fn finds(mutant: Mutant) {
    finds_with(&program(), mutant);
}

#[test]
fn the_campaign_finds_unload_while_leased() {
    finds(Mutant::UNLOAD_WHILE_LEASED);
}

#[test]
fn the_campaign_finds_retire_while_held() {
    finds(Mutant::RETIRE_WHILE_HELD);
}

/// An add under the `Overflow` policy that overflows while an idle model could go.
#[test]
fn the_campaign_finds_overflow_evicts_nothing() {
    finds(Mutant::OVERFLOW_EVICTS_NOTHING);
}

#[test]
fn the_campaign_finds_no_queue_dedup() {
    finds(Mutant::NO_QUEUE_DEDUP);
}

fn finds_in_caches(mutant: Mutant) {
    finds_with(&cache_program(), mutant);
}

#[test]
fn the_cache_campaign_finds_unused_handle_leaks() {
    finds_in_caches(Mutant::UNUSED_HANDLE_LEAKS);
}

#[test]
fn the_cache_campaign_finds_admission_unprotected() {
    finds_in_caches(Mutant::ADMISSION_UNPROTECTED);
}

#[test]
fn the_cache_campaign_finds_move_uncharged() {
    finds_in_caches(Mutant::MOVE_UNCHARGED);
}

#[test]
fn the_cache_campaign_finds_get_or_put_not_single_flight() {
    finds_in_caches(Mutant::GET_OR_PUT_NOT_SINGLE_FLIGHT);
}

/// A release that frees room and wakes no load waiting for it: the load succeeds only once its
/// wait times out with every thread blocked (the success-after-timeout check).
#[test]
fn the_cache_campaign_finds_lost_wakeup_room_release() {
    finds_in_caches(Mutant::LOST_WAKEUP_ROOM_RELEASE);
}

/// The first load looking for room leaves the line without waking the next.
#[test]
fn the_cache_campaign_finds_lost_wakeup_room_seeker_left() {
    finds_in_caches(Mutant::LOST_WAKEUP_ROOM_SEEKER_LEFT);
}

/// A budget debit (an eviction's) that wakes no load waiting for room.
#[test]
fn the_cache_campaign_finds_lost_wakeup_budget_debit() {
    finds_in_caches(Mutant::LOST_WAKEUP_BUDGET_DEBIT);
}

/// Keep-alive expiry that evicts a record a handle holds: the holder's lock then finds it gone
/// (A5).
#[test]
fn the_cache_campaign_finds_keep_alive_evicts_held() {
    finds_in_caches(Mutant::KEEP_ALIVE_EVICTS_HELD);
}

/// The defect the generated programs found first (SPEC 2.10): an eviction that keeps its
/// model refused a lease on it.
#[test]
fn the_campaign_finds_eviction_refuses_lease() {
    finds(Mutant::EVICTION_REFUSES_LEASE);
}

/// The defect the narrow nested stacks found (SPEC 2.11): a failed cold add left behind its
/// own queue entry that the layer below had evicted.
#[test]
fn the_campaign_finds_failed_add_keeps_stale_entry() {
    finds(Mutant::FAILED_ADD_KEEPS_STALE_ENTRY);
}

/// A lost wakeup that a wait on an epoch cannot see: the last lease of a victim ends without
/// waking the add that waits for room, which sleeps until its deadline and then succeeds.
#[test]
fn the_campaign_finds_lost_wakeup_lease_end() {
    finds(Mutant::LOST_WAKEUP_LEASE_END);
}

/// The same for a lifecycle lock released without waking the adds that wait for room.
#[test]
fn the_campaign_finds_lost_wakeup_guard_release() {
    finds(Mutant::LOST_WAKEUP_GUARD_RELEASE);
}

/// An alias registered through the warm check of its model id: the add answers `Warm` and
/// registers nothing under the alias (upstream's S7).
#[test]
fn the_campaign_finds_canonical_warm_check() {
    finds(Mutant::CANONICAL_WARM_CHECK);
}

/// The fairness property (SPEC 2.14, `F1`): a waiting add whose designated victim became idle
/// loses it to a lease that started after that, before the add ran again. It needs an add
/// waiting for a victim that a stream of leases keeps: rarer than most, so this campaign draws
/// 400 programs (the deterministic draw finds it past the 200th).
#[test]
fn the_campaign_finds_capacity_waiter_loses_race() {
    let start = Instant::now();
    let only = MutantSet::only(Mutant::CAPACITY_WAITER_LOSES_RACE);
    let failure = campaign_of(&program(), &only, budget_at_least(400))
        .expect_err("the generated program campaign missed capacity-waiter-loses-race");
    println!("found in {:.1}s:\n{failure}", start.elapsed().as_secs_f64());
}

/// Arrival order (SPEC 2.14, `F2`): an add that finds room takes it though an add that came
/// earlier waits for capacity.
#[test]
fn the_campaign_finds_capacity_waiters_barge() {
    finds(Mutant::CAPACITY_WAITERS_BARGE);
}

/// Arrival order in the RAM line (SPEC 2.14, 3.11, `F2`): a load reserves room though a load
/// that came earlier still looks for it.
#[test]
fn the_cache_campaign_finds_room_seekers_barge() {
    finds_in_caches(Mutant::ROOM_SEEKERS_BARGE);
}

/// A slot given back under a lock held on, S-O1h's shape as a program: `A`, pinned, fills one
/// of the two slots; T1 locks `B` and adds it under the lock, and `B`'s load fails; T2 adds `C`.
/// T1 keeps its lock while T2 waits, so only the failed load's own wake-up serves T2 in time.
/// With it silenced (or the slot freed by `remove_locked` never told), T2 gives up on its
/// deadline with a slot free, which no order of the calls explains: the history's check
/// places a refusal that gave up on a wait no earlier than that wait's deadline.
#[test]
fn a_slot_freed_under_a_held_lock_wakes_the_waiting_add() {
    let program = |under: Under, loads: Vec<Step>| Program {
        prefix: if under == Under::Add { vec![0] } else { vec![0, 1] },
        handed: Vec::new(),
        pins: vec![0],
        threads: vec![vec![ThreadOp::Locked(1, under)], vec![ThreadOp::Add(2)]],
        faults: Faults { loads: [Vec::new(), loads, Vec::new()], ..Faults::default() },
        nested: false,
        narrow: false,
        any_time: false,
        report_fault: None,
        overflow: false,
    };
    let cases = [
        (program(Under::Add, vec![Step::Fail]), Mutant::LOST_WAKEUP_CAPACITY_CLAIM_DROPPED),
        (program(Under::Remove, Vec::new()), Mutant::LOST_WAKEUP_SLOT_FORGOTTEN),
        (program(Under::Evict, Vec::new()), Mutant::LOST_WAKEUP_SLOT_FORGOTTEN),
    ];
    for (program, mutant) in cases {
        let fixed = check_program(&program, 200, &MutantSet::default());
        assert!(fixed.failure.is_none(), "{program:?} failed: {:?}", fixed.failure);
        let broken = check_program(&program, 200, &MutantSet::only(mutant));
        assert!(broken.failure.is_some(), "{program:?} passed with {mutant} on");
    }
}

/// Teeth: switches on every mutant of `resident`, one at a time, and reports which the campaign
/// finds without being told where. Not a pass/fail test (the campaign covers the manager stack
/// only so far); run it with `cargo test --release -p resident-proptests --test concurrent --
/// --ignored --nocapture`.
#[test]
#[ignore = "a report, not a check: run on demand"]
fn teeth() {
    let mut found = 0;
    // `RESIDENT_TEETH=a,b`: only these mutants.
    let only = std::env::var("RESIDENT_TEETH").ok();
    let chosen: Vec<Mutant> = Mutant::ALL
        .iter()
        .copied()
        .filter(|m| only.as_deref().is_none_or(|o| o.split(',').any(|n| n == m.name())))
        .collect();
    for &mutant in &chosen {
        let start = Instant::now();
        let only = MutantSet::only(mutant);
        let result = campaign(&program(), &only).and_then(|_| campaign(&cache_program(), &only));
        let verdict = match &result {
            Ok(Ran { schedules, .. }) => format!("missed ({schedules} schedules)"),
            Err(why) => format!("found: {}", why.lines().next().unwrap_or_default()),
        };
        found += usize::from(result.is_err());
        println!("{:<32} {:>6.1}s {verdict}", mutant.name(), start.elapsed().as_secs_f64());
    }
    println!("{found} of {} mutants found", chosen.len());
}

/// Replays one stored failure: with its mutant on, its schedule shows the same violation
/// again; with the mutant off (the bug fixed), the schedule passes. With
/// `RESIDENT_WRITE_FIXTURES=1` (after moving scheduling points) a failure that still shows the
/// same invariant broken, in other words, has its stored text rewritten.
fn replays_stored<P>(path: &std::path::Path, text: &str) -> Result<(), String>
where
    P: Generated + serde::Serialize + serde::de::DeserializeOwned,
{
    let mut stored: StoredFailure<P> = serde_json::from_str(text).expect("a stored failure");
    let mutant: Mutant =
        stored.mutant.as_deref().expect("stored failures name their mutant").parse().expect("known");
    let again = replay(&stored.program, &stored.schedule, &MutantSet::only(mutant)).expect("replays");
    let Some(violation) = again.violation else {
        return rerecorded(path, stored, mutant)
            .ok_or_else(|| format!("{}: the mutant's failure did not replay", path.display()));
    };
    let fixed = replay(&stored.program, &stored.schedule, &MutantSet::NONE).expect("replays");
    if fixed.violation.is_some() {
        let shown = format!("{}: fails without its mutant: {:?}", path.display(), fixed.violation);
        // A mutant-free replay that left the schedule (the code's scheduling points moved) and
        // then failed may fail for the checker's own reasons (stopped mid-unwind, say): searched
        // again, a schedule that fails only with the mutant is stored. One that followed the
        // schedule and failed is a regression, and stays one.
        return match fixed.diverged {
            Some(_) => rerecorded(path, stored, mutant).ok_or(shown),
            None => Err(shown),
        };
    }
    let now = violation.to_string();
    if now == stored.violation {
        return Ok(());
    }
    let tag = |v: &str| v.split(']').next().map(str::to_owned);
    if std::env::var_os("RESIDENT_WRITE_FIXTURES").is_some() && tag(&now) == tag(&stored.violation) {
        stored.violation = now;
        let json = serde_json::to_string_pretty(&stored).expect("serialisable");
        std::fs::write(path, json).expect("writable");
        return Ok(());
    }
    let shown = format!("{}: the replay shows\n{now}\ninstead of\n{}", path.display(), stored.violation);
    rerecorded(path, stored, mutant).ok_or(shown)
}

/// With `RESIDENT_WRITE_FIXTURES` set, searches the stored program's schedules again for its
/// mutant's failure (the schedules a checker explores move when the code's scheduling points
/// do) and stores the first it finds; `None` if the variable is unset, the program no longer
/// fails with its mutant, or fails without it.
fn rerecorded<P>(path: &std::path::Path, mut stored: StoredFailure<P>, mutant: Mutant) -> Option<()>
where
    P: Generated + serde::Serialize,
{
    std::env::var_os("RESIDENT_WRITE_FIXTURES")?;
    // Only a program that passes without its mutant is evidence of the mutant.
    if check_program(&stored.program, 1000, &MutantSet::NONE).failure.is_some() {
        return None;
    }
    let (checker, failure) = check_program(&stored.program, 1000, &MutantSet::only(mutant)).failure?;
    let schedule = failure.schedule?;
    // And the schedule stored fails with the mutant only.
    let fixed = replay(&stored.program, &schedule, &MutantSet::NONE).ok()?;
    if fixed.violation.is_some() {
        return None;
    }
    stored.schedule = schedule;
    stored.scheduler = checker.name().to_owned();
    stored.violation = failure.violation.to_string();
    std::fs::write(path, serde_json::to_string_pretty(&stored).ok()?).ok()
}

/// Every failing program stored under `fixtures/programs/` replays (see [`replays_stored`]).
#[test]
fn stored_failing_programs_replay() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../fixtures/programs");
    let (mut replayed, mut failures) = (0, Vec::new());
    for entry in std::fs::read_dir(&dir).expect("fixtures/programs exists") {
        let path = entry.expect("readable").path();
        if path.extension().is_none_or(|e| e != "json") {
            continue;
        }
        let text = std::fs::read_to_string(&path).expect("readable");
        let name = path.file_name().and_then(|n| n.to_str()).unwrap_or_default();
        let replayed_one = if name.starts_with(&format!("{}-", CacheProgram::KIND)) {
            replays_stored::<CacheProgram>(&path, &text)
        } else {
            replays_stored::<Program>(&path, &text)
        };
        failures.extend(replayed_one.err());
        replayed += 1;
    }
    assert!(
        failures.is_empty(),
        "{} stored program(s) did not replay:\n{}",
        failures.len(),
        failures.join("\n")
    );
    assert!(replayed >= 39, "expected the stored programs of thirty-nine mutants, found {replayed}");
}
