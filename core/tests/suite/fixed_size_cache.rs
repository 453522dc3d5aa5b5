//! FixedSizeCache on the production runtime: the exact-order cases of the upstream fix, LRU
//! policy, pins, leases, capacity. Every case runs on a one-deep stack (cache over base) and a
//! three-deep one (cache over tracing passthrough over base).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use resident::{
    Added, BoxError, CapacityPolicy, FixedSizeCache, FixedSizeConfig, Loader, Manager, ManagerConfig,
    ManagerError, ManagerExt, Model, ModelId, ModelManager, Traced,
};

#[derive(Default)]
struct Knobs {
    failing_unloads: Mutex<BTreeSet<String>>,
    sizes: Mutex<BTreeMap<String, u64>>,
}

struct SizedModel {
    canonical: String,
    bytes: u64,
    knobs: Arc<Knobs>,
}

impl Model for SizedModel {
    fn size_bytes(&self) -> u64 {
        self.bytes
    }

    fn unload(&self) -> Result<(), BoxError> {
        if self.knobs.failing_unloads.lock().unwrap().contains(&self.canonical) {
            return Err(format!("unload of {} refused", self.canonical).into());
        }
        Ok(())
    }
}

#[derive(Default)]
struct SizedLoader(Arc<Knobs>);

impl Loader for SizedLoader {
    type Model = SizedModel;

    fn load(&self, id: &ModelId) -> Result<SizedModel, BoxError> {
        let bytes = self.0.sizes.lock().unwrap().get(id.as_str()).copied().unwrap_or(1);
        Ok(SizedModel { canonical: id.to_string(), bytes, knobs: Arc::clone(&self.0) })
    }
}

fn base() -> (Arc<Knobs>, ModelManager<SizedLoader>) {
    let knobs = Arc::new(Knobs::default());
    let config = ManagerConfig::default()
        .with_lock_timeout(Duration::from_millis(200))
        .with_lease_drain_timeout(Duration::from_millis(20));
    (Arc::clone(&knobs), ModelManager::with_config(SizedLoader(knobs), config).unwrap())
}

fn config(max_size: usize) -> FixedSizeConfig {
    FixedSizeConfig::new(max_size).with_capacity_wait(Duration::from_millis(20))
}

fn queue<M: Manager>(cache: &FixedSizeCache<M>) -> Vec<String> {
    cache.queue().iter().map(ModelId::to_string).collect()
}

fn registered<M: Manager>(cache: &FixedSizeCache<M>) -> Vec<String> {
    cache.ids().iter().map(ModelId::to_string).collect()
}

/// Adds `ids` in order, then leases `order` so that the LRU order is `order`.
fn fill<M: Manager>(cache: &FixedSizeCache<M>, ids: &[&str]) {
    for id in ids {
        cache.add_model(id, None).unwrap();
    }
    for id in ids {
        drop(cache.lease(id).unwrap());
    }
    assert_eq!(queue(cache), ids);
}

fn failed_direct_remove_preserves_exact_lru_order<M: Manager>(knobs: &Knobs, cache: FixedSizeCache<M>) {
    fill(&cache, &["A", "X", "B"]);
    knobs.failing_unloads.lock().unwrap().insert("X".into());
    assert!(matches!(cache.remove("X"), Err(ManagerError::Unload { .. })));
    assert_eq!(queue(&cache), ["A", "X", "B"]);
    assert!(cache.contains("X"));
}

fn failed_eviction_restores_skipped_pinned_order<M: Manager>(knobs: &Knobs, cache: FixedSizeCache<M>) {
    fill(&cache, &["P1", "P2", "A", "B"]);
    cache.pin("P1").unwrap();
    cache.pin("P2").unwrap();
    knobs.failing_unloads.lock().unwrap().insert("A".into());
    assert!(matches!(cache.add_model("N", None), Err(ManagerError::Unload { .. })));
    assert_eq!(queue(&cache), ["P1", "P2", "A", "B"]);
    assert!(!cache.contains("N"));
    assert_eq!(cache.loading(), 0);
}

