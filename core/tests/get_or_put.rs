//! `DeviceCache::get_or_put` on the production runtime: a hit, a peer's canonical adopted
//! without loading, a failed load admitting nothing, bad input refused before any load.
//! (Its concurrent single flight is checked by the sim's X-1.)

use std::cell::Cell;
use std::time::Duration;

use resident::cache::CacheGroup;
use resident::{CacheError, InvalidConfig};

type Weights = Vec<u8>;

#[derive(Debug, thiserror::Error)]
#[error("the file is gone")]
struct Gone;

#[test]
fn a_key_is_loaded_once_for_the_whole_group() {
    let group = CacheGroup::<Weights>::new(100).unwrap();
    let (gpu0, gpu1) = (group.cache("cuda:0"), group.cache("cuda:1"));
    let loads = Cell::new(0);
    let load = || {
        loads.set(loads.get() + 1);
        Ok::<_, Gone>(vec![1; 40])
    };
    let a = gpu0.get_or_put("m", 40, load).unwrap().lock();
    let again = gpu0.get_or_put("m", 40, load).unwrap().lock();
    let b = gpu1.get_or_put("m", 40, load).unwrap().lock();
    assert_eq!(loads.get(), 1, "a hit and an adoption load nothing");
    assert!(a.shares_weights_with(&b) && a.shares_weights_with(&again));
    assert_eq!(group.budget().in_use(), 40, "one canonical, counted once, at its declared size");
}

#[test]
fn a_failed_load_is_a_typed_error_and_admits_nothing() {
    let group = CacheGroup::<Weights>::new(100).unwrap();
    let gpu0 = group.cache("cuda:0");
    let failed = gpu0.get_or_put("m", 40, || Err::<Weights, _>(Gone)).unwrap_err();
    match &failed {
        CacheError::Load { key, source } => {
            assert_eq!(key, "m");
            assert!(source.downcast_ref::<Gone>().is_some(), "the loader's error is kept");
        }
        other => panic!("expected a load error, got {other:?}"),
    }
    assert!(gpu0.get("m").is_none());
    assert_eq!(group.budget().in_use(), 0);
    assert!(gpu0.get_or_put("m", 40, || Ok::<_, Gone>(vec![1; 40])).is_ok(), "the next call loads");
}

#[test]
fn bad_input_is_refused_before_any_load() {
    let group = CacheGroup::<Weights>::new(100).unwrap();
    let gpu0 = group.cache("cuda:0");
    let loaded = Cell::new(false);
    let bad = gpu0.get_or_put("../m", 40, || {
        loaded.set(true);
        Ok::<_, Gone>(vec![1; 40])
    });
    assert!(matches!(bad, Err(CacheError::InvalidKey { .. })), "{bad:?}");
    assert!(!loaded.get());
    let too_large = gpu0.get_or_put("m", 101, || {
        loaded.set(true);
        Ok::<_, Gone>(vec![1; 101])
    });
    assert!(matches!(too_large, Err(CacheError::TooLarge { bytes: 101, cap: 100, .. })), "{too_large:?}");
    assert!(!loaded.get(), "a declared size over the budget is refused before loading");
    assert_eq!(group.budget().in_use(), 0);
    assert!(matches!(group.set_load_wait(Duration::ZERO), Err(InvalidConfig { field: "load_wait", .. })));
    assert_eq!(group.load_wait(), Duration::from_secs(60));
}
