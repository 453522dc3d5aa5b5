//! `resident-sim mutants`: the kill matrix — does every mutant make the scenario that targets
//! it fail? — on every core, optionally for some scenarios or mutants only.

use std::path::PathBuf;
use std::process::ExitCode;

use resident::mutants::Mutant;

use super::progress::{Progress, Quiet};
use super::{DEFAULT_SEED, parse_seed, threads};
use crate::explore::batch::parallel;
use crate::kill::{self, Kill};
use crate::registry::Registry;
use crate::scenario::Scenario;

#[derive(clap::Args)]
pub(super) struct Args {
    /// Print a JSON array instead of a table.
    #[arg(long)]
    json: bool,
    /// Executions per shuttle scheduler before a mutant counts as surviving.
    #[arg(long, default_value_t = 5000)]
    budget: usize,
    /// Seed of the shuttle schedulers, hex (0x5eed) or decimal.
    #[arg(long, default_value_t = DEFAULT_SEED, value_parser = parse_seed)]
    seed: u64,
    /// Also write each kill's replay file into this folder.
    #[arg(long, value_name = "DIR")]
    write: Option<PathBuf>,
    /// Only the pairs of this scenario (repeatable).
    #[arg(long = "scenario", value_name = "ID")]
    scenarios: Vec<String>,
    /// Only the pairs of this mutant (repeatable).
    #[arg(long = "mutant", value_name = "NAME")]
    mutants: Vec<String>,
    /// Worker threads; default: one per core.
    #[arg(long, value_name = "N")]
    jobs: Option<usize>,
}

pub(super) fn run(args: &Args, verbose: bool, registry: &Registry) -> ExitCode {
    let wanted: Vec<Mutant> = match args.mutants.iter().map(|name| registry.parse_mutant(name)).collect() {
        Ok(wanted) => wanted,
        Err(e) => {
            eprintln!("{e}");
            return ExitCode::from(2);
        }
    };
    let pairs: Vec<(Mutant, &Scenario)> = registry
        .pairs()
        .filter(|(m, s)| {
            (args.scenarios.is_empty() || args.scenarios.iter().any(|id| id == s.id))
                && (wanted.is_empty() || wanted.contains(m))
        })
        .collect();
    if pairs.is_empty() {
        eprintln!("no mutant pair matches the filters; `list` shows the scenarios");
        return ExitCode::from(2);
    }
    // With `--json`, standard output is the report alone: no progress lines in it.
    let progress = Progress::new(pairs.len(), !args.json);
    let quiet = Quiet::new(verbose);
    let order: Vec<usize> = (0..pairs.len()).collect();
    let kills = parallel(
        &pairs,
        &order,
        threads(args.jobs),
        |_, &(mutant, scenario)| kill::kill(mutant, scenario, args.budget, args.seed),
        |k: &Kill, done| {
            let verdict = if k.killed { "killed" } else { "SURVIVED" };
            progress.finished(done, &format!("{} by {}: {verdict}", k.mutant, k.scenario));
        },
    );
    drop(quiet);
    progress.finish();
    if let Some(dir) = &args.write {
        for file in kills.iter().filter_map(Kill::replay_file) {
            if let Err(e) = file.write_to(dir) {
                eprintln!("could not write a replay file: {e}");
            }
        }
    }
    if args.json {
        println!("{}", serde_json::to_string_pretty(&kills).expect("kills serialize"));
    } else {
        table(&kills);
    }
    let good = |k: &Kill| k.killed && (!k.is_lost_wakeup() || (k.random.is_some() && k.pct.is_some()));
    if kills.iter().all(good) { ExitCode::SUCCESS } else { ExitCode::FAILURE }
}

fn table(kills: &[Kill]) {
    let at = |n: Option<usize>| n.map_or_else(|| "-".to_owned(), |n| n.to_string());
    println!("{:<30} {:<8} {:<7} {:>8} {:>8}", "mutant", "scenario", "killed", "random", "pct");
    for k in kills {
        let killed = if k.killed { "yes" } else { "NO" };
        println!("{:<30} {:<8} {killed:<7} {:>8} {:>8}", k.mutant, k.scenario, at(k.random), at(k.pct));
    }
}