fn failed_multi_eviction_keeps_only_registered_models<M: Manager>(knobs: &Knobs, cache: FixedSizeCache<M>) {
    // Byte budget 10: P1, V, A, B, C at 2 bytes each; N at 5 needs two victims after it loads.
    knobs.sizes.lock().unwrap().insert("N".into(), 5);
    for id in ["P1", "V", "A", "B", "C"] {
        knobs.sizes.lock().unwrap().insert(id.into(), 2);
    }
    fill(&cache, &["P1", "V", "A", "B", "C"]);
    cache.pin("P1").unwrap();
    knobs.failing_unloads.lock().unwrap().insert("A".into());
    assert_eq!(cache.add_model("N", None).unwrap(), Added::Loaded, "the load itself succeeded");
    assert_eq!(queue(&cache), ["P1", "A", "B", "C", "N"], "V evicted and gone; A failed and kept its place");
    let mut reg = registered(&cache);
    reg.sort();
    let mut q = queue(&cache);
    q.sort();
    assert_eq!(q, reg, "queue holds exactly the registered ids");
}

fn evicts_only_as_many_as_needed_lru_first<M: Manager>(_: &Knobs, cache: FixedSizeCache<M>) {
    fill(&cache, &["A", "B", "C", "D"]);
    assert_eq!(cache.add_model("N", None).unwrap(), Added::Loaded);
    assert_eq!(queue(&cache), ["B", "C", "D", "N"], "one eviction, not a round of three");
    assert_eq!(registered(&cache), ["B", "C", "D", "N"]);
}

fn skips_models_in_use_and_pins<M: Manager>(_: &Knobs, cache: FixedSizeCache<M>) {
    fill(&cache, &["A", "B", "C", "D"]);
    cache.pin("B").unwrap();
    let lease = cache.lease("A").unwrap(); // A is now MRU anyway; take it back to LRU:
    for id in ["C", "D", "B"] {
        drop(cache.lease(id).unwrap());
    }
    assert_eq!(queue(&cache), ["A", "C", "D", "B"]);
    cache.add_model("N", None).unwrap();
    assert_eq!(queue(&cache), ["A", "D", "B", "N"], "A in use and B pinned were skipped; C went");
    drop(lease);
}

fn strict_capacity_fails_typed_and_overflow_loads<M: Manager>(_: &Knobs, cache: FixedSizeCache<M>) {
    fill(&cache, &["A", "B", "C", "D"]);
    for id in ["A", "B", "C", "D"] {
        cache.pin(id).unwrap();
    }
    let err = cache.add_model("N", None).unwrap_err();
    assert!(matches!(err, ManagerError::CapacityExhausted { max_size: 4, registered: 4, .. }), "{err}");
    assert_eq!(queue(&cache), ["A", "B", "C", "D"]);
    assert!(!cache.contains("N"));
    cache.unpin("A").unwrap();
    cache.add_model("N", None).unwrap();
    assert_eq!(queue(&cache), ["B", "C", "D", "N"]);
}

fn alias_loads_under_the_resolved_id<M: Manager>(_: &Knobs, cache: FixedSizeCache<M>) {
    cache.add_model("coco/3", None).unwrap();
    assert_eq!(cache.add_model("coco/3", Some("yolov8n-640")).unwrap(), Added::Loaded);
    assert_eq!(queue(&cache), ["coco/3", "yolov8n-640"]);
    assert_eq!(cache.lease("yolov8n-640").unwrap().id().as_str(), "yolov8n-640");
}

fn touching_an_unknown_id_leaves_no_phantom<M: Manager>(_: &Knobs, cache: FixedSizeCache<M>) {
    cache.add_model("A", None).unwrap();
    assert!(matches!(cache.lease("Z"), Err(ManagerError::NotFound { .. })));
    assert_eq!(queue(&cache), ["A"]);
    cache.remove("A").unwrap();
    assert!(matches!(cache.lease("A"), Err(ManagerError::NotFound { .. })));
    assert!(queue(&cache).is_empty());
}

