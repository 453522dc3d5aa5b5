//! [`Probed`]: any [`Loader`] (and the models it builds) with the built-in probes, so that the
//! manager's invariants hold over an application's own stack under the checkers: one load of a
//! registration at a time (I1), no unload beside it (I2), a released lifecycle table (I3) and
//! one live model per registration (I14) at quiescence, no model used after its unload (L1),
//! and user code never inside an internal monitor (U1). `docs/spec.md` §7 defines each.
//!
//! The probes are keyed on the id a model is *registered* under (an alias, or its model id),
//! which the manager tells the loader ([`Loader::load_as`]): two aliases of one model may load
//! it at the same time.

use std::collections::BTreeMap;
use std::ops::Deref;

use resident::runtime::{Arc, Monitor};
use resident::{BoxError, Deadline, Loader, Manager, Model, ModelId};

use crate::ensure;
use crate::runtime::{Counter, SimRuntime};
use crate::world::checks::{ensure_outside_monitors, exclusive, lifecycle_released, not_unloaded};

/// The counters of one registration id.
struct Registration<R: SimRuntime> {
    /// Loads running (I1).
    loads: R::Counter,
    /// Loads and unloads running (I2).
    mutations: R::Counter,
    /// Models built for it, neither unloaded nor dropped (I14).
    alive: R::Counter,
}

/// The probes of every registration a [`Probed`] loader has seen.
pub struct Probes<R: SimRuntime> {
    // The checker's own monitor: a registration's counters, created by one thread and read by
    // another, are published through it (loom checks that they are).
    by_id: R::Monitor<BTreeMap<String, Arc<Registration<R>>>>,
    /// Loads that came without their registration (`load`, `load_until`, `reload_until`
    /// called directly: a loader wrapping this one that does not forward `load_as`).
    unregistered: R::Counter,
}

impl<R: SimRuntime> Probes<R> {
    fn registration(&self, id: &str) -> Arc<Registration<R>> {
        let fresh = || Registration {
            loads: R::counter_for_model(),
            mutations: R::counter_for_model(),
            alive: R::counter_for_model(),
        };
        self.by_id.with(|by_id| Arc::clone(by_id.entry(id.to_owned()).or_insert_with(|| Arc::new(fresh()))))
    }

    fn all(&self) -> Vec<(String, Arc<Registration<R>>)> {
        self.by_id.with(|by_id| by_id.iter().map(|(id, r)| (id.clone(), Arc::clone(r))).collect())
    }

    /// Models built and neither unloaded nor dropped, over every registration.
    pub fn alive(&self) -> usize {
        self.all().iter().map(|(_, r)| r.alive.get()).sum()
    }

    /// Quiescence checks over `stack`, once every thread is joined: I3 (the lifecycle table
    /// holds only registered ids, none reserved or locked) and I14 (each registration has
    /// exactly one live model; nothing built outlives its registration).
    pub fn check_quiescent<S>(&self, stack: &S)
    where
        S: Manager + ?Sized,
    {
        let snapshot = stack.snapshot();
        lifecycle_released(&snapshot);
        let registered: Vec<String> = snapshot.registered.iter().map(|id| id.as_str().to_owned()).collect();
        for (id, registration) in self.all() {
            let (alive, expected) = (registration.alive.get(), usize::from(registered.contains(&id)));
            let hint = if self.unregistered.get() > 0 {
                " (loads came without their registration: does a loader between the manager and \
                 Probed forward load_as and reload_as?)"
            } else {
                ""
            };
            ensure!(
                alive == expected,
                "I14",
                "{id}: {alive} model(s) built and not unloaded, {expected} registered{hint}"
            );
        }
    }
}

/// A [`Loader`] with the built-in probes around `L` (see the module documentation).
pub struct Probed<L, R: SimRuntime> {
    inner: L,
    probes: Arc<Probes<R>>,
}

impl<L: Loader, R: SimRuntime> Probed<L, R> {
    /// Probes `inner`'s loads and models with the checker primitives of `rt`.
    pub fn new(rt: &R, inner: L) -> Self {
        let probes = Probes { by_id: rt.monitor(BTreeMap::new()), unregistered: rt.counter() };
        Self { inner, probes: Arc::new(probes) }
    }

    /// The probes, to check at quiescence ([`Probes::check_quiescent`]).
    pub fn probes(&self) -> Arc<Probes<R>> {
        Arc::clone(&self.probes)
    }

    /// The loader inside.
    pub fn inner(&self) -> &L {
        &self.inner
    }

    /// `model`, built outside the loader, probed as a model registered under `registered`:
    /// what a [`register`](resident::ManagerExt::register) of a model built elsewhere takes.
    /// It counts as alive from now on, like a loaded one.
    pub fn prebuilt(&self, registered: &str, model: L::Model) -> ProbedModel<L::Model, R> {
        let registration = self.probes.registration(registered);
        registration.alive.add(1);
        let id = ModelId::new(registered).unwrap_or_else(|e| panic!("registered under an invalid id: {e}"));
        ProbedModel { inner: model, registration, id, unloaded: R::counter_for_model() }
    }

