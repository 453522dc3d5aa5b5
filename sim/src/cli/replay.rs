//! `resident-sim replay FILE`: reproduce a stored failure exactly.

use std::path::Path;
use std::process::ExitCode;

use crate::registry::Registry;
use crate::replay_file::ReplayFile;
use crate::trace;

pub(super) fn run(path: &Path, registry: &Registry) -> ExitCode {
    let (report, file) = match ReplayFile::read(path).and_then(|file| Ok((file.replay_in(registry)?, file))) {
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