/// A model added below the cache, behind its back, joins the queue at its next add through the
/// cache (a warm one): from then on it counts against `max_size` and can be evicted (I4).
fn a_warm_add_queues_a_model_added_below<M: Manager>(_: &Knobs, cache: FixedSizeCache<M>) {
    fill(&cache, &["A", "B"]);
    cache.get_ref().add_model("X", None).unwrap();
    assert_eq!(queue(&cache), ["A", "B"], "the cache did not see it");
    assert_eq!(cache.add_model("X", None).unwrap(), Added::Warm);
    assert_eq!(queue(&cache), ["A", "B", "X"]);
    for id in ["C", "D"] {
        assert_eq!(cache.add_model(id, None).unwrap(), Added::Loaded);
    }
    assert_eq!(queue(&cache), ["B", "X", "C", "D"], "A evicted: X counted");
    assert_eq!(registered(&cache), ["B", "C", "D", "X"]);
}

/// A model built outside the manager, for `register`.
fn prebuilt(name: &str) -> SizedModel {
    SizedModel { canonical: format!("prebuilt {name}"), bytes: 1, knobs: Arc::default() }
}

fn register_goes_through_admission<M: Manager<Model = SizedModel>>(_: &Knobs, cache: FixedSizeCache<M>) {
    fill(&cache, &["A", "B", "C", "D"]);
    cache.register("N", prebuilt("N")).unwrap();
    assert_eq!(queue(&cache), ["B", "C", "D", "N"], "admitted like a cold add: A evicted");
    assert_eq!(cache.infer("N", |m| m.canonical.clone()).unwrap(), "prebuilt N");

    let refused = cache.register("N", prebuilt("again")).unwrap_err();
    assert!(matches!(refused.error, ManagerError::AlreadyRegistered { .. }), "{:?}", refused.error);
    assert_eq!(refused.model.canonical, "prebuilt again", "the model comes back");
    assert_eq!(cache.infer("N", |m| m.canonical.clone()).unwrap(), "prebuilt N", "the first one stays");

    for id in ["B", "C", "D", "N"] {
        cache.pin(id).unwrap();
    }
    let refused = cache.register("M", prebuilt("M")).unwrap_err();
    assert!(matches!(refused.error, ManagerError::CapacityExhausted { .. }), "{:?}", refused.error);
    assert_eq!(refused.model.canonical, "prebuilt M");
    assert_eq!(queue(&cache), ["B", "C", "D", "N"], "nothing changed");
    assert!(!cache.contains("M") && cache.loading() == 0);

    let refused = cache.register("a/../b", prebuilt("bad")).unwrap_err();
    assert!(matches!(refused.error, ManagerError::InvalidId(_)), "{:?}", refused.error);
    let error: ManagerError = refused.into();
    assert!(matches!(error, ManagerError::InvalidId(_)), "`?` keeps the error");
}

fn clear_removes_pinned_models_keeps_pins_and_reports_the_rest<M: Manager>(
    knobs: &Knobs,
    cache: FixedSizeCache<M>,
) {
    fill(&cache, &["A", "B", "C", "D"]);
    cache.pin("B").unwrap();
    knobs.failing_unloads.lock().unwrap().insert("C".into());
    let lease = cache.lease("D").unwrap();
    let report = cache.clear_with(resident::CallOptions::new());
    let ids = |ids: &[ModelId]| ids.iter().map(ModelId::to_string).collect::<Vec<_>>();
    assert_eq!(ids(&report.removed), ["A", "B"], "the pinned B went too");
    let failed: Vec<_> = report.failed.iter().map(|(id, e)| (id.to_string(), e.clone())).collect();
    assert!(
        matches!(&failed[..], [(c, ManagerError::Unload { .. }), (d, ManagerError::Busy { .. })] if c == "C" && d == "D"),
        "past the first failure, every id reported: {failed:?}"
    );
    assert_eq!(registered(&cache), ["C", "D"]);
    assert_eq!(queue(&cache), ["C", "D"], "the queue follows");
    assert!(cache.is_pinned("B"), "the pin stays");
    assert_eq!(lease.id().as_str(), "D", "a model that could not go serves on");

    drop(lease);
    knobs.failing_unloads.lock().unwrap().clear();
    let report = cache.clear_with(resident::CallOptions::new());
    assert!(report.is_complete() && cache.is_empty() && queue(&cache).is_empty(), "{report:?}");
    assert_eq!(cache.pinned(), [ModelId::new("B").unwrap()]);
}

