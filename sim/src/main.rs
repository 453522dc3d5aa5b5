//! `resident-sim`: explore the scenario catalogue, check the mutants, replay failures.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};
use indicatif::{ProgressBar, ProgressStyle};
use resident::mutants::Mutant;
use resident_sim::explore::{self, Checker, Outcome, Plan};
use resident_sim::kill;
use resident_sim::mutant_set::MutantSet;
use resident_sim::replay_file::ReplayFile;
use resident_sim::scenarios::{self, CATALOGUE, Scenario};
use resident_sim::trace;

/// The embedded defaults of the main job.
const DEFAULT_ITERATIONS: usize = 1000;
const DEFAULT_SEED: u64 = 0x5eed;

#[derive(Parser)]
#[command(version, about = "Deterministic schedule exploration of resident")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Clone, Copy, clap::ValueEnum)]
enum SchedulerArg {
    Random,
    Pct,
    Loom,
    All,
}

#[derive(Subcommand)]
enum Command {
    /// List the scenario catalogue: one id per line, then its description, when its deadlines
    /// fire, and its loom bound (or why it does not run under loom).
    List,
    /// Explore scenarios (all by default); exit 1 on any failure, leaving a replay file.
    Explore {
        /// Scenario id to explore (repeatable); default: the whole catalogue.
        #[arg(long = "scenario", value_name = "ID")]
        scenarios: Vec<String>,
        /// Executions per scenario and shuttle scheduler.
        #[arg(long, default_value_t = DEFAULT_ITERATIONS)]
        iterations: usize,
        /// Which scheduler: random, pct, loom (exhaustive, bounded) or all.
        #[arg(long, value_enum, default_value = "all")]
        scheduler: SchedulerArg,
        /// Seed of the shuttle schedulers.
        #[arg(long, default_value_t = DEFAULT_SEED)]
        seed: u64,
        /// Switch a historical bug back on (repeatable; also RESIDENT_MUTANTS=a,b).
        #[arg(long = "mutant", value_name = "NAME")]
        mutants: Vec<Mutant>,
        /// Where failing schedules are written.
        #[arg(long, default_value = "fixtures/failures")]
        out: PathBuf,
    },
    /// Kill matrix: does every mutant make its scenario fail?
    Mutants {
        /// Print a JSON array instead of a table.
        #[arg(long)]
        json: bool,
        /// Executions per shuttle scheduler before a mutant counts as surviving.
        #[arg(long, default_value_t = 5000)]
        budget: usize,
        /// Seed of the shuttle schedulers.
        #[arg(long, default_value_t = DEFAULT_SEED)]
        seed: u64,
        /// Also write each kill's replay file into this folder.
        #[arg(long, value_name = "DIR")]
        write: Option<PathBuf>,
    },
    /// Replay a failing schedule and say whether it reproduces.
    Replay {
        /// The replay file.
        file: PathBuf,
    },
}

fn main() -> ExitCode {
    match Cli::parse().command {
        Command::List => {
            for s in CATALOGUE {
                let loom = match s.loom {
                    Some(bound) if s.loom_mutants => format!("loom bound {bound}"),
                    Some(bound) => {
                        format!("loom bound {bound}; its mutants under shuttle only: {}", s.no_loom)
                    }
                    None => format!("not under loom: {}", s.no_loom),
                };
                println!("{:<8} {} [time {}; {loom}]", s.id, s.description, s.time.name());
            }
            ExitCode::SUCCESS
        }
        Command::Explore { scenarios, iterations, scheduler, seed, mutants, out } => {
            explore_cmd(&scenarios, iterations, scheduler, seed, mutants, &out)
        }
        Command::Mutants { json, budget, seed, write } => mutants_cmd(json, budget, seed, write),
        Command::Replay { file } => replay_cmd(&file),
    }
}

fn env_mutants() -> Result<Vec<Mutant>, String> {
    let Ok(list) = std::env::var("RESIDENT_MUTANTS") else { return Ok(Vec::new()) };
    list.split(',').filter(|s| !s.is_empty()).map(|s| s.parse().map_err(|e| format!("{e}"))).collect()
}

