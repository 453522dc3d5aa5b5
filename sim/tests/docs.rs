//! The project's own contract resolves every id the project names: `docs/spec.md` defines every
//! `SPEC x.y` cited in code, tests and prose, and every invariant id the checkers report;
//! `docs/catalogue.md` is the scenario catalogue, generated from it (run with
//! `RESIDENT_WRITE_DOCS=1` to regenerate).

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use resident_sim::scenarios::CATALOGUE;

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// The files that may cite the contract: sources, tests, examples, prose, stored replays.
fn cited_in() -> Vec<PathBuf> {
    fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
        let Ok(entries) = std::fs::read_dir(dir) else { return };
        for entry in entries.flatten() {
            let path = entry.path();
            let name = path.file_name().and_then(|n| n.to_str()).unwrap_or_default();
            if path.is_dir() {
                if !matches!(name, "target" | ".git" | "models" | "failures") {
                    walk(&path, out);
                }
            } else if matches!(path.extension().and_then(|e| e.to_str()), Some("rs" | "md" | "json")) {
                out.push(path);
            }
        }
    }
    let mut out = Vec::new();
    for dir in ["core", "sim", "proptests", "serve", "fixtures"] {
        walk(&root().join(dir), &mut out);
    }
    for file in ["README.md", "BENCHMARKS.md", "CHANGELOG.md"] {
        out.push(root().join(file));
    }
    out
}

/// Section `x` and item `x.y` of the spec, as numbered there (`## x.` headings, `y.` items).
fn spec_numbers(spec: &str) -> BTreeSet<String> {
    let mut numbers = BTreeSet::new();
    let mut section = None;
    for line in spec.lines() {
        if let Some(rest) = line.strip_prefix("## ") {
            section = rest.split('.').next().and_then(|n| n.trim().parse::<u32>().ok());
            numbers.extend(section.map(|s| s.to_string()));
        } else if let Some(section) = section {
            let item = line.split('.').next().unwrap_or_default();
            if !item.is_empty()
                && item.chars().all(|c| c.is_ascii_digit())
                && line[item.len()..].starts_with(". ")
            {
                numbers.insert(format!("{section}.{item}"));
            }
        }
    }
    numbers
}

/// Every `SPEC x` / `SPEC x.y` cited in `text`.
fn citations(text: &str) -> Vec<String> {
    text.match_indices("SPEC ")
        .map(|(at, _)| {
            let tail = &text[at + 5..];
            let end = tail.find(|c: char| !c.is_ascii_digit() && c != '.').unwrap_or(tail.len());
            tail[..end].trim_end_matches('.').to_owned()
        })
        .filter(|n| !n.is_empty())
        .collect()
}

#[test]
fn every_spec_citation_resolves() {
    let numbers = spec_numbers(&read(&root().join("docs/spec.md")));
    assert!(numbers.contains("2.14") && numbers.contains("3.11"), "the spec numbers its items: {numbers:?}");
    let mut missing = Vec::new();
    for path in cited_in() {
        for cited in citations(&read(&path)) {
            if !numbers.contains(&cited) {
                missing.push(format!("{}: SPEC {cited}", path.display()));
            }
        }
    }
    assert!(missing.is_empty(), "citations the spec does not define:\n{}", missing.join("\n"));
}

/// The ids of the spec's §7 tables (the first column; `A1–A7` is a range).
fn invariant_ids(spec: &str) -> BTreeSet<String> {
    let section = spec.split("## 7.").nth(1).expect("the spec has a §7");
    let mut ids = BTreeSet::new();
    for line in
        section.lines().filter(|l| l.starts_with("| ") && !l.starts_with("| id ") && !l.starts_with("|--"))
    {
        let first = line.trim_start_matches("| ").split(" |").next().unwrap_or_default().trim();
        if let Some((from, to)) = first.split_once('–') {
            let prefix: String = from.chars().take_while(char::is_ascii_alphabetic).collect();
            let (a, b): (u32, u32) = (
                from[prefix.len()..].parse().expect("a range"),
                to[prefix.len()..].parse().expect("a range"),
            );
            ids.extend((a..=b).map(|n| format!("{prefix}{n}")));
        } else {
            ids.insert(first.trim_matches('`').to_owned());
        }
    }
    ids
}

