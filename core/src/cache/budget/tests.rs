//! The RAM budget's counters, charges and reservations, and its wait for room.

use super::*;

#[test]
fn charges_count_until_dropped() {
    let budget = RamBudget::new(100, &StdRuntime::new()).unwrap();
    let cache = budget.register_cache();
    let shared = budget.charge_shared(40, None).unwrap();
    let own = budget.charge_non_shared(cache, 70, None).unwrap();
    assert_eq!((budget.in_use(), budget.excess(), budget.high_water()), (110, 10, 110));
    assert!(!budget.fits(1));
    drop(shared);
    assert_eq!((budget.shared_bytes(), budget.non_shared_bytes(cache)), (0, 70));
    drop(own);
    assert_eq!((budget.in_use(), budget.high_water()), (0, 110));
}

#[test]
fn a_charge_that_would_overflow_is_refused_and_changes_nothing() {
    let budget = RamBudget::new(u64::MAX, &StdRuntime::new()).unwrap();
    let cache = budget.register_cache();
    let half = u64::MAX / 2 + 1;
    let first = budget.charge_shared(half, None).unwrap();
    assert_eq!(budget.charge_non_shared(cache, half, None).unwrap_err(), Overflow);
    assert_eq!(budget.charge_shared(half, None).unwrap_err(), Overflow);
    assert_eq!((budget.in_use(), budget.non_shared_bytes(cache), budget.high_water()), (half, 0, half));
    let rest = budget.charge_non_shared(cache, u64::MAX - half, None).unwrap();
    assert_eq!(budget.in_use(), u64::MAX);
    drop((first, rest));
    assert_eq!(budget.in_use(), 0);
}

#[test]
fn a_reservation_counts_until_it_becomes_the_charge_or_is_dropped() {
    let budget = RamBudget::new(100, &StdRuntime::new()).unwrap();
    let mut reservation = budget.try_reserve(80, None).unwrap();
    assert!(budget.try_reserve(21, None).is_none(), "80 reserved leaves 20");
    assert_eq!((budget.in_use(), budget.reserved(), budget.committed()), (0, 80, 80));
    let charge = budget.charge_shared(60, Some(&mut reservation)).unwrap();
    assert_eq!((budget.in_use(), budget.reserved(), reservation.bytes()), (60, 20, 20));
    drop(reservation);
    assert_eq!((budget.in_use(), budget.reserved(), budget.high_water()), (60, 0, 80));
    drop(charge);
    assert_eq!(budget.committed(), 0);
}

#[test]
fn a_debit_ends_a_wait_for_room_and_nothing_else_does() {
    let budget = RamBudget::new(100, &StdRuntime::new()).unwrap();
    let charge = budget.charge_shared(100, None).unwrap();
    let seen = budget.room_epoch();
    assert_eq!(budget.wait_for_room(seen, Duration::from_millis(1)), Err(TimedOut));
    drop(charge);
    assert_eq!(budget.wait_for_room(seen, Duration::MAX), Ok(()), "the debit came after `seen`");
    assert!(budget.try_reserve(100, None).is_some());
}

#[test]
fn a_zero_cap_is_refused() {
    assert_eq!(RamBudget::new(0, &StdRuntime::new()).unwrap_err().field, "cap");
}