    fn probed(
        &self,
        registered: &ModelId,
        call: impl FnOnce(&L) -> Result<L::Model, BoxError>,
    ) -> Result<ProbedModel<L::Model, R>, BoxError> {
        ensure_outside_monitors::<R>("a load");
        let registration = self.probes.registration(registered.as_str());
        exclusive::<R>(&registration.loads, "I1", "load", registered.as_str());
        exclusive::<R>(&registration.mutations, "I2", "mutation", registered.as_str());
        let leave = Leave(&[&registration.mutations, &registration.loads]);
        let model = call(&self.inner);
        drop(leave);
        let model = model?;
        registration.alive.add(1);
        Ok(ProbedModel {
            inner: model,
            registration,
            id: registered.clone(),
            unloaded: R::counter_for_model(),
        })
    }
}

/// Leaves critical regions (decrements their counters) when dropped, a panic included.
struct Leave<'a, C: Counter>(&'a [&'a C]);

impl<C: Counter> Drop for Leave<'_, C> {
    fn drop(&mut self) {
        for counter in self.0 {
            counter.sub(1);
        }
    }
}

impl<L: Loader, R: SimRuntime> Loader for Probed<L, R> {
    type Model = ProbedModel<L::Model, R>;

    // The manager calls the `_as` forms; these come from a caller that does not know the
    // registration, keyed on the model id and counted for the quiescence check's diagnostic.
    fn load(&self, id: &ModelId) -> Result<Self::Model, BoxError> {
        self.load_until(id, Deadline::NONE)
    }

    fn load_until(&self, id: &ModelId, deadline: Deadline) -> Result<Self::Model, BoxError> {
        self.probes.unregistered.add(1);
        self.load_as(id, id, deadline)
    }

    fn reload_until(&self, id: &ModelId, deadline: Deadline) -> Result<Self::Model, BoxError> {
        self.probes.unregistered.add(1);
        self.reload_as(id, id, deadline)
    }

    fn load_as(
        &self,
        registered: &ModelId,
        id: &ModelId,
        deadline: Deadline,
    ) -> Result<Self::Model, BoxError> {
        self.probed(registered, |inner| inner.load_as(registered, id, deadline))
    }

    fn reload_as(
        &self,
        registered: &ModelId,
        id: &ModelId,
        deadline: Deadline,
    ) -> Result<Self::Model, BoxError> {
        self.probed(registered, |inner| inner.reload_as(registered, id, deadline))
    }

    fn declared_bytes(&self, id: &ModelId) -> Result<Option<u64>, BoxError> {
        self.inner.declared_bytes(id)
    }
}

/// A model built by a [`Probed`] loader: dereferences to the model inside, failing the
/// execution (L1) if that model was unloaded already.
pub struct ProbedModel<M, R: SimRuntime> {
    inner: M,
    registration: Arc<Registration<R>>,
    id: ModelId,
    /// Set once this very model has been unloaded.
    unloaded: R::Counter,
}

impl<M, R: SimRuntime> ProbedModel<M, R> {
    /// The model inside; fails the execution (L1) if it was unloaded.
    pub fn get(&self) -> &M {
        self.check_loaded();
        &self.inner
    }

    /// Runs `use_it` on the model inside as a use that spans scheduling points: it fails the
    /// execution (L1) if the model is unloaded before, during or after it (a reference taken
    /// with [`ProbedModel::get`] is checked once, when taken).
    pub fn using<T>(&self, use_it: impl FnOnce(&M) -> T) -> T {
        self.check_loaded();
        R::yield_now();
        let out = use_it(&self.inner);
        R::yield_now();
        self.check_loaded();
        out
    }

    fn check_loaded(&self) {
        let thread = R::thread_name().unwrap_or_default();
        not_unloaded(self.unloaded.get(), &thread, self.id.as_str());
    }
}

impl<M, R: SimRuntime> Deref for ProbedModel<M, R> {
    type Target = M;

    fn deref(&self) -> &M {
        self.get()
    }
}

impl<M: Model, R: SimRuntime> Model for ProbedModel<M, R> {
    fn size_bytes(&self) -> u64 {
        ensure_outside_monitors::<R>("size_bytes");
        self.inner.size_bytes()
    }

    fn unload(&self) -> Result<(), BoxError> {
        ensure_outside_monitors::<R>("an unload");
        self.check_loaded();
        exclusive::<R>(&self.registration.mutations, "I2", "mutation", self.id.as_str());
        let leave = Leave(&[&self.registration.mutations]);
        let unloaded = self.inner.unload();
        if unloaded.is_ok() {
            self.unloaded.add(1);
            self.registration.alive.sub(1);
        }
        drop(leave);
        unloaded
    }
}

impl<M, R: SimRuntime> Drop for ProbedModel<M, R> {
    fn drop(&mut self) {
        ensure_outside_monitors::<R>("a model's Drop");
        if self.unloaded.get() == 0 {
            self.registration.alive.sub(1);
        }
    }
}