/// The verdict ids the checkers report in `source`: the second argument of every `ensure!`,
/// and the first of every `Violation::raise` / `Violation::record`, when a string literal.
fn reported(source: &str) -> Vec<String> {
    let mut ids = Vec::new();
    for (at, _) in source.match_indices("ensure!(") {
        if let Some(id) = literal_after_first_argument(&source[at + "ensure!(".len()..]) {
            ids.push(id);
        }
    }
    for call in ["Violation::raise(", "Violation::record("] {
        for (at, _) in source.match_indices(call) {
            let tail = source[at + call.len()..].trim_start();
            if let Some(rest) = tail.strip_prefix('"') {
                ids.extend(rest.split('"').next().map(str::to_owned));
            }
        }
    }
    ids
}

/// Skips one argument (brackets and string literals balanced) and reads the string literal
/// that follows its comma, if any.
fn literal_after_first_argument(tail: &str) -> Option<String> {
    let (mut depth, mut in_string, mut escaped) = (0i32, false, false);
    for (i, c) in tail.char_indices() {
        if in_string {
            match c {
                _ if escaped => escaped = false,
                '\\' => escaped = true,
                '"' => in_string = false,
                _ => {}
            }
            continue;
        }
        match c {
            '"' => in_string = true,
            '(' | '[' | '{' => depth += 1,
            ')' | ']' | '}' if depth == 0 => return None,
            ')' | ']' | '}' => depth -= 1,
            ',' if depth == 0 => {
                let rest = tail[i + 1..].trim_start().strip_prefix('"')?;
                return rest.split('"').next().map(str::to_owned);
            }
            _ => {}
        }
    }
    None
}

#[test]
fn every_reported_invariant_is_defined() {
    let spec = read(&root().join("docs/spec.md"));
    let mut known = invariant_ids(&spec);
    known.extend(CATALOGUE.iter().map(|s| s.id.to_owned()));
    known.extend(spec_numbers(&spec));
    let mut missing = BTreeSet::new();
    let mut seen = 0;
    let this = root().join("sim/tests/docs.rs");
    let sources = cited_in().into_iter().filter(|p| p.extension().is_some_and(|e| e == "rs"));
    for path in sources.filter(|p| p.canonicalize().ok() != this.canonicalize().ok()) {
        for id in reported(&read(&path)) {
            seen += 1;
            if !known.contains(&id) {
                missing.insert(format!("{}: {id}", path.display()));
            }
        }
    }
    // The stored replays and failing programs name theirs as `[id] message`.
    for path in cited_in().into_iter().filter(|p| p.extension().is_some_and(|e| e == "json")) {
        let text = read(&path);
        for (at, _) in text.match_indices("\"violation\": \"[") {
            let tail = &text[at + "\"violation\": \"[".len()..];
            let id = tail.split(']').next().unwrap_or_default().to_owned();
            seen += 1;
            if !known.contains(&id) {
                missing.insert(format!("{}: {id}", path.display()));
            }
        }
    }
    assert!(seen > 300, "found only {seen} reported ids: the scan is broken");
    assert!(
        missing.is_empty(),
        "ids the spec does not define:\n{}",
        missing.into_iter().collect::<Vec<_>>().join("\n")
    );
}

