//! The house rules of `core/src`, read as text: files split by concept stay small enough to read
//! (no file over 500 lines, no function over 60), and a long file says where each group of its
//! methods begins (a section divider before each top-level `impl` block).

use std::path::{Path, PathBuf};

use crate::source::rust_files;

const MAX_FILE: usize = 500;
const MAX_FN: usize = 60;
/// Files longer than this need section dividers.
const SECTIONED: usize = 200;
/// An `impl` block longer than this is a group of methods that needs its own section.
const GROUP: usize = 30;

fn files() -> (PathBuf, Vec<PathBuf>) {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    files.sort();
    assert!(files.len() > 50, "found only {} files: is the path stale?", files.len());
    (src, files)
}

fn name(src: &Path, file: &Path) -> String {
    file.strip_prefix(src).unwrap_or(file).display().to_string()
}

/// A section divider: `// ---- Title ----…`, or the section of historical bugs that closes a
/// file (see `mutant_sites.rs`).
fn is_divider(line: &str) -> bool {
    let line = line.trim_start();
    line.starts_with("// ---- ") || line.starts_with("// Historical bugs:")
}

/// Whether `line` opens a top-level `impl` or trait block with a body.
fn opens_group(line: &str) -> bool {
    let trait_ = ["pub trait ", "pub(crate) trait ", "trait "].iter().any(|t| line.starts_with(t));
    (line.starts_with("impl") || trait_) && !line.trim_end().ends_with("{}")
}

#[test]
fn no_file_over_500_lines() {
    let (src, files) = files();
    let long: Vec<String> = files
        .iter()
        .map(|f| (name(&src, f), std::fs::read_to_string(f).expect("readable source file").lines().count()))
        .filter(|(_, n)| *n > MAX_FILE)
        .map(|(f, n)| format!("{f}: {n} lines"))
        .collect();
    assert!(long.is_empty(), "files over {MAX_FILE} lines: {long:#?}");
}

/// Functions with a body: from the `fn` line to the closing brace at its indentation.
#[test]
fn no_function_over_60_lines() {
    let (src, files) = files();
    let mut long = Vec::new();
    for file in &files {
        let text = std::fs::read_to_string(file).expect("readable source file");
        let lines: Vec<&str> = text.lines().collect();
        for (at, line) in lines.iter().enumerate() {
            let trimmed = line.trim_start();
            let head = ["pub(crate) fn ", "pub(super) fn ", "pub fn ", "fn ", "const fn ", "pub const fn "];
            if !head.iter().any(|h| trimmed.starts_with(h)) || trimmed.ends_with(';') {
                continue;
            }
            let indent = line.len() - trimmed.len();
            let end = lines[at + 1..].iter().position(|l| {
                let t = l.trim_start();
                l.len() - t.len() == indent && t.starts_with('}')
            });
            // A declaration spread over several lines and ending in `;` has no body.
            let declared =
                lines[at..].iter().take_while(|l| !l.contains('{')).any(|l| l.trim_end().ends_with(';'));
            if let Some(end) = end.filter(|_| !declared)
                && end + 2 > MAX_FN
            {
                long.push(format!("{}:{}: {} lines: {}", name(&src, file), at + 1, end + 2, trimmed));
            }
        }
    }
    assert!(long.is_empty(), "functions over {MAX_FN} lines: {long:#?}");
}

/// In a file over 200 lines, every long top-level `impl` or trait block (a group of methods,
/// over 30 lines) has a section divider between it and the previous long one (or the top of the file).
/// Short ones (`Debug`, `Drop`, `From`, …) sit in the section of their type.
#[test]
fn long_files_are_sectioned() {
    let (src, files) = files();
    let mut missing = Vec::new();
    for file in &files {
        let text = std::fs::read_to_string(file).expect("readable source file");
        let lines: Vec<&str> = text.lines().collect();
        if lines.len() <= SECTIONED {
            continue;
        }
        let mut divided = false;
        for (at, line) in lines.iter().enumerate() {
            if is_divider(line) {
                divided = true;
            } else if opens_group(line) {
                let len = lines[at + 1..].iter().position(|l| l.starts_with('}')).unwrap_or(0) + 2;
                if len <= GROUP {
                    continue;
                }
                if !divided {
                    missing.push(format!("{}:{}: {line}", name(&src, file), at + 1));
                }
                divided = false;
            }
        }
    }
    assert!(
        missing.is_empty(),
        "groups of methods with no section divider since the previous one: {missing:#?}"
    );
}
