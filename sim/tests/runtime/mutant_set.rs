//! A set of mutant switches.

use resident::mutants::Mutant;
use resident_sim::mutant_set::MutantSet;

#[test]
fn a_set_holds_each_switch_once() {
    let set: MutantSet =
        [Mutant::NO_QUEUE_DEDUP, Mutant::EVICT_LEASED, Mutant::NO_QUEUE_DEDUP].into_iter().collect();
    assert_eq!(set.iter().count(), 2);
    assert!(set.contains(Mutant::EVICT_LEASED) && !set.contains(Mutant::PIN_UNORDERED));
    assert!(MutantSet::only(Mutant::named("user-bug")).contains(Mutant::named("user-bug")));
    assert!(MutantSet::NONE.is_empty());
}
