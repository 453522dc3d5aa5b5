//! `resident-sim replay FILE`: reproduce a stored failure exactly.

use std::path::Path;
use std::process::ExitCode;

use super::progress::Quiet;
use crate::registry::Registry;
use crate::replay_file::ReplayFile;
use crate::timeline::Timeline;

/// How wide the lanes of a trace are drawn, in characters.
pub(super) const LANES_WIDTH: usize = 160;

pub(super) fn run(path: &Path, svg: Option<&Path>, verbose: bool, registry: &Registry) -> ExitCode {
    let quiet = Quiet::new(verbose);
    let replayed = ReplayFile::read(path).and_then(|file| Ok((file.replay_in(registry)?, file)));
    drop(quiet);
    let (report, file) = match replayed {
        Ok(read) => read,
        Err(e) => {
            eprintln!("{e}");
            return ExitCode::from(2);
        }
    };
    println!(
        "scenario {} ({}), mutant {}",
        file.scenario,
        file.scheduler,
        file.mutant.as_deref().unwrap_or("none")
    );
    let timeline = Timeline::new(&report.replayed.trace, report.replayed.violation.as_ref());
    print!("{}", timeline.lanes(LANES_WIDTH));
    if let Some(out) = svg {
        match std::fs::write(out, timeline.svg()) {
            Ok(()) => println!("timeline: {}", out.display()),
            Err(e) => {
                eprintln!("could not write {}: {e}", out.display());
                return ExitCode::from(2);
            }
        }
    }
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
