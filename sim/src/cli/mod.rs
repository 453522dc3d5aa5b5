//! The `resident-sim` command line: list the catalogue, explore it, check the mutants, replay a
//! failure. `src/main.rs` is [`main`]; the subcommands live one per file.

mod explore;
mod mutants;
mod progress;
mod replay;

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use clap::{Parser, Subcommand};
use resident::mutants::Mutant;

use crate::registry::Registry;

/// The embedded defaults of the main job: shuttle executions per scenario and scheduler.
pub const DEFAULT_ITERATIONS: usize = 5000;
/// The embedded default seed of the shuttle schedulers.
pub const DEFAULT_SEED: u64 = 0x5eed;

#[derive(Parser)]
#[command(version, about = "Deterministic schedule exploration of resident")]
struct Cli {
    /// Print what the checkers print while they explore (each failing execution's panic
    /// report); quiet by default, as every failure is reported at the end.
    #[arg(long, global = true)]
    verbose: bool,
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
    /// Explore scenarios (all by default) on every core; exit 1 on any failure, leaving a
    /// replay file.
    Explore(explore::Args),
    /// Kill matrix: does every mutant make its scenario fail?
    Mutants(mutants::Args),
    /// Replay a failing schedule and say whether it reproduces.
    Replay {
        /// The replay file.
        file: PathBuf,
        /// Also draw the replayed execution as an SVG timeline into this file.
        #[arg(long, value_name = "OUT.svg")]
        svg: Option<PathBuf>,
    },
}

/// The stock command line: [`run`] over the built-in catalogue.
pub fn main() -> ExitCode {
    run(&Registry::catalogue())
}

/// Runs the command line of the process (`list`, `explore`, `mutants`, `replay`) over
/// `registry`: an application's own binary or test calls it with its own scenarios and
/// mutants.
pub fn run(registry: &Registry) -> ExitCode {
    run_from(std::env::args_os(), registry)
}

/// [`run`], naming itself `command` in the commands it suggests (`replay: {command} replay
/// FILE`): for a command line that runs as, say, `cargo run --example check --`.
pub fn run_as(command: &str, registry: &Registry) -> ExitCode {
    dispatch(std::env::args_os().collect(), command, registry)
}

/// [`run`] with the arguments given (the first is the program name, which the commands it
/// suggests use).
pub fn run_from<I, T>(args: I, registry: &Registry) -> ExitCode
where
    I: IntoIterator<Item = T>,
    T: Into<std::ffi::OsString> + Clone,
{
    let args: Vec<std::ffi::OsString> = args.into_iter().map(Into::into).collect();
    let name = args
        .first()
        .and_then(|a| std::path::Path::new(a).file_stem())
        .map_or_else(|| "resident-sim".to_owned(), |s| s.to_string_lossy().into_owned());
    dispatch(args, &name, registry)
}

/// Whether `args` (the first is the program name) is a command line the explorer accepts,
/// without running it: clap's usage error if not (help and version requests are errors too).
pub fn check_args<I, T>(args: I) -> Result<(), String>
where
    I: IntoIterator<Item = T>,
    T: Into<std::ffi::OsString> + Clone,
{
    Cli::try_parse_from(args).map(|_| ()).map_err(|e| e.to_string())
}

fn dispatch(args: Vec<std::ffi::OsString>, name: &str, registry: &Registry) -> ExitCode {
    let cli = match Cli::try_parse_from(args) {
        Ok(cli) => cli,
        Err(e) => {
            // Help and version print and succeed; a usage error prints and exits 2.
            let _ = e.print();
            return if e.use_stderr() { ExitCode::from(2) } else { ExitCode::SUCCESS };
        }
    };
    match cli.command {
        Command::List => {
            list(registry);
            ExitCode::SUCCESS
        }
        Command::Explore(args) => explore::run(&args, cli.verbose, registry, name),
        Command::Mutants(args) => mutants::run(&args, cli.verbose, registry),
        Command::Replay { file, svg } => replay::run(&file, svg.as_deref(), cli.verbose, registry),
    }
}

fn list(registry: &Registry) {
    for s in registry.scenarios() {
        let loom = match s.loom {
            Some(bound) if s.loom_mutants => format!("loom bound {bound}"),
            Some(bound) => format!("loom bound {bound}; its mutants under shuttle only: {}", s.no_loom),
            None => format!("not under loom: {}", s.no_loom),
        };
        println!("{:<8} {} [time {}; {loom}]", s.id, s.description, s.time.name());
    }
}

/// A seed in hex (`0x5eed`) or decimal (`24301`), as `--seed` reads it.
pub fn parse_seed(s: &str) -> Result<u64, String> {
    let parsed = match s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")) {
        Some(hex) => u64::from_str_radix(hex, 16),
        None => s.parse(),
    };
    parsed.map_err(|e| format!("{s:?} is not a seed (hex like 0x5eed, or decimal): {e}"))
}

/// A duration such as `60s`, `2m` or `1m30s`, as `--time` reads it.
pub fn parse_duration(s: &str) -> Result<Duration, String> {
    humantime::parse_duration(s).map_err(|e| format!("{s:?} is not a duration (like 60s, 2m, 1m30s): {e}"))
}

/// The worker threads to use: `jobs`, or one per core.
fn threads(jobs: Option<usize>) -> usize {
    jobs.unwrap_or_else(|| crate::explore::batch::Batch::new().threads).max(1)
}

/// The mutants `named`, then those in `RESIDENT_MUTANTS` (comma-separated), by name among
/// those `registry` knows.
fn with_env_mutants(named: &[String], registry: &Registry) -> Result<Vec<Mutant>, String> {
    let mut mutants = Vec::new();
    for name in named {
        mutants.push(registry.parse_mutant(name).map_err(|e| format!("--mutant: {e}"))?);
    }
    let Ok(list) = std::env::var("RESIDENT_MUTANTS") else { return Ok(mutants) };
    for name in list.split(',').filter(|s| !s.is_empty()) {
        mutants.push(registry.parse_mutant(name).map_err(|e| format!("RESIDENT_MUTANTS: {e}"))?);
    }
    Ok(mutants)
}
