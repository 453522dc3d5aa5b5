//! A failed exploration leaves nothing behind (in the checker's thread-local state or ours)
//! that fails the next exploration on the same thread.

use resident::mutants::Mutant;
use resident_sim::explore::{Checker, Plan, explore};
use resident_sim::mutant_set::MutantSet;

#[test]
fn an_exploration_after_a_failure_starts_clean() {
    let scenario = resident_sim::scenarios::find("M-L1").expect("catalogue id");
    for checker in [Checker::Random, Checker::Loom] {
        // loom explores every schedule whatever the iterations: at preemption bound 1 the
        // mutant is caught and the clean search is short (at M-L1's own 2 it takes 20 s).
        let bounded = |mut plan: Plan| {
            plan.preemption_bound = Some(1);
            plan
        };
        let plan =
            bounded(Plan::new(5000, 0x5eed).with_mutants(MutantSet::only(Mutant::UNLOAD_WHILE_LEASED)));
        let failed = explore(scenario, checker, plan);
        assert!(failed.failure.is_some(), "{checker}: the mutant is caught");
        let clean = explore(scenario, checker, bounded(Plan::new(50, 1)));
        assert!(clean.failure.is_none(), "{checker}: {:?}", clean.failure.map(|f| f.violation));
    }
}