/// `docs/catalogue.md` as the catalogue generates it.
fn catalogue_markdown() -> String {
    let mut out = String::from(
        "# The schedule catalogue\n\nEvery sim scenario (SPEC 5): its id, the schedule it explores and what it pins (with the\nspec items it cites), when its deadlines may fire, whether loom runs it, and the mutants it\nmust kill. Generated from `sim/src/scenarios/mod.rs` by `sim/tests/docs.rs`\n(`RESIDENT_WRITE_DOCS=1 cargo test -p resident-sim --test docs`); the test fails when it is out\nof date. `resident-sim list` prints the same, and `resident-sim explore --scenario ID` runs one.\n\n| id | what it explores | time | loom | mutants |\n|---|---|---|---|---|\n",
    );
    for s in CATALOGUE.iter() {
        let loom = match s.loom {
            Some(bound) if s.loom_mutants => format!("bound {bound}"),
            Some(bound) => format!("bound {bound} (mutants under shuttle only)"),
            None => "no".to_owned(),
        };
        let mutants: Vec<String> = s.targets.iter().map(|m| format!("`{}`", m.name())).collect();
        out.push_str(&format!(
            "| `{}` | {} | {} | {loom} | {} |\n",
            s.id,
            s.description.replace('|', "\\|"),
            s.time.name(),
            mutants.join(", ")
        ));
    }
    out
}

#[test]
fn the_catalogue_document_is_the_catalogue() {
    let path = root().join("docs/catalogue.md");
    let expected = catalogue_markdown();
    if std::env::var_os("RESIDENT_WRITE_DOCS").is_some() {
        std::fs::write(&path, &expected).expect("docs/catalogue.md is writable");
    }
    let text = read(&path);
    let listed: BTreeSet<&str> =
        text.lines().filter_map(|l| l.strip_prefix("| `")).filter_map(|l| l.split('`').next()).collect();
    let ids: BTreeSet<&str> = CATALOGUE.iter().map(|s| s.id).collect();
    assert_eq!(listed, ids, "docs/catalogue.md lists other ids than the catalogue");
    assert!(text == expected, "docs/catalogue.md is out of date: regenerate it with RESIDENT_WRITE_DOCS=1");
}

/// The number written just before `phrase` in `text` (whitespace-normalised), if any.
fn count_before(text: &str, phrase: &str) -> Option<usize> {
    let at = text.find(phrase)?;
    text[..at].split_whitespace().last()?.replace(',', "").parse().ok()
}

#[test]
fn the_readmes_counts_come_from_the_code() {
    let readme = read(&root().join("README.md")).split_whitespace().collect::<Vec<_>>().join(" ");
    let scenarios = CATALOGUE.len();
    let pairs = resident_sim::kill::pairs().count();
    let loom = CATALOGUE.iter().filter(|s| s.loom.is_some()).count();
    let counts = format!("{scenarios} scenarios, {pairs} mutant pairs.");
    assert!(readme.contains(&counts), "README: \"{counts}\"");
    let of = format!("of the {scenarios} scenarios also run exhaustively under loom");
    assert_eq!(count_before(&readme, &of), Some(loom), "README: \"K {of}\"");
    let default = format!("{} executions each", resident_sim::cli::DEFAULT_ITERATIONS);
    assert!(readme.contains(&default), "README: the explorer's default, \"{default}\"");
}

/// `docs/timeline.svg` (README's example timeline) is what `replay --svg` draws of its stored
/// failure today (`just timeline` regenerates it and renders it to PNG).
#[test]
fn the_example_timeline_is_current() {
    let file = resident_sim::replay_file::ReplayFile::read(
        &root().join("fixtures/replays/M-S1-random-24301-retire-while-held.json"),
    )
    .expect("the stored replay");
    let report = file.replay().expect("it replays");
    assert!(report.reproduced);
    let drawn =
        resident_sim::timeline::Timeline::new(&report.replayed.trace, report.replayed.violation.as_ref())
            .svg();
    assert!(
        read(&root().join("docs/timeline.svg")) == drawn,
        "docs/timeline.svg is stale: `just timeline` redraws it"
    );
}
