//! The sequential property tests, one binary: the manager here, the cache and the peer caches
//! in their modules.
//!
//! Random operation programs against the reference model: after every step the manager returns
//! what the model predicts, holds exactly the model's ids, and keeps no lifecycle entry beyond
//! its registered ids (I3 at quiescence), with no reservation left behind.

/// A FixedSizeCache against its reference LRU model (one test binary with the others).
#[path = "sequential/cache.rs"]
mod cache;

/// Two peer caches sharing one store and one budget.
#[path = "sequential/shared_cache.rs"]
mod shared_cache;

use proptest::prelude::*;
use proptest::test_runner::FileFailurePersistence;
use resident::{Added, Manager, ManagerError, ManagerExt, ModelManager};
use resident_proptests::{IDS, KnobLoader, Op, Outcome, Reference};

fn op() -> impl Strategy<Value = Op> {
    let id = 0..IDS.len();
    prop_oneof![
        4 => (id.clone(), proptest::option::of(0..IDS.len())).prop_map(|(id, alias)| Op::Add { id, alias }),
        3 => id.clone().prop_map(|id| Op::Remove { id }),
        2 => id.clone().prop_map(|id| Op::Lease { id }),
        1 => (id.clone(), any::<bool>()).prop_map(|(id, broken)| Op::BreakLoads { id, broken }),
        1 => (id, any::<bool>()).prop_map(|(id, broken)| Op::BreakUnloads { id, broken }),
    ]
}

fn run(m: &ModelManager<KnobLoader>, op: &Op) -> Outcome {
    let reduce = |e: ManagerError| match e {
        ManagerError::NotFound { .. } => Outcome::NotFound,
        ManagerError::Load { .. } => Outcome::LoadFailed,
        ManagerError::Unload { .. } => Outcome::UnloadFailed,
        other => panic!("unexpected error in a sequential program: {other}"),
    };
    match *op {
        Op::Add { id, alias } => {
            let resolved = IDS[alias.unwrap_or(id)];
            match m.add_model(IDS[id], alias.map(|a| IDS[a])) {
                Ok(Added::Loaded) => {
                    m.infer(resolved, |model| {
                        *model.registered_as.lock().unwrap() = Some(resolved.to_owned())
                    })
                    .expect("a loaded model is leasable");
                    Outcome::Loaded
                }
                Ok(Added::Warm) => Outcome::Warm,
                Err(e) => reduce(e),
            }
        }
        Op::Remove { id } => m.remove(IDS[id]).map_or_else(reduce, |()| Outcome::Done),
        Op::Lease { id } => m.lease(IDS[id]).map_or_else(reduce, |_| Outcome::Done),
        Op::BreakLoads { .. } | Op::BreakUnloads { .. } => {
            m.loader().knobs.apply(op);
            Outcome::Done
        }
    }
}

/// 256 cases; shrunk failures are kept with the other fixtures, in `regressions`, and replayed
/// first on every run.
fn config(regressions: &'static str) -> ProptestConfig {
    let persistence = FileFailurePersistence::Direct(regressions);
    ProptestConfig {
        cases: 256,
        failure_persistence: Some(Box::new(persistence)),
        ..ProptestConfig::default()
    }
}

proptest! {
    #![proptest_config(config("../fixtures/proptest-regressions/sequential.txt"))]

    #[test]
    fn manager_matches_the_reference_model(program in proptest::collection::vec(op(), 1..60)) {
        let m = ModelManager::new(KnobLoader::default());
        let mut reference = Reference::default();
        for (step, op) in program.iter().enumerate() {
            let expected = reference.apply(op);
            let got = run(&m, op);
            prop_assert_eq!(got, expected, "step {}: {:?}", step, op);
            let snapshot = m.snapshot();
            let registered: Vec<String> = snapshot.registered.iter().map(|id| id.to_string()).collect();
            prop_assert_eq!(&registered, &reference.registered.iter().cloned().collect::<Vec<_>>());
            prop_assert!(snapshot.lifecycle.is_sorted_by(|a, b| a.id < b.id), "lifecycle entries in id order");
            for entry in &snapshot.lifecycle {
                prop_assert!(reference.registered.contains(entry.id.as_str()), "I3: {:?} outlived its model", entry);
                prop_assert_eq!((entry.reservations, entry.locked), (0, false), "I3: {:?}", entry);
            }
        }
    }
}
