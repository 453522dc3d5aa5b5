//! A call's own deadline bounds every wait of its deadline forms (SPEC 1.10), on the production
//! runtime: `ManagerExt::pin_with` and `register_with`, `DeviceCache::put_with` and `LoadedModel::lock_on_device_with`
//! each give up at the call's bound, far below the configured wait, with the typed expiry that
//! names the bound it waited. (The schedules where the wait races its wake-up are the sim's
//! `S-D2` and `S-D2p`; the generated programs check that a zero timeout never blocks.)

use std::time::Duration;

use resident::cache::{CacheGroup, DeviceWeights, PutOptions};
use resident::{
    BoxError, CacheError, CallOptions, Loader, Manager, ManagerConfig, ManagerError, ManagerExt, Model,
    ModelId,
};
use resident::{FixedSizeCache, FixedSizeConfig, ModelManager};

/// The call's bound: far below every configured wait below.
const BOUND: Duration = Duration::from_millis(20);

/// A wait configured long enough that reaching it would be a hang here.
const CONFIGURED: Duration = Duration::from_secs(600);

fn within() -> CallOptions {
    CallOptions::new().with_timeout(BOUND)
}

struct Named;

impl Model for Named {
    fn size_bytes(&self) -> u64 {
        1
    }
}

struct Loads;

impl Loader for Loads {
    type Model = Named;

    fn load(&self, _: &ModelId) -> Result<Named, BoxError> {
        Ok(Named)
    }
}

#[test]
fn pin_with_gives_up_at_the_calls_bound_while_the_lock_is_held() {
    let config = ManagerConfig::default().with_lock_timeout(CONFIGURED);
    let base = ModelManager::with_config(Loads, config).unwrap();
    let manager = FixedSizeCache::new(base, FixedSizeConfig::new(2)).unwrap();
    manager.add_model("m", None).unwrap();
    let held = manager.lock("m").unwrap();
    let refused = manager.pin_with("m", within());
    assert!(
        matches!(&refused, Err(ManagerError::LockTimeout { waited, .. }) if *waited <= BOUND),
        "{refused:?}"
    );
    assert!(!manager.is_pinned("m"), "a refused pin changes nothing");
    drop(held);
    manager.pin_with("m", within()).expect("a free lock pins at once");
    assert!(manager.is_pinned("m"));
}

#[test]
fn register_with_gives_up_at_the_calls_bound_and_hands_the_model_back() {
    let config = ManagerConfig::default().with_lock_timeout(CONFIGURED);
    let base = ModelManager::with_config(Loads, config).unwrap();
    let manager = FixedSizeCache::new(base, FixedSizeConfig::new(2)).unwrap();
    let held = manager.lock("m").unwrap();
    let refused = manager.register_with("m", Named, within()).unwrap_err();
    assert!(
        matches!(&refused.error, ManagerError::LockTimeout { waited, .. } if *waited <= BOUND),
        "{:?}",
        refused.error
    );
    assert!(!manager.contains("m") && manager.queue().is_empty(), "a refused registration changes nothing");
    drop(held);
    manager.register_with("m", refused.model, within()).expect("a free lock registers at once");
    assert_eq!(manager.ids(), [ModelId::new("m").unwrap()]);
}

#[test]
fn put_with_gives_up_at_the_calls_bound_when_no_room_comes() {
    let group = CacheGroup::<Vec<u8>>::new(100).unwrap();
    group.budget().set_room_wait(CONFIGURED);
    let cpu = group.cache("cpu");
    let held = cpu.get_or_put("a", 60, || Ok::<_, CacheError>(vec![0; 60])).unwrap().lock();
    let refused = cpu.put_with("b", vec![0; 60], 60, PutOptions::default(), within());
    assert!(
        matches!(&refused, Err(CacheError::NoRoom { waited, .. }) if *waited <= BOUND),
        "{:?}",
        refused.err()
    );
    assert_eq!(cpu.keys(), ["a"], "nothing admitted");
    drop(held);
    let admitted = cpu.put_with("b", vec![0; 60], 60, PutOptions::default(), within());
    assert!(admitted.is_ok(), "room made from the idle a: {:?}", admitted.err());
}

/// Weights whose device copy takes `.0` device bytes.
struct OnDevice(u64);

impl DeviceWeights for OnDevice {
    type OnDevice = ();

    fn device_bytes(&self) -> u64 {
        self.0
    }

    fn to_device(&self, _: &str) -> Result<(), BoxError> {
        Ok(())
    }
}

#[test]
fn lock_on_device_with_gives_up_at_the_calls_bound_when_the_device_stays_full() {
    let group = CacheGroup::<OnDevice>::new(1000).unwrap();
    let gpu = group.cache("cuda:0");
    gpu.set_move_wait(CONFIGURED).unwrap();
    gpu.set_device_budget(Some(100), CallOptions::new()).unwrap();
    let put = |key: &str| gpu.put(key, OnDevice(60), 10, PutOptions::default()).unwrap().into_loaded();
    let placed = put("a").lock_on_device_with(within()).unwrap();
    let refused = put("b").lock_on_device_with(within());
    assert!(
        matches!(&refused, Err(e @ CacheError::DeviceFull { needed: 60, budget: 100, .. }) if e.is_wait_expiry()),
        "{:?}",
        refused.err()
    );
    drop(placed);
    let b = gpu.get("b").unwrap().lock_on_device_with(within());
    assert!(b.is_ok(), "the unlocked copy of a is offloaded: {:?}", b.err());
}
