//! C-B1 on the production runtime, measured by the allocator rather than by the budget's own
//! counter (SPEC 3.11, A7): two cold loads of different keys on two peer caches, with room for
//! one model, start together. Under the hard budget the second load reserves its bytes before
//! it allocates them, so it evicts the first model (or waits for it to go idle) first: the heap
//! never holds more than the cap plus a small slack. Under the overflow policy the same program
//! holds both models at once — the overshoot the measurement must see.
//!
//! One test in this binary, so that no other test's allocations are counted.

use std::alloc::System;
use std::sync::Barrier;

use peakmem_alloc::{INSTRUMENTED_SYSTEM, PeakMemAlloc, PeakMemAllocTrait};
use resident::CacheError;
use resident::cache::CacheGroup;

#[global_allocator]
static HEAP: &PeakMemAlloc<System> = &INSTRUMENTED_SYSTEM;

/// Each model's bytes: two do not fit the cap.
const MODEL: usize = 600 * 1024;
/// The group's RAM cap.
const CAP: u64 = 1024 * 1024;
/// What the heap may hold beyond the cap: the caches' and the threads' own bookkeeping.
const SLACK: u64 = 64 * 1024;

/// Runs the two loads; returns the heap's peak above what it held before, and the budget's
/// high-water mark.
fn two_cold_loads(overflow: bool) -> (u64, u64) {
    let group = CacheGroup::<Vec<u8>>::new(CAP).expect("a valid cap");
    group.budget().set_overflow(overflow);
    let caches = [group.cache("cuda:0"), group.cache("cuda:1")];
    let start = Barrier::new(2);
    HEAP.reset_peak_memory();
    std::thread::scope(|s| {
        for (cache, key) in caches.iter().zip(["a", "b"]) {
            let start = &start;
            s.spawn(move || {
                start.wait();
                let model = cache.get_or_put(key, MODEL as u64, || Ok::<_, CacheError>(vec![1u8; MODEL]));
                assert!(model.is_ok(), "{key}: {:?}", model.err());
            });
        }
    });
    (HEAP.get_peak_memory() as u64, group.budget().high_water())
}

#[test]
fn the_heap_stays_within_the_cap_because_loads_reserve_first() {
    let (peak, high_water) = two_cold_loads(false);
    assert!(high_water <= CAP, "the budget's high water {high_water} is over the cap {CAP}");
    assert!(peak <= CAP + SLACK, "heap peak {peak} over the cap {CAP} + slack {SLACK}");
    println!("hard budget: heap peak {peak}, high water {high_water}, cap {CAP}");

    // The measurement sees an overshoot: with the overflow policy both models are alive at once.
    let (peak, high_water) = two_cold_loads(true);
    assert!(high_water > CAP, "the overflow policy overshoots the budget ({high_water})");
    assert!(peak >= 2 * MODEL as u64, "heap peak {peak} below two models: the measurement is blind");
    println!("overflow policy: heap peak {peak}, high water {high_water}, cap {CAP}");
}
