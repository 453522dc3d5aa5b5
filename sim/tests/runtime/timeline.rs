//! A failing execution's trace read back as a timeline: its steps, hand-offs, lanes and SVG.

use std::collections::BTreeMap;

use resident_sim::timeline::{HandOff, Kind, Timeline, Touched};
use resident_sim::violation::Violation;

fn trace() -> BTreeMap<String, Vec<String>> {
    let lines = |l: &[&str]| l.iter().map(|s| (*s).to_owned()).collect::<Vec<_>>();
    let mut t = BTreeMap::new();
    t.insert(
        "T1".to_owned(),
        lines(&[
            "#000 add(X) ...",
            "#001   · lifecycle lock acquired id=X generation=1",
            "#003 add(X) -> Ok(Loaded)",
            "#007 ✗ violated [I1] 2 loads of X ran at the same time",
        ]),
    );
    t.insert(
        "T2".to_owned(),
        lines(&[
            "#002 remove(X) ...",
            "#004   · lifecycle lock acquired id=X generation=1",
            "#005 rename(X -> Y) ...",
            "#006 rename(X -> Y) -> Err(\"busy ...\")",
            "#008 remove(X) -> Ok(())",
        ]),
    );
    t
}

#[test]
fn steps_read_back_in_order_with_their_kinds_and_hand_offs() {
    let v = Violation { invariant: "I1".to_owned(), message: "2 loads of X ran at the same time".to_owned() };
    let timeline = Timeline::new(&trace(), Some(&v));
    assert_eq!(timeline.threads, ["T1", "T2"]);
    let seqs: Vec<usize> = timeline.steps.iter().map(|s| s.seq).collect();
    assert_eq!(seqs, [0, 1, 2, 3, 4, 5, 6, 7, 8]);
    assert_eq!(timeline.steps[0].kind, Kind::Begin("add(X)".to_owned()));
    assert_eq!(timeline.steps[3].kind, Kind::End("add(X)".to_owned(), "Ok(Loaded)".to_owned()));
    assert_eq!(timeline.steps[5].kind, Kind::Begin("rename(X -> Y)".to_owned()));
    let busy = Kind::End("rename(X -> Y)".to_owned(), "Err(\"busy ...\")".to_owned());
    assert_eq!(timeline.steps[6].kind, busy, "an operation holding ` -> `, an outcome ending `...`");
    assert_eq!(timeline.steps[8].kind, Kind::End("remove(X)".to_owned(), "Ok(())".to_owned()));
    assert_eq!(timeline.steps[1].touched(), Some(Touched::LifecycleLock));
    assert_eq!(timeline.hand_offs(), [HandOff { from: 1, to: 4 }]);
    assert_eq!(timeline.violating_step(), Some(7), "the step the violation marked");
    let lanes = timeline.lanes(80);
    assert!(lanes.starts_with("violated [I1]"), "{lanes}");
    assert!(lanes.contains("✗#007"), "{lanes}");
    let svg = timeline.svg();
    assert!(svg.starts_with("<svg") && svg.trim_end().ends_with("</svg>"));
    assert_eq!(svg.matches("marker-end").count(), 1, "one hand-off arrow");
    assert!(svg.contains("violated [I1]"));
}
