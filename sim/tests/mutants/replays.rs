//! Replays every stored schedule under `fixtures/replays/` (explore writes new failures to the
//! untracked `fixtures/failures/`; move one here to keep it as a regression).
//!
//! A file recorded with a mutant on must reproduce its violation exactly (the scenario still
//! catches that bug, deterministically), and pass with the mutant off (the schedule alone is no
//! failure: the bug is). A file recorded without a mutant is a real failure
//! that was fixed since: its replay must pass.

use std::path::{Path, PathBuf};

use resident_sim::replay_file::ReplayFile;

fn stored() -> Vec<PathBuf> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../fixtures");
    let mut files: Vec<PathBuf> = std::fs::read_dir(root.join("replays"))
        .expect("fixtures/replays exists")
        .map(|entry| entry.expect("readable fixtures folder").path())
        .filter(|p| p.extension().is_some_and(|e| e == "json"))
        .collect();
    files.sort();
    files
}

#[test]
fn every_stored_replay_reproduces() {
    let files = stored();
    assert!(!files.is_empty(), "no stored replay under fixtures/");
    for path in files {
        let file = ReplayFile::read(&path).unwrap_or_else(|e| panic!("{e}"));
        let report = file.replay().unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        if file.mutant.is_some() {
            assert!(
                report.reproduced,
                "{}: replay gave {:?} (diverged: {:?}), recorded {}",
                path.display(),
                report.replayed.violation,
                report.replayed.diverged,
                file.violation
            );
            // The same schedule with the bug off passes (where the fixed code leaves the
            // schedule, the replay goes on round-robin).
            let fixed = ReplayFile { mutant: None, ..file.clone() };
            let report = fixed.replay().unwrap_or_else(|e| panic!("{}: {e}", path.display()));
            assert_eq!(report.replayed.violation, None, "{} fails with its mutant off", path.display());
        } else {
            assert_eq!(report.replayed.violation, None, "{} still fails", path.display());
        }
        println!("{}: ok", path.display());
    }
}

#[test]
fn a_corrupt_replay_file_is_a_typed_error() {
    let dir = std::env::temp_dir().join(format!("resident-sim-corrupt-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let path = dir.join("bad.json");
    std::fs::write(&path, "{ not json").expect("write");
    assert!(ReplayFile::read(&path).is_err());
    let _ = std::fs::remove_dir_all(dir);
}
