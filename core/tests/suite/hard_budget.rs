//! The hard RAM budget on the production runtime (SPEC 3.11, A7): loads reserve their declared
//! peak before they run, make room from idle records, and are refused with a typed error that
//! names what holds the budget when nothing can go. The concurrent schedules (a load waiting for
//! room and woken by a release or a debit) are explored by the sim's `C-B*` and `W-9`/`W-10`.

use std::time::Duration;

use resident::CacheError;
use resident::cache::{CacheGroup, Declared, PutOptions};
use resident::runtime::Arc;

type Weights = Vec<u8>;

fn group(cap: u64) -> Arc<CacheGroup<Weights>> {
    let group = CacheGroup::<Weights>::new(cap).unwrap();
    assert_eq!(group.budget().room_wait(), Duration::from_secs(10), "the default room wait");
    group.budget().set_room_wait(Duration::from_millis(1));
    group
}

#[test]
fn a_load_runs_only_once_its_declared_peak_is_reserved() {
    let group = group(200);
    let gpu = group.cache("cuda:0");
    let budget = Arc::clone(group.budget());
    let loaded = gpu
        .get_or_put("m", Declared::new(60).with_peak(150), || {
            assert_eq!((budget.reserved(), budget.in_use()), (150, 0), "the peak is reserved first");
            Ok::<_, CacheError>(vec![0; 60])
        })
        .unwrap();
    assert_eq!((budget.reserved(), budget.in_use(), budget.high_water()), (0, 60, 150));
    drop(loaded);
}

#[test]
fn room_is_made_from_idle_records_least_recently_used_first() {
    let group = group(100);
    let gpu = group.cache("cuda:0");
    for key in ["a", "b"] {
        drop(gpu.get_or_put(key, 40, || Ok::<_, CacheError>(vec![0; 40])).unwrap());
    }
    drop(gpu.get("a"));
    drop(gpu.get_or_put("c", 40, || Ok::<_, CacheError>(vec![0; 40])).unwrap());
    assert_eq!(gpu.keys(), ["a", "c"], "b was the least recently used");
    assert!(group.budget().high_water() <= 100);
}

#[test]
fn a_load_that_finds_every_byte_locked_is_refused_naming_the_holders() {
    let group = group(100);
    let (gpu0, gpu1) = (group.cache("cuda:0"), group.cache("cuda:1"));
    let a = gpu0.get_or_put("a", 70, || Ok::<_, CacheError>(vec![0; 70])).unwrap().lock();
    let mut ran = false;
    let refused = gpu1.get_or_put("b", 40, || {
        ran = true;
        Ok::<_, CacheError>(vec![0; 40])
    });
    let Err(CacheError::NoRoom { key, needed, cap, in_use, reserved, holders, .. }) = refused else {
        panic!("expected NoRoom, got {:?}", refused.map(drop));
    };
    assert_eq!((key.as_str(), needed, cap, in_use, reserved), ("b", 40, 100, 70, 0));
    assert!(holders.contains("a (70 B, locked, cuda:0)"), "{holders}");
    assert!(!ran, "the loader ran without room");
    assert_eq!((group.budget().committed(), gpu1.keys().len()), (70, 0), "nothing changed");
    drop(a);
    assert!(gpu1.get_or_put("b", 40, || Ok::<_, CacheError>(vec![0; 40])).is_ok(), "a is evictable now");
}

#[test]
fn a_put_of_weights_already_built_is_refused_too_and_drops_them() {
    let group = group(50);
    let gpu = group.cache("cuda:0");
    let a = gpu.put("a", vec![0; 40], 40, PutOptions::default()).unwrap().into_loaded().lock();
    let refused = gpu.put("b", vec![0; 40], 40, PutOptions::default());
    assert!(matches!(refused, Err(CacheError::NoRoom { .. })), "{:?}", refused.map(drop));
    assert_eq!(group.budget().in_use(), 40);
    drop(a);
}

#[test]
fn an_undeclared_load_is_refused_before_it_runs() {
    let group = group(100);
    let gpu = group.cache("cuda:0");
    let refused = gpu.get_or_put("m", Declared::unknown(), || -> Result<Weights, CacheError> {
        unreachable!("an undeclared load never runs")
    });
    assert!(matches!(refused, Err(CacheError::SizeUnknown { .. })), "{:?}", refused.map(drop));
    let refused = gpu.get_or_put("m", None::<u64>, || -> Result<Weights, CacheError> { unreachable!() });
    assert!(matches!(refused, Err(CacheError::SizeUnknown { .. })));
}

