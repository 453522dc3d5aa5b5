//! No two top-level modules of `core/src` import each other: the dependency graph between them
//! has no two-module cycle, so each can be read (and changed) knowing only what it imports. The
//! same inside each folder: its files form no import cycle of any length (beyond the known ones
//! that open issues are to break).

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use crate::source::rust_files;

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

/// The first identifier of `s`.
fn ident(s: &str) -> String {
    s.trim_start().chars().take_while(|c| c.is_alphanumeric() || *c == '_').collect()
}

/// The items of a `{a, b::c, …}` group (`group` starts after the brace): their first names.
fn group_items(group: &str) -> Vec<String> {
    let (mut depth, mut items, mut start) = (0, Vec::new(), 0);
    for (i, c) in group.char_indices() {
        match c {
            '{' => depth += 1,
            '}' if depth == 0 => {
                items.push(&group[start..i]);
                break;
            }
            '}' => depth -= 1,
            ',' if depth == 0 => {
                items.push(&group[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    items.into_iter().map(ident).collect()
}

/// The names a folder's `mod.rs` re-exports from its siblings (`pub use name::{A, B}` or
/// `pub(crate) use name::A`), each with the sibling it comes from: `super::A` in a sibling
/// imports that sibling as surely as `super::name::A`.
fn reexports(dir: &Path, siblings: &BTreeSet<String>) -> BTreeMap<String, String> {
    let text = std::fs::read_to_string(dir.join("mod.rs")).unwrap_or_default();
    let mut out = BTreeMap::new();
    for line in text.lines().map(str::trim_start) {
        let Some(rest) = line.strip_prefix("pub use ").or_else(|| line.strip_prefix("pub(crate) use "))
        else {
            continue;
        };
        let rest = rest.strip_prefix("self::").unwrap_or(rest);
        let from = ident(rest);
        let Some(path) = rest.strip_prefix(&format!("{from}::")).filter(|_| siblings.contains(&from)) else {
            continue;
        };
        let items = match path.strip_prefix('{') {
            Some(group) => group_items(group),
            None => vec![path.rsplit("::").next().map(ident).unwrap_or_default()],
        };
        out.extend(items.into_iter().map(|item| (item, from.clone())));
    }
    out
}

/// The sibling files (and sub-folders) of one folder that `text` names: `super::name`,
/// `super::{name, …}`, `crate::<folder path>::name`, or a name the folder re-exports from a
/// sibling (`super::Name`). A file inside a sub-folder (`nested`, other than its `mod.rs`)
/// names this folder's siblings only through `crate::<folder path>::`: its `super::` is its
/// own folder, and `super::super::` is left out.
fn siblings_named(
    text: &str,
    folder: &str,
    siblings: &BTreeSet<String>,
    exported: &BTreeMap<String, String>,
    nested: bool,
) -> BTreeSet<String> {
    let mut found = BTreeSet::new();
    for line in text.lines().map(str::trim_start).filter(|l| !l.starts_with("//")) {
        let mut heads: Vec<&str> = Vec::new();
        for (at, _) in line.match_indices("super::").filter(|_| !nested) {
            if line[..at].ends_with("super::") {
                continue;
            }
            heads.push(&line[at + "super::".len()..]);
        }
        let absolute = format!("crate::{}::", folder.replace('/', "::"));
        heads.extend(line.match_indices(&absolute).map(|(at, _)| &line[at + absolute.len()..]));
        for head in heads {
            if head.starts_with("super::") {
                continue;
            }
            let names: Vec<String> = match head.strip_prefix('{') {
                Some(group) => group_items(group),
                None => vec![ident(head)],
            };
            let resolve = |n: String| if siblings.contains(&n) { Some(n) } else { exported.get(&n).cloned() };
            found.extend(names.into_iter().filter_map(resolve));
        }
    }
    found
}

/// Every folder under `src/` with its sibling modules (files other than `mod.rs`, and
/// sub-folders), each with the files it is made of.
fn folders(src: &Path) -> Vec<(String, BTreeMap<String, Vec<PathBuf>>)> {
    fn walk(src: &Path, dir: &Path, out: &mut Vec<(String, BTreeMap<String, Vec<PathBuf>>)>) {
        let mut siblings = BTreeMap::new();
        for entry in std::fs::read_dir(dir).expect("readable folder") {
            let path = entry.expect("readable entry").path();
            let name = path.file_stem().and_then(|s| s.to_str()).unwrap_or_default().to_owned();
            if path.is_dir() {
                walk(src, &path, out);
            } else if path.extension().is_none_or(|e| e != "rs") || name == "mod" || name == "lib" {
                continue;
            }
            let mut files = Vec::new();
            rust_files(&path, &mut files);
            siblings.insert(name, files);
        }
        let folder = dir.strip_prefix(src).expect("under src").to_string_lossy().replace('\\', "/");
        out.push((folder, siblings));
    }
    let mut out = Vec::new();
    walk(src, src, &mut out);
    out
}

/// Cycles between files of one folder that predate this check, each for an open issue to break.
/// A new cycle fails the check, and so does an entry here that is no longer one (delete it).
const KNOWN_CYCLES: &[(&str, &str, &str)] = &[];

/// Files inside one folder form no import cycle (of any length) beyond [`KNOWN_CYCLES`]: each
/// can be read knowing only the siblings it names, and none of them needs the one reading it.
#[test]
fn no_files_of_one_folder_import_each_other_in_a_cycle() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut cycles = BTreeSet::new();
    let mut edges = 0;
    for (folder, siblings) in folders(&src).into_iter().filter(|(f, _)| !f.is_empty()) {
        let names: BTreeSet<String> = siblings.keys().cloned().collect();
        let exported = reexports(&src.join(&folder), &names);
        let graph: BTreeMap<&String, BTreeSet<String>> = siblings
            .iter()
            .map(|(name, files)| {
                let mut uses = BTreeSet::new();
                for file in files {
                    // A sub-folder's own files name their siblings relative to it; its `mod.rs`
                    // speaks for it at this level, the others through absolute paths only.
                    let in_sub_folder = !file.parent().is_some_and(|p| p.ends_with(&folder));
                    let nested = in_sub_folder && file.file_stem().is_none_or(|s| s != "mod");
                    let text = std::fs::read_to_string(file).expect("readable source file");
                    uses.extend(siblings_named(&text, &folder, &names, &exported, nested));
                }
                uses.remove(name);
                (name, uses)
            })
            .collect();
        edges += graph.values().map(BTreeSet::len).sum::<usize>();
        let reaches = |from: &String, to: &String| {
            let (mut seen, mut stack) = (BTreeSet::new(), vec![from.clone()]);
            while let Some(at) = stack.pop() {
                for next in graph.get(&at).into_iter().flatten() {
                    if next == to {
                        return true;
                    }
                    if seen.insert(next.clone()) {
                        stack.push(next.clone());
                    }
                }
            }
            false
        };
        for a in &names {
            for b in names.iter().filter(|b| a < *b) {
                if reaches(a, b) && reaches(b, a) {
                    cycles.insert((folder.clone(), a.clone(), b.clone()));
                }
            }
        }
    }
    assert!(edges >= 10, "found only {edges} imports between sibling files: the scan is broken");
    let known: BTreeSet<(String, String, String)> =
        KNOWN_CYCLES.iter().map(|(f, a, b)| ((*f).to_owned(), (*a).to_owned(), (*b).to_owned())).collect();
    let new: Vec<_> = cycles.difference(&known).collect();
    assert!(new.is_empty(), "files of one folder that import each other (folder, file, file): {new:?}");
    let gone: Vec<_> = known.difference(&cycles).collect();
    assert!(gone.is_empty(), "known cycles that are gone (delete them from KNOWN_CYCLES): {gone:?}");
}
