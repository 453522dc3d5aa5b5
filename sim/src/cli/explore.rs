//! `resident-sim explore`: the catalogue (or some of it) under shuttle random, PCT and loom, on
//! every core, optionally within a time budget; a summary table, the executions per second of
//! each checker, a JSON report on request, and a replay file per failure.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use serde::Serialize;

use super::progress::{Progress, Quiet};
use super::{DEFAULT_ITERATIONS, SchedulerArg, parse_duration, parse_seed, threads, with_env_mutants};
use crate::explore::batch::{Batch, Job, Throughput, explore_batch, throughput};
use crate::explore::{Checker, Outcome, Plan};
use crate::mutant_set::MutantSet;
use crate::registry::Registry;
use crate::replay_file::ReplayFile;
use crate::scenario::Scenario;
use crate::timeline::Timeline;

#[derive(clap::Args)]
pub(super) struct Args {
    /// Scenario id to explore (repeatable); default: the whole catalogue.
    #[arg(long = "scenario", value_name = "ID")]
    scenarios: Vec<String>,
    /// Executions per scenario and shuttle scheduler.
    #[arg(long, default_value_t = DEFAULT_ITERATIONS)]
    iterations: usize,
    /// Which scheduler: random, pct, loom (exhaustive, bounded) or all.
    #[arg(long, value_enum, default_value = "all")]
    scheduler: SchedulerArg,
    /// Seed of the shuttle schedulers, hex (0x5eed) or decimal.
    #[arg(long, default_value = "0x5eed", value_parser = parse_seed)]
    seed: u64,
    /// Switch a historical bug back on (repeatable; also RESIDENT_MUTANTS=a,b).
    #[arg(long = "mutant", value_name = "NAME")]
    mutants: Vec<String>,
    /// Where failing schedules are written.
    #[arg(long, default_value = "fixtures/failures")]
    out: PathBuf,
    /// Also write the report as JSON to FILE: per scenario and scheduler the executions, the
    /// executions per second, the failures and the wall time; the totals per scheduler.
    #[arg(long, value_name = "FILE")]
    json: Option<PathBuf>,
    /// Time-box the whole run (60s, 2m, 1m30s): each exploration gets an even share of what is
    /// left as it starts, and stops there (a loom search cut short is not exhaustive).
    #[arg(long, value_name = "DURATION", value_parser = parse_duration)]
    time: Option<Duration>,
    /// loom's preemption bound for every selected scenario, instead of each one's own (`just
    /// loom` explores the lease word's kernel, M-L3, at 3 this way).
    #[arg(long, value_name = "N")]
    loom_bound: Option<usize>,
    /// Worker threads; default: one per core.
    #[arg(long, value_name = "N")]
    jobs: Option<usize>,
}

pub(super) fn run(args: &Args, verbose: bool, registry: &Registry, name: &str) -> ExitCode {
    let selected: Vec<&Scenario> = if args.scenarios.is_empty() {
        registry.scenarios().iter().collect()
    } else {
        match args.scenarios.iter().map(|id| registry.find(id).ok_or(id)).collect::<Result<_, _>>() {
            Ok(selected) => selected,
            Err(id) => {
                eprintln!("unknown scenario {id:?}; `list` shows the scenarios");
                return ExitCode::from(2);
            }
        }
    };
    let mutants = match with_env_mutants(&args.mutants, registry) {
        Ok(mutants) => mutants,
        Err(e) => {
            eprintln!("{e}");
            return ExitCode::from(2);
        }
    };
    let mut plan =
        Plan::new(args.iterations, args.seed).with_mutants(mutants.into_iter().collect::<MutantSet>());
    plan.preemption_bound = args.loom_bound;
    let checkers: &[Checker] = match args.scheduler {
        SchedulerArg::Random => &[Checker::Random],
        SchedulerArg::Pct => &[Checker::Pct],
        SchedulerArg::Loom => &[Checker::Loom],
        SchedulerArg::All => &[Checker::Random, Checker::Pct, Checker::Loom],
    };
    let jobs: Vec<Job> = selected
        .iter()
        .flat_map(|s| {
            checkers.iter().filter(|c| **c != Checker::Loom || s.loom.is_some()).map(move |c| (*s, *c))
        })
        .collect();
    let batch = Batch { threads: threads(args.jobs), time: args.time };
    let start = Instant::now();
    let progress = Progress::new(jobs.len(), true);
    let quiet = Quiet::new(verbose);
    let outcomes = explore_batch(&jobs, &plan, batch, |o, done| progress.finished(done, &line(o)));
    drop(quiet);
    progress.finish();
    let wall = start.elapsed();
    summary(&outcomes, wall, batch.threads);
    if let Some(path) = &args.json {
        let written = serde_json::to_string_pretty(&Report::new(&outcomes, wall, batch.threads, &plan))
            .map_err(std::io::Error::other)
            .and_then(|json| std::fs::write(path, json + "\n"));
        if let Err(e) = written {
            eprintln!("could not write {}: {e}", path.display());
            return ExitCode::from(2);
        }
    }
    if failures(&outcomes, &plan, &args.out, name) { ExitCode::FAILURE } else { ExitCode::SUCCESS }
}

