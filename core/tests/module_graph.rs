//! No two top-level modules of `core/src` import each other: the dependency graph between them
//! has no two-module cycle, so each can be read (and changed) knowing only what it imports.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

fn rust_files(path: &Path, out: &mut Vec<PathBuf>) {
    if path.is_dir() {
        for entry in std::fs::read_dir(path).expect("readable source folder") {
            rust_files(&entry.expect("readable entry").path(), out);
        }
    } else if path.extension().is_some_and(|e| e == "rs") {
        out.push(path.to_owned());
    }
}

/// The top-level modules (a file or a folder under `src/`, `lib.rs` aside) and their files.
fn modules(src: &Path) -> BTreeMap<String, Vec<PathBuf>> {
    let mut modules = BTreeMap::new();
    for entry in std::fs::read_dir(src).expect("readable src") {
        let path = entry.expect("readable entry").path();
        let name = path.file_stem().and_then(|s| s.to_str()).unwrap_or_default().to_owned();
        let module = path.is_dir() || path.extension().is_some_and(|e| e == "rs");
        if !module || name == "lib" {
            continue;
        }
        let mut files = Vec::new();
        rust_files(&path, &mut files);
        modules.insert(name, files);
    }
    modules
}

/// The top-level modules `files` name in code (`crate::name`), comments left out.
fn imports(files: &[PathBuf], names: &BTreeSet<String>) -> BTreeSet<String> {
    let mut found = BTreeSet::new();
    for file in files {
        let text = std::fs::read_to_string(file).expect("readable source file");
        for line in text.lines().map(str::trim_start).filter(|l| !l.starts_with("//")) {
            for (at, _) in line.match_indices("crate::") {
                let rest = &line[at + "crate::".len()..];
                let name: String = rest.chars().take_while(|c| c.is_alphanumeric() || *c == '_').collect();
                if names.contains(&name) {
                    found.insert(name);
                }
            }
        }
    }
    found
}

#[test]
fn no_two_top_level_modules_import_each_other() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let modules = modules(&src);
    assert!(modules.len() >= 8, "found only the modules {:?}", modules.keys());
    let names: BTreeSet<String> = modules.keys().cloned().collect();
    let graph: BTreeMap<String, BTreeSet<String>> = modules
        .iter()
        .map(|(name, files)| {
            let mut uses = imports(files, &names);
            uses.remove(name);
            (name.clone(), uses)
        })
        .collect();
    assert!(graph["layer"].contains("manager"), "the layers build on the manager: {graph:?}");
    let cycles: Vec<(&String, &String)> = graph
        .iter()
        .flat_map(|(a, uses)| uses.iter().map(move |b| (a, b)))
        .filter(|(a, b)| a < b && graph.get(*b).is_some_and(|back| back.contains(*a)))
        .collect();
    assert!(cycles.is_empty(), "modules that import each other: {cycles:?}\n{graph:#?}");
}
