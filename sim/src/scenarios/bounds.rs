//! Bounds that hold across retries: a wait of `get_or_put` for another device's load of the same
//! key is bounded once per call, from its start, however many times the call looks again; a
//! caller that waits behind one failing load after another times out by its first deadline.

use std::time::Duration;

use resident::CacheError;
use resident::runtime::Arc;

use super::cache::finish;
use crate::ensure;
use crate::latch::Latch;
use crate::runtime::SimRuntime;
use crate::trace;
use crate::world::cache::{CacheWorld, Weights};
use crate::world::join;

/// How long each load stalls on the runtime's clock before it fails.
const STALL: Duration = Duration::from_millis(6);

/// How many of `results` timed out waiting; each of those must have returned by its bound.
fn timeouts_within(results: &[(Result<(), CacheError>, Duration)], bound: Duration) -> usize {
    let mut timeouts = 0;
    for (result, waited) in results {
        match result {
            Err(CacheError::LoadWaitTimeout { .. }) => {
                ensure!(*waited <= bound, "C-L1", "a wait bounded by {bound:?} returned after {waited:?}");
                timeouts += 1;
            }
            Err(CacheError::Load { .. }) => {}
            other => ensure!(false, "contract", "a caller behind stalled loads got {other:?}"),
        }
    }
    timeouts
}

/// C-L1: three callers of `get_or_put` of one key whose every load stalls 6 ms and fails, with
/// a load wait of 10 ms. The first load fails at 6 ms and the second at 12 ms; the third
/// caller, woken at 6 ms to wait behind the second, still times out by its first deadline.
pub(super) fn load_wait_bounded_once<R: SimRuntime>(rt: R) {
    let world = CacheWorld::new(rt, 1000, 1);
    let wait = Duration::from_millis(10);
    world.group.set_load_wait(wait).expect("a valid wait");
    let never = Arc::new(Latch::new(&world.rt));
    let handles = ["T1", "T2", "T3"].map(|name| {
        let (c0, rt, never) = (Arc::clone(&world.caches[0]), world.rt.clone(), Arc::clone(&never));
        world.spawn(name, move |_, _| {
            let start = rt.now();
            trace::record(name, "get_or_put(m)");
            let loaded = c0.get_or_put("m", 10, || {
                never.wait_for_within(1, STALL);
                Err::<Weights<R>, _>("a stalled load failed")
            });
            trace::record(name, format!("get_or_put(m) -> {:?}", loaded.as_ref().map(|_| ())));
            (loaded.map(drop), rt.now().saturating_sub(start))
        })
    });
    let results = handles.map(join::<R, _>);
    let timeouts = timeouts_within(&results, wait);
    ensure!(
        timeouts == 1,
        "C-L1",
        "{timeouts} of the three callers timed out; one must, by its first deadline"
    );
    finish(&world);
}