#[test]
fn a_failing_or_panicking_load_gives_its_reservation_back() {
    let group = group(100);
    let gpu = group.cache("cuda:0");
    let failed = gpu.get_or_put("m", 80, || Err::<Weights, _>("disk on fire"));
    assert!(matches!(failed, Err(CacheError::Load { .. })));
    let panicked = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        gpu.get_or_put("m", 80, || -> Result<Weights, CacheError> { panic!("loader panicked") })
    }));
    assert!(panicked.is_err());
    assert_eq!((group.budget().reserved(), group.budget().in_use()), (0, 0));
}

#[test]
fn the_overflow_policy_admits_past_the_cap_and_reconciles_at_release() {
    let group = group(100);
    group.budget().set_overflow(true);
    let gpu = group.cache("cuda:0");
    let a = gpu.put("a", vec![0; 70], 70, PutOptions::default()).unwrap().into_loaded().lock();
    let b = gpu.get_or_put("b", 70, || Ok::<_, CacheError>(vec![0; 70])).unwrap().lock();
    assert_eq!(group.budget().in_use(), 140, "the overflow policy overshoots");
    drop(a);
    assert_eq!(group.budget().in_use(), 70, "the release reconciled");
    drop(b);
}

#[test]
fn a_zero_room_wait_refuses_at_once_when_nothing_can_go() {
    let group = group(100);
    group.budget().set_room_wait(Duration::ZERO);
    assert_eq!(group.budget().room_wait(), Duration::ZERO);
    let gpu = group.cache("cuda:0");
    let held = gpu.put("a", vec![0; 70], 70, PutOptions::default()).unwrap().into_loaded();
    let refused = gpu.get_or_put("b", 70, || Ok::<_, CacheError>(vec![0; 70])).unwrap_err();
    assert!(matches!(refused, CacheError::NoRoom { needed: 70, waited: Duration::ZERO, .. }), "{refused:?}");
    assert_eq!((group.budget().in_use(), group.budget().reserved()), (70, 0), "state unchanged");
    drop(held);
}

#[test]
fn the_store_alone_charges_only_what_fits_under_a_hard_budget() {
    let group = group(100);
    let store = group.store();
    let (kept, adopted) = store.insert("a", vec![0; 70], 70).expect("fits");
    assert!(!adopted);
    let refused = store.insert("b", vec![0; 40], 40).expect_err("70 + 40 is over the cap");
    assert_eq!(refused.len(), 40, "the weights come back");
    assert_eq!((group.budget().in_use(), group.budget().reserved()), (70, 0), "nothing charged");
    let (again, adopted) = store.insert("a", vec![0; 70], 70).expect("a live canonical is adopted");
    assert!(adopted && Arc::ptr_eq(&kept, &again), "no room needed to adopt");
    drop((kept, again));
    assert_eq!(group.budget().in_use(), 0);
}

#[test]
fn a_cap_lowered_below_a_resident_model_still_serves_it_and_a_closed_group_says_so_first() {
    let group = group(100);
    let (cpu, gpu) = (group.cache("cpu"), group.cache("cuda:0"));
    let held = cpu.get_or_put("a", 60, || Ok::<_, CacheError>(vec![0; 60])).unwrap().lock();
    // The lowering cannot evict the locked `a` in time: refused, the cap stays lowered.
    let lowered = group.set_cap(50, resident::CallOptions::new());
    assert!(matches!(lowered, Err(CacheError::OverCap { cap: 50, .. })), "{lowered:?}");
    let never = || -> Result<Weights, CacheError> { panic!("nothing may load") };
    // A hit is served whatever the cap became (SPEC 4: `TooLarge` is refused before admission).
    let served = cpu.get_or_put("a", 60, never).expect("a is resident in cpu").lock();
    assert_eq!(served.len(), 60);
    // Adopting it into another cache is an admission: refused, nothing changed.
    let refused = gpu.get_or_put("a", 60, never);
    assert!(matches!(refused, Err(CacheError::TooLarge { bytes: 60, cap: 50, .. })), "{:?}", refused.err());
    assert!(gpu.keys().is_empty());
    drop((held, served));
    group.shutdown();
    // A closed group refuses with `ShutDown` first, whatever the size.
    let closed = gpu.get_or_put("a", 60, never);
    assert!(matches!(closed, Err(CacheError::ShutDown { .. })), "{:?}", closed.err());
}
