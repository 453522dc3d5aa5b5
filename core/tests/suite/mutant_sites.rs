//! The historical bugs stay out of the protocol's way: a switch site (`if runtime.mutant(..)`)
//! is one recognisable line with at most a three-line body in place; a longer historical body
//! sits in its file's `// Historical bugs:` section, after the code it alters, and is called
//! from the switch in one line (see `resident::mutants`).

use std::path::Path;

use crate::source::rust_files;

const SECTION: &str = "// Historical bugs:";
const MAX_INLINE: usize = 3;

/// Whether `line` opens a block switched on a mutant: `if runtime.mutant(..) {`, negated or
/// not, as a statement, a `let .. = if`, or a match guard.
fn opens_switch(line: &str) -> bool {
    let Some(at) = line
        .find(" if ")
        .map(|at| at + 1)
        .or_else(|| line.trim_start().starts_with("if ").then(|| line.len() - line.trim_start().len()))
    else {
        return false;
    };
    let condition = line[at + "if ".len()..].trim_start_matches('!');
    let head: String = condition.chars().take_while(|c| !c.is_whitespace()).collect();
    head.contains("mutant(") && line.trim_end().ends_with('{')
}

/// The body lines of the block `lines[at]` opens (up to its first closing brace at the
/// opening line's indentation: an `else` is not part of the switch's body).
fn body_len(lines: &[&str], at: usize) -> usize {
    let indent = lines[at].len() - lines[at].trim_start().len();
    lines[at + 1..]
        .iter()
        .position(|l| l.len() - l.trim_start().len() == indent && l.trim_start().starts_with('}'))
        .unwrap_or(lines.len())
}

#[test]
fn switch_sites_are_short_and_bodies_sit_after_the_protocol() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    let (mut sites, mut long) = (0, Vec::new());
    for file in &files {
        let text = std::fs::read_to_string(file).expect("readable source file");
        let protocol = text.find(SECTION).map_or(text.as_str(), |at| &text[..at]);
        let lines: Vec<&str> = protocol.lines().collect();
        for at in (0..lines.len()).filter(|&at| opens_switch(lines[at])) {
            sites += 1;
            let body = body_len(&lines, at);
            if body > MAX_INLINE {
                let name = file.strip_prefix(&src).unwrap_or(file).display().to_string();
                long.push(format!("{name}:{}: {body} lines: {}", at + 1, lines[at].trim()));
            }
        }
    }
    assert!(sites > 40, "found only {sites} switch sites: is the pattern stale?");
    assert!(
        long.is_empty(),
        "historical bodies longer than {MAX_INLINE} lines inline (move each to its file's \
         `{SECTION}` section, called in one line):\n{}",
        long.join("\n")
    );
}

#[test]
fn the_pattern_sees_each_form_of_switch() {
    assert!(opens_switch("        if self.mutant(Mutant::A) {"));
    assert!(opens_switch("        if !self.runtime.mutant(Mutant::A) && expired() {"));
    assert!(opens_switch("        let x = if rt.mutant(Mutant::A) {"));
    assert!(opens_switch("            Step::Move { .. } if runtime.mutant(Mutant::A) => {"));
    assert!(!opens_switch("        if let Some(s) = occupant(s, self.mutant(Mutant::A)) {"));
    assert!(!opens_switch("        let barge = self.mutant(Mutant::A);"));
    let lines =
        ["    if rt.mutant(A) {", "        a();", "    } else {", "        b();", "        c();", "    }"];
    assert_eq!(body_len(&lines, 0), 1);
}
