//! Random programs against a FixedSizeCache and its reference LRU model: after every completed
//! operation, success or failure, the outcome matches, the queue is exactly the model's queue
//! (order included: I4, I5, I6, I8, I10), and the registry holds exactly the queued ids.

use std::time::Duration;

use proptest::prelude::*;
use resident::{
    Added, FixedSizeCache, FixedSizeConfig, Manager, ManagerError, ManagerExt, ModelManager, Traced,
};
use resident_proptests::{CacheOp, CacheOutcome, CacheReference, IDS, KnobLoader, Op, Outcome};

const MAX_SIZE: usize = 3;

type Cache = FixedSizeCache<Traced<ModelManager<KnobLoader>>>;

fn op() -> impl Strategy<Value = CacheOp> {
    let id = 0..IDS.len();
    prop_oneof![
        5 => id.clone().prop_map(|id| CacheOp::Base(Op::Add { id, alias: None })),
        2 => id.clone().prop_map(|id| CacheOp::Base(Op::Remove { id })),
        3 => id.clone().prop_map(|id| CacheOp::Base(Op::Lease { id })),
        1 => id.clone().prop_map(|id| CacheOp::Pin { id }),
        1 => id.clone().prop_map(|id| CacheOp::Unpin { id }),
        1 => (id.clone(), any::<bool>()).prop_map(|(id, broken)| CacheOp::Base(Op::BreakLoads { id, broken })),
        1 => (id, any::<bool>()).prop_map(|(id, broken)| CacheOp::Base(Op::BreakUnloads { id, broken })),
    ]
}

fn run(cache: &Cache, op: &CacheOp) -> CacheOutcome {
    let reduce = |e: ManagerError| match e {
        ManagerError::NotFound { .. } => CacheOutcome::Base(Outcome::NotFound),
        ManagerError::Load { .. } => CacheOutcome::Base(Outcome::LoadFailed),
        ManagerError::Unload { .. } => CacheOutcome::Base(Outcome::UnloadFailed),
        ManagerError::CapacityExhausted { .. } => CacheOutcome::Full,
        other => panic!("unexpected error in a sequential program: {other}"),
    };
    let done = |r: Result<(), ManagerError>| r.map_or_else(reduce, |()| CacheOutcome::Base(Outcome::Done));
    match op {
        CacheOp::Pin { id } => done(cache.pin(IDS[*id])),
        CacheOp::Unpin { id } => done(cache.unpin(IDS[*id])),
        CacheOp::Base(Op::Add { id, .. }) => match cache.add_model(IDS[*id], None) {
            Ok(Added::Loaded) => {
                // Tell the model its id (for unload knobs) without touching the queue order:
                // the id was just queued at the MRU end, so a lease leaves the order as it is.
                let lease = cache.lease(IDS[*id]).expect("a loaded model is leasable");
                *lease.registered_as.lock().unwrap() = Some(IDS[*id].to_owned());
                CacheOutcome::Base(Outcome::Loaded)
            }
            Ok(Added::Warm) => CacheOutcome::Base(Outcome::Warm),
            Err(e) => reduce(e),
        },
        CacheOp::Base(Op::Remove { id }) => done(cache.remove(IDS[*id])),
        CacheOp::Base(Op::Lease { id }) => done(cache.lease(IDS[*id]).map(drop)),
        CacheOp::Base(knob) => {
            cache.get_ref().get_ref().loader().knobs.apply(knob);
            CacheOutcome::Base(Outcome::Done)
        }
    }
}

proptest! {
    #![proptest_config(super::config("../fixtures/proptest-regressions/cache.txt"))]

    #[test]
    fn cache_matches_the_reference_lru(program in proptest::collection::vec(op(), 1..80)) {
        let config = FixedSizeConfig::new(MAX_SIZE).with_capacity_wait(Duration::from_micros(100));
        let cache = FixedSizeCache::new(Traced::new(ModelManager::new(KnobLoader::default())), config).unwrap();
        let mut reference = CacheReference::new(MAX_SIZE);
        for (step, op) in program.iter().enumerate() {
            let expected = reference.apply(op);
            let got = run(&cache, op);
            prop_assert_eq!(got, expected, "step {}: {:?}", step, op);
            let queue: Vec<String> = cache.queue().iter().map(|id| id.to_string()).collect();
            prop_assert_eq!(&queue, &reference.queue, "step {}: {:?}", step, op);
            let mut registered: Vec<String> = cache.ids().iter().map(|id| id.to_string()).collect();
            let mut queued = queue.clone();
            registered.sort();
            queued.sort();
            prop_assert_eq!(registered, queued, "I4 after step {}", step);
            prop_assert_eq!(cache.loading(), 0);
        }
    }
}