fn explore_cmd(
    ids: &[String],
    iterations: usize,
    scheduler: SchedulerArg,
    seed: u64,
    mut mutants: Vec<Mutant>,
    out: &std::path::Path,
) -> ExitCode {
    let selected: Vec<&'static Scenario> = if ids.is_empty() {
        CATALOGUE.iter().collect()
    } else {
        match ids.iter().map(|id| scenarios::find(id).ok_or(id)).collect::<Result<_, _>>() {
            Ok(selected) => selected,
            Err(id) => {
                eprintln!("unknown scenario {id:?}; `resident-sim list` shows the catalogue");
                return ExitCode::from(2);
            }
        }
    };
    match env_mutants() {
        Ok(extra) => mutants.extend(extra),
        Err(e) => {
            eprintln!("RESIDENT_MUTANTS: {e}");
            return ExitCode::from(2);
        }
    }
    let plan = Plan::new(iterations, seed).with_mutants(mutants.iter().copied().collect::<MutantSet>());
    let checkers: &[Checker] = match scheduler {
        SchedulerArg::Random => &[Checker::Random],
        SchedulerArg::Pct => &[Checker::Pct],
        SchedulerArg::Loom => &[Checker::Loom],
        SchedulerArg::All => &[Checker::Random, Checker::Pct, Checker::Loom],
    };
    let jobs: Vec<(&'static Scenario, Checker)> = selected
        .iter()
        .flat_map(|s| {
            checkers.iter().filter(|c| **c != Checker::Loom || s.loom.is_some()).map(move |c| (*s, *c))
        })
        .collect();
    let bar = ProgressBar::new(jobs.len() as u64)
        .with_style(ProgressStyle::with_template("{bar:30} {pos}/{len} {msg}").expect("static template"));
    let mut outcomes: Vec<Outcome> = Vec::new();
    for (scenario, checker) in jobs {
        bar.set_message(format!("{} {}", scenario.id, checker));
        outcomes.push(explore::explore(scenario, checker, plan.clone()));
        bar.inc(1);
    }
    bar.finish_and_clear();

    println!("{:<8} {:<7} {:>10} {:>8} {:>9}", "scenario", "sched", "iterations", "failures", "time");
    for o in &outcomes {
        println!(
            "{:<8} {:<7} {:>10} {:>8} {:>8.2}s",
            o.scenario,
            o.checker,
            o.iterations,
            usize::from(o.failure.is_some()),
            o.elapsed.as_secs_f64()
        );
    }
    let mut failed = false;
    for o in &outcomes {
        let Some(failure) = &o.failure else { continue };
        failed = true;
        println!(
            "\n{} / {} failed at execution {}: {}",
            o.scenario, o.checker, failure.iteration, failure.violation
        );
        print!("{}", trace::render(&failure.trace));
        match ReplayFile::from_outcome(o, &plan).map(|file| file.write_to(out)) {
            Some(Ok(path)) => println!("replay: resident-sim replay {}", path.display()),
            Some(Err(e)) => eprintln!("could not write the replay file: {e}"),
            None => println!(
                "(loom failure: re-run `resident-sim explore --scheduler loom --scenario {}`)",
                o.scenario
            ),
        }
    }
    if failed { ExitCode::FAILURE } else { ExitCode::SUCCESS }
}

fn mutants_cmd(json: bool, budget: usize, seed: u64, write: Option<PathBuf>) -> ExitCode {
    let pairs: Vec<_> = kill::pairs().collect();
    let bar = ProgressBar::new(pairs.len() as u64);
    let kills: Vec<kill::Kill> = pairs
        .into_iter()
        .map(|(mutant, scenario)| {
            let k = kill::kill(mutant, scenario, budget, seed);
            bar.inc(1);
            k
        })
        .collect();
    bar.finish_and_clear();
    if let Some(dir) = write {
        for k in &kills {
            let Some((failure, plan)) = &k.failure else { continue };
            let outcome = Outcome {
                scenario: k.scenario,
                checker: k.checker.expect("a kill has a checker"),
                iterations: failure.iteration,
                elapsed: Default::default(),
                failure: Some(failure.clone()),
            };
            if let Some(Err(e)) = ReplayFile::from_outcome(&outcome, plan).map(|f| f.write_to(&dir)) {
                eprintln!("could not write a replay file: {e}");
            }
        }
    }
    if json {
        println!("{}", serde_json::to_string_pretty(&kills).expect("kills serialize"));
    } else {
        let at = |n: Option<usize>| n.map_or_else(|| "-".to_owned(), |n| n.to_string());
        println!("{:<30} {:<8} {:<7} {:>8} {:>8}", "mutant", "scenario", "killed", "random", "pct");
        for k in &kills {
            println!(
                "{:<30} {:<8} {:<7} {:>8} {:>8}",
                k.mutant,
                k.scenario,
                if k.killed { "yes" } else { "NO" },
                at(k.random),
                at(k.pct)
            );
        }
    }
    let good = |k: &kill::Kill| k.killed && (!k.is_lost_wakeup() || (k.random.is_some() && k.pct.is_some()));
    if kills.iter().all(good) { ExitCode::SUCCESS } else { ExitCode::FAILURE }
}

fn replay_cmd(path: &std::path::Path) -> ExitCode {
    let report = match ReplayFile::read(path).and_then(|file| Ok((file.replay()?, file))) {
        Ok(report) => report,
        Err(e) => {
            eprintln!("{e}");
            return ExitCode::from(2);
        }
    };
    let (report, file) = report;
    println!(
        "scenario {} ({}), mutant {}",
        file.scenario,
        file.scheduler,
        file.mutant.as_deref().unwrap_or("none")
    );
    print!("{}", trace::render(&report.replayed.trace));
    if let Some(d) = &report.replayed.diverged {
        println!("diverged from the recorded schedule: {d}");
    }
    match (&report.replayed.violation, report.reproduced) {
        (Some(v), true) => {
            println!("reproduced: {v}");
            ExitCode::FAILURE
        }
        (Some(v), false) => {
            println!("failed differently: {v} (recorded: {})", file.violation);
            ExitCode::FAILURE
        }
        (None, _) => {
            println!("passes now (recorded: {})", file.violation);
            ExitCode::SUCCESS
        }
    }
}