macro_rules! on_both_stacks {
    ($($case:ident($max:expr $(, bytes $bytes:expr)?),)*) => {
        mod one_deep {
            use super::*;
            $( #[test] fn $case() {
                let (knobs, base) = base();
                let cfg = config($max)$(.with_max_bytes($bytes))?;
                super::$case(&knobs, FixedSizeCache::new(base, cfg).unwrap());
            } )*
        }
        mod three_deep {
            use super::*;
            $( #[test] fn $case() {
                let (knobs, base) = base();
                let cfg = config($max)$(.with_max_bytes($bytes))?;
                super::$case(&knobs, FixedSizeCache::new(Traced::new(base), cfg).unwrap());
            } )*
        }
    };
}

on_both_stacks! {
    failed_direct_remove_preserves_exact_lru_order(4),
    failed_eviction_restores_skipped_pinned_order(4),
    failed_multi_eviction_keeps_only_registered_models(8, bytes 10),
    evicts_only_as_many_as_needed_lru_first(4),
    skips_models_in_use_and_pins(4),
    strict_capacity_fails_typed_and_overflow_loads(4),
    alias_loads_under_the_resolved_id(4),
    touching_an_unknown_id_leaves_no_phantom(4),
    a_warm_add_queues_a_model_added_below(4),
    register_goes_through_admission(4),
    clear_removes_pinned_models_keeps_pins_and_reports_the_rest(4),
}

#[test]
fn the_overflow_policy_loads_past_max_size() {
    let (_, base) = base();
    let cache = FixedSizeCache::new(base, config(1).with_policy(CapacityPolicy::Overflow)).unwrap();
    cache.add_model("A", None).unwrap();
    cache.pin("A").unwrap();
    assert_eq!(cache.add_model("B", None).unwrap(), Added::Loaded);
    assert_eq!(queue(&cache), ["A", "B"]);
    // Over the limit with one idle model: the next add evicts it, and overflows by one only.
    cache.add_model("C", None).unwrap();
    assert_eq!(queue(&cache), ["A", "C"]);
    cache.add_model("D", None).unwrap();
    assert_eq!(queue(&cache), ["A", "D"]);
}

#[test]
fn pins_reach_every_layer_of_a_nested_stack() {
    let (_, base) = base();
    let inner = FixedSizeCache::new(base, config(2)).unwrap();
    let outer = FixedSizeCache::new(Traced::new(inner), config(3)).unwrap();
    outer.add_model("A", None).unwrap();
    outer.pin("A").unwrap();
    outer.add_model("B", None).unwrap();
    outer.add_model("C", None).unwrap(); // the inner cache (2) must evict B, not the pinned A
    let inner = outer.get_ref().get_ref();
    assert_eq!(queue(inner), ["A", "C"]);
    assert!(inner.pinned().iter().any(|p| p.as_str() == "A"));
    outer.unpin("A").unwrap();
    assert!(inner.pinned().is_empty());
    assert_eq!(outer.snapshot().registered.len(), 2, "snapshot reaches the base through both caches");
}