/// One finished exploration, in a line.
fn line(o: &Outcome) -> String {
    let verdict = if o.failure.is_some() { "FAILED" } else { "ok" };
    format!(
        "{} {}: {} executions in {:.2} s, {verdict}",
        o.scenario,
        o.checker,
        o.iterations,
        o.elapsed.as_secs_f64()
    )
}

/// The table, then each checker's executions and rate, then the totals.
fn summary(outcomes: &[Outcome], wall: Duration, threads: usize) {
    println!("{:<8} {:<7} {:>10} {:>8} {:>9}", "scenario", "sched", "iterations", "failures", "time");
    for o in outcomes {
        let failed = usize::from(o.failure.is_some());
        println!(
            "{:<8} {:<7} {:>10} {:>8} {:>8.2}s",
            o.scenario,
            o.checker,
            o.iterations,
            failed,
            o.elapsed.as_secs_f64()
        );
    }
    println!();
    for (checker, t) in throughput(outcomes) {
        println!(
            "{checker:<7} {:>10} executions, {:>8.0} executions/s per thread",
            t.executions,
            t.per_second()
        );
    }
    let executions: usize = outcomes.iter().map(|o| o.iterations).sum();
    let failed = outcomes.iter().filter(|o| o.failure.is_some()).count();
    let wall_s = wall.as_secs_f64();
    println!(
        "total   {executions:>10} executions in {wall_s:.1} s wall on {threads} threads ({:.0}/s); {failed} of {} explorations failed",
        executions as f64 / wall_s.max(f64::EPSILON),
        outcomes.len()
    );
}

/// Prints each failure with its trace and writes its replay file; whether any failed.
fn failures(outcomes: &[Outcome], plan: &Plan, out: &std::path::Path, name: &str) -> bool {
    let mut failed = false;
    for o in outcomes {
        let Some(failure) = &o.failure else { continue };
        failed = true;
        println!(
            "\n{} / {} failed at execution {}: {}",
            o.scenario, o.checker, failure.iteration, failure.violation
        );
        print!(
            "{}",
            Timeline::new(&failure.trace, Some(&failure.violation)).lanes(super::replay::LANES_WIDTH)
        );
        match ReplayFile::from_outcome(o, plan).map(|file| file.write_to(out)) {
            Some(Ok(path)) => println!("replay: {name} replay {}", path.display()),
            Some(Err(e)) => eprintln!("could not write the replay file: {e}"),
            None => {
                println!("(loom failure: re-run `{name} explore --scheduler loom --scenario {}`)", o.scenario)
            }
        }
    }
    failed
}

/// `explore --json`: the run's report.
#[derive(Serialize)]
struct Report {
    wall_s: f64,
    threads: usize,
    /// The shuttle schedulers' seed, in hex as the command line takes it.
    seed: String,
    /// Executions per scenario and shuttle scheduler asked for.
    iterations: usize,
    mutants: Vec<String>,
    executions: usize,
    executions_per_s: f64,
    failures: usize,
    schedulers: BTreeMap<&'static str, Rate>,
    explorations: Vec<Row>,
}

/// A checker's totals.
#[derive(Serialize)]
struct Rate {
    executions: usize,
    /// Per worker thread.
    executions_per_s: f64,
    busy_s: f64,
}

/// One exploration.
#[derive(Serialize)]
struct Row {
    scenario: &'static str,
    scheduler: Checker,
    executions: usize,
    executions_per_s: f64,
    failures: usize,
    wall_s: f64,
    violation: Option<String>,
}

impl Report {
    fn new(outcomes: &[Outcome], wall: Duration, threads: usize, plan: &Plan) -> Self {
        let rate = |t: Throughput| Rate {
            executions: t.executions,
            executions_per_s: t.per_second(),
            busy_s: t.busy_s,
        };
        let explorations: Vec<Row> = outcomes
            .iter()
            .map(|o| {
                let wall_s = o.elapsed.as_secs_f64();
                Row {
                    scenario: o.scenario,
                    scheduler: o.checker,
                    executions: o.iterations,
                    executions_per_s: if wall_s > 0.0 { o.iterations as f64 / wall_s } else { 0.0 },
                    failures: usize::from(o.failure.is_some()),
                    wall_s,
                    violation: o.failure.as_ref().map(|f| f.violation.to_string()),
                }
            })
            .collect();
        let executions = explorations.iter().map(|r| r.executions).sum();
        Self {
            wall_s: wall.as_secs_f64(),
            threads,
            seed: format!("{:#x}", plan.seed),
            iterations: plan.iterations,
            mutants: plan.mutants.iter().map(|m| m.name().to_owned()).collect(),
            executions,
            executions_per_s: executions as f64 / wall.as_secs_f64().max(f64::EPSILON),
            failures: explorations.iter().map(|r| r.failures).sum(),
            schedulers: throughput(outcomes).into_iter().map(|(c, t)| (c.name(), rate(t))).collect(),
            explorations,
        }
    }
}
