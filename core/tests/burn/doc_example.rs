//! The crate documentation's burn example (`src/burn_example.md`), run here rather than as a
//! doctest: a doctest of its own builds burn's ndarray backend once more (about 9 s of a clean
//! `cargo test` on two cores), which this binary builds for its other tests anyway. A second
//! test keeps the page and this code the same.

use resident::burn::{FileLoader, zoo::MlpSpec};
use resident::{ManagerExt, ModelManager};

#[test]
fn the_documented_burn_example_runs() -> Result<(), Box<dyn std::error::Error>> {
    // ---- shown ----
    let dir = std::env::temp_dir().join(format!("resident-doc-{}", std::process::id()));
    let spec = MlpSpec { d_in: 4, hidden: 8, d_out: 2 };
    let mlp = spec.generate::<resident::burn::Cpu>(7, &Default::default());
    resident::burn::save(&mlp, &dir.join("mlp.safetensors"))?;

    let manager = ModelManager::new(FileLoader::new(spec, &dir));
    manager.add_model("mlp", None)?;
    let logits = manager.infer("mlp", |model| model.infer(&[0.1, 0.2, 0.3, 0.4]))??;
    assert_eq!(logits.len(), 2);
    // ---- end ----
    std::fs::remove_dir_all(&dir)?;
    Ok(())
}

/// The lines a reader sees: the page's code block without its hidden (`# `) lines, or this
/// file's `use` lines and the shown part of the test, unindented; blank lines dropped.
fn shown(lines: impl Iterator<Item = &'static str>) -> Vec<&'static str> {
    lines.map(str::trim).filter(|l| !l.is_empty() && !l.starts_with("# ") && *l != "#").collect()
}

#[test]
fn the_page_shows_the_example_that_runs() {
    let page = include_str!("../../src/burn_example.md");
    let block = page.split("```rust,ignore\n").nth(1).and_then(|rest| rest.split("```").next());
    let block = block.expect("the page has one ignored rust block");
    let this = include_str!("doc_example.rs");
    let uses = this.lines().filter(|l| l.starts_with("use resident"));
    let body =
        this.split("// ---- shown ----\n").nth(1).and_then(|rest| rest.split("// ---- end ----").next());
    let body = body.expect("this file marks the shown part").lines();
    assert_eq!(shown(block.lines()), shown(uses.chain(body)));
}
