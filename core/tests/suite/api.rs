//! The shape of the public API: every method that looks a model up takes `&str` (a `&ModelId`
//! coerces to one), the two that create its lifecycle entry (`Manager::lock_until`,
//! `Manager::try_lock`) take the `ModelId` validated, `ModelId` compares with strings, and
//! `Manager` stays dyn-compatible.

use resident::{
    BoxError, FixedSizeCache, FixedSizeConfig, Loader, Manager, ManagerError, ManagerExt, Model, ModelId,
    ModelManager,
};

struct Named(String);

impl Model for Named {
    fn size_bytes(&self) -> u64 {
        self.0.len() as u64
    }
}

struct Namer;

impl Loader for Namer {
    type Model = Named;

    fn load(&self, id: &ModelId) -> Result<Named, BoxError> {
        Ok(Named(id.to_string()))
    }
}

#[test]
fn a_stack_is_usable_as_a_trait_object() {
    let stacks: Vec<Box<dyn Manager<Model = Named, Runtime = resident::runtime::StdRuntime>>> = vec![
        Box::new(ModelManager::new(Namer)),
        Box::new(FixedSizeCache::new(ModelManager::new(Namer), FixedSizeConfig::new(2)).unwrap()),
    ];
    for (n, stack) in stacks.iter().enumerate() {
        stack.add_model("a", None).unwrap();
        assert!(stack.contains("a"));
        assert_eq!(stack.lease("a").unwrap().0, "a");
        assert!(!stack.in_use("a") && !stack.is_locked("a"));
        let guard = stack.lock("a").unwrap();
        assert!(stack.is_locked("a") && stack.try_lock(&ModelId::new("a").unwrap()).is_none());
        drop(guard);
        stack.remove("a").unwrap();
        assert!(!stack.contains("a") && !stack.is_pinned("a"));
        stack.pin("b").unwrap();
        // The base pins nothing; a `FixedSizeCache` holds pins, ahead of the add too.
        assert_eq!(stack.is_pinned("b"), n == 1);
        stack.unpin("b").unwrap();
        assert!(!stack.is_pinned("b"));
    }
}

#[test]
fn methods_that_look_a_model_up_take_str_and_refuse_bad_ids_typed() {
    let manager = ModelManager::new(Namer);
    let id = ModelId::new("a").unwrap();
    manager.add_model(&id, None).unwrap();
    // A `&ModelId` goes where a `&str` does.
    assert!(manager.contains(&id) && !manager.in_use(&id));
    drop(manager.lock(&id).unwrap());
    assert!(matches!(manager.lock("../a"), Err(resident::ManagerError::InvalidId(_))));
    assert!(!manager.is_locked("../a") && !manager.in_use("../a"));
}

#[test]
fn model_ids_compare_with_strings() {
    let id = ModelId::new("coco/3").unwrap();
    assert_eq!(id, "coco/3");
    assert_eq!("coco/3", id);
    assert_eq!(*"coco/3", id);
    assert_eq!(id, *"coco/3");
    assert!(id != "coco/4");
    assert_eq!(id.len(), 6, "str methods through Deref");
    let ids = [ModelId::new("b").unwrap(), ModelId::new("a").unwrap()];
    assert!(ids.iter().any(|i| i == "a"));
}

#[test]
fn a_registered_model_serves_and_every_refusal_hands_it_back() {
    let stacks: Vec<Box<dyn Manager<Model = Named, Runtime = resident::runtime::StdRuntime>>> = vec![
        Box::new(ModelManager::new(Namer)),
        Box::new(FixedSizeCache::new(ModelManager::new(Namer), FixedSizeConfig::new(2)).unwrap()),
    ];
    for stack in &stacks {
        stack.register("built", Named("elsewhere".into())).unwrap();
        assert_eq!(stack.lease("built").unwrap().0, "elsewhere");
        assert_eq!(stack.add_model("built", None).unwrap(), resident::Added::Warm, "no load");
        let refused = stack.register("built", Named("twice".into())).unwrap_err();
        assert!(matches!(refused.error, ManagerError::AlreadyRegistered { .. }));
        assert_eq!(refused.model.0, "twice");
        assert!(std::error::Error::source(&refused).is_some(), "the error is the source");
        stack.shutdown_with(resident::CallOptions::new());
        let refused = stack.register("late", Named("late".into())).unwrap_err();
        assert!(matches!(refused.error, ManagerError::ShutDown { .. }), "{:?}", refused.error);
        assert_eq!(refused.model.0, "late");
        assert!(stack.is_empty());
    }
}

/// Why the gate refuses: the layer's own error.
#[derive(Debug, thiserror::Error)]
#[error("in maintenance")]
struct Maintenance;

/// A user's layer that refuses adds while closed, with an error of its own.
struct Gate<M> {
    inner: M,
    closed: std::sync::atomic::AtomicBool,
}

impl<M: Manager> resident::layer::Decorator for Gate<M> {
    type Inner = M;

    fn inner(&self) -> &M {
        &self.inner
    }

    fn add_locked(
        &self,
        guard: &resident::LifecycleGuard<M::Model, M::Runtime>,
        canonical: &ModelId,
    ) -> Result<resident::Added, ManagerError> {
        if self.closed.load(std::sync::atomic::Ordering::SeqCst) {
            return Err(ManagerError::refused(guard.id().clone(), "Gate", Box::new(Maintenance)));
        }
        self.inner.add_locked(guard, canonical)
    }
}

#[test]
fn a_users_layer_refuses_with_an_error_of_its_own() {
    let gate = Gate { inner: ModelManager::new(Namer), closed: true.into() };
    let error = gate.add_model("a", None).unwrap_err();
    let ManagerError::Refused { id, layer, source } = &error else { panic!("{error:?}") };
    assert_eq!((id.as_str(), *layer), ("a", "Gate"));
    assert!(source.downcast_ref::<Maintenance>().is_some(), "the layer's own error, kept");
    assert_eq!(error.to_string(), "`a` was refused by Gate: in maintenance");
    assert!(std::error::Error::source(&error).is_some_and(|s| s.to_string() == "in maintenance"));
    assert!(!gate.contains("a") && !error.is_wait_expiry(), "nothing changed below the gate");
    gate.closed.store(false, std::sync::atomic::Ordering::SeqCst);
    gate.add_model("a", None).unwrap();
    assert!(gate.contains("a"));
    // A source error is constructible from any error, for any component error of a user's.
    let kept = resident::SourceError::new(Box::new(Maintenance));
    assert!(kept.downcast_ref::<Maintenance>().is_some());
    assert_eq!(kept.to_string(), "in maintenance");
}
