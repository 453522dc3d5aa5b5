//! Reading `core/src` as text, for the tests that hold its files to a rule.

use std::path::{Path, PathBuf};

/// Every `.rs` file at or under `path`.
pub(crate) fn rust_files(path: &Path, out: &mut Vec<PathBuf>) {
    if path.is_dir() {
        for entry in std::fs::read_dir(path).expect("readable source folder") {
            rust_files(&entry.expect("readable entry").path(), out);
        }
    } else if path.extension().is_some_and(|e| e == "rs") {
        out.push(path.to_owned());
    }
}