#[test]
fn a_zero_capacity_is_refused() {
    let (_, base) = base();
    let err = FixedSizeCache::new(base, FixedSizeConfig::new(0)).unwrap_err();
    assert_eq!(err.field, "max_size");
}

/// A user's own decorator: it overrides only `add_locked` (counting adds); every other method
/// is a default of `Decorator` (forwarding) or of `Manager` (`len`, `is_empty`, `pin`,
/// `add_model`, `remove`, `infer`, `register`, `clear`, `shutdown`).
struct CountingAdds<M> {
    inner: M,
    adds: Mutex<usize>,
}

impl<M: Manager> resident::layer::Decorator for CountingAdds<M> {
    type Inner = M;

    fn inner(&self) -> &M {
        &self.inner
    }

    fn add_locked(
        &self,
        guard: &resident::LifecycleGuard<M::Model, M::Runtime>,
        canonical: &ModelId,
    ) -> Result<Added, ManagerError> {
        *self.adds.lock().unwrap() += 1;
        self.inner.add_locked(guard, canonical)
    }
}

#[test]
fn a_users_own_decorator_composes_through_the_traits_defaults() {
    let (_, base) = base();
    let counting = CountingAdds { inner: base, adds: Mutex::new(0) };
    assert!(counting.is_empty());
    counting.add_model("A", None).unwrap();
    counting.add_model("coco/1", Some("B")).unwrap();
    assert_eq!(
        (counting.len(), counting.is_empty()),
        (2, false),
        "the default len counts the registered ids"
    );
    assert_eq!(counting.infer("B", |m| m.canonical.clone()).unwrap(), "coco/1");
    counting.pin("A").unwrap();
    counting.remove("B").unwrap();
    assert_eq!(counting.len(), 1);

    // Under a cache: the cache's evictions reach the base through the user's layer.
    let cache = FixedSizeCache::new(counting, config(1)).unwrap();
    cache.unpin("A").unwrap();
    cache.add_model("A", None).unwrap();
    cache.add_model("C", None).unwrap();
    assert_eq!(registered(&cache), ["C"], "A evicted through the user's layer");
    assert_eq!((cache.len(), cache.get_ref().len()), (1, 1));
    assert_eq!(*cache.get_ref().adds.lock().unwrap(), 4, "every add went through the user's layer");

    // A shutdown through the user's layer: the cache's queue learns of every unload.
    let report = cache.shutdown_with(resident::CallOptions::new());
    assert!(report.is_complete(), "{report:?}");
    assert_eq!(report.removed, [ModelId::new("C").unwrap()]);
    assert!(cache.queue().is_empty() && cache.is_empty() && cache.is_shut_down());
    assert!(matches!(cache.add_model("A", None), Err(ManagerError::ShutDown { .. })));
    assert_eq!(*cache.get_ref().adds.lock().unwrap(), 4, "a cold add is refused before it makes room");
}

/// A decorator that overrides nothing but `add_locked` forwards the rest: a cache above it
/// sees its pins, and a register through it (and through the cache) reaches the base.
#[test]
fn a_users_decorator_forwards_pins_and_registers() {
    let (knobs, base) = base();
    let inner = FixedSizeCache::new(base, config(2)).unwrap();
    let counting = CountingAdds { inner, adds: Mutex::new(0) };
    counting.add_model("A", None).unwrap();
    counting.pin("A").unwrap();
    assert!(counting.is_pinned("A"), "the pin of the cache below shows through the decorator");
    assert!(!counting.is_pinned("B"));
    let built = SizedModel { canonical: "B".into(), bytes: 1, knobs: Arc::clone(&knobs) };
    counting.register("B", built).unwrap_or_else(|refused| panic!("{}", refused.error));
    assert_eq!(counting.infer("B", |m| m.canonical.clone()).unwrap(), "B", "registered below");
    assert_eq!(queue(&counting.inner), ["A", "B"], "admitted by the cache below");
    assert_eq!(*counting.adds.lock().unwrap(), 1, "a register is no add");
}
