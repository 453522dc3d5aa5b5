//! The manager half of a [`World`]: a scripted loader whose models count every concurrent load
//! and unload with the checker's atomics, the stack under test, and the checks that run at
//! quiescence.

use std::collections::BTreeMap;
use std::time::Duration;

use resident::runtime::Arc;
use resident::{BoxError, Loader, Manager, ManagerConfig, ManagerExt, Model, ModelId, ModelManager};

use crate::latch::Latch;
use crate::runtime::{Counter, SimRuntime};
use crate::violation::InjectedPanic;
use crate::world::checks::ensure_outside_monitors;
use crate::world::{World, checks};

/// What one call of a scripted load or unload does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub enum Step {
    /// Succeed.
    Ok,
    /// Return an error.
    Fail,
    /// Panic with [`InjectedPanic`].
    Panic,
    /// Return the expiry of a bounded wait inside the call (a `CacheError::LoadWaitTimeout`,
    /// as a cache-backed loader returns when its caller's deadline passes): the caller's own
    /// error, never the load's failure (S-F2).
    Expire,
}

/// The error a scripted [`Step::Fail`] returns: user code whose `Drop` checks that it runs
/// outside every internal monitor (a manager keeps failed loads' errors to share them).
struct InjectedError<R: SimRuntime> {
    message: String,
    _runtime: std::marker::PhantomData<fn() -> R>,
}

impl<R: SimRuntime> InjectedError<R> {
    fn boxed(message: String) -> BoxError {
        Box::new(Self { message, _runtime: std::marker::PhantomData })
    }
}

impl<R: SimRuntime> std::fmt::Debug for InjectedError<R> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

impl<R: SimRuntime> std::fmt::Display for InjectedError<R> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

impl<R: SimRuntime> std::error::Error for InjectedError<R> {}

impl<R: SimRuntime> Drop for InjectedError<R> {
    /// User code, outside every monitor; and, like every user `Drop`, one that may panic: never
    /// run in an unwind outside a catch entered during it, where production's would abort.
    fn drop(&mut self) {
        ensure_outside_monitors::<R>("a loader error's Drop");
        if crate::unwinding::panic_would_abort() {
            crate::violation::Violation::record(
                "abort",
                format!("a loader error's Drop ({}) ran while its thread unwinds", self.message),
            );
        }
    }
}

/// The error a scripted [`Step::Expire`] returns.
fn expired(id: &str) -> BoxError {
    Box::new(resident::CacheError::LoadWaitTimeout { key: id.to_owned(), waited: Duration::from_millis(5) })
}

/// Counters and scripted panics of one model id.
pub struct IdProbe<R: SimRuntime> {
    id: String,
    constructed: R::Counter,
    unloaded: R::Counter,
    /// Models dropped without a successful unload (a replaced version detached from the
    /// registry ends so).
    dropped: R::Counter,
    size_calls: R::Counter,
    size_panics: bool,
    drop_panics: bool,
    /// `size_bytes` of the `n`th model of this id built (the last for later ones; 1 if empty).
    sizes: Vec<u64>,
}

impl<R: SimRuntime> IdProbe<R> {
    /// The size of the model of this id about to be built (read before counting it).
    fn next_size(&self) -> u64 {
        // No counter read without sizes: a read is a scheduling point, and stored schedules
        // of worlds without sizes must not move.
        if self.sizes.is_empty() {
            return 1;
        }
        let built = self.constructed.get();
        self.sizes.get(built).or(self.sizes.last()).copied().unwrap_or(1)
    }

    /// Models of this id built, neither unloaded nor dropped (read at quiescence: three reads).
    pub fn alive(&self) -> usize {
        self.constructed.get() - self.unloaded.get() - self.dropped.get()
    }

    /// Models of this id unloaded successfully.
    pub fn unloaded(&self) -> usize {
        self.unloaded.get()
    }

    /// Models of this id dropped without a successful unload.
    pub fn dropped(&self) -> usize {
        self.dropped.get()
    }
}

/// One resolved id: the scripts of the loads and unloads of the models registered under it
/// (they are serialised by its lifecycle lock, so call order is registration order), and its
/// critical regions: its loads (I1), and its loads and unloads (I2).
struct Region<R: SimRuntime> {
    load_script: Vec<Step>,
    unload_script: Vec<Step>,
    load_calls: R::Counter,
    unload_calls: R::Counter,
    loads: R::Counter,
    mutations: R::Counter,
}

impl<R: SimRuntime> Region<R> {
    fn new(rt: &R, load_script: &[Step], unload_script: &[Step]) -> Self {
        Self {
            load_script: load_script.to_vec(),
            unload_script: unload_script.to_vec(),
            load_calls: rt.counter(),
            unload_calls: rt.counter(),
            loads: rt.counter(),
            mutations: rt.counter(),
        }
    }
}

/// Scripts and counters of every id a scenario uses.
pub struct Probe<R: SimRuntime> {
    pub(crate) ids: BTreeMap<String, IdProbe<R>>,
    /// Models alive over every id, kept in one counter so that the capacity check reads it in
    /// one step (a sum of per-id reads could straddle an unload and a load).
    alive: R::Counter,
    /// By resolved id: a model id, or an alias its models are registered under.
    regions: BTreeMap<String, Region<R>>,
    work: usize,
    /// Opened by the scenario; gated unloads wait for it.
    pub gate: Latch<R>,
    /// Unloads of gated ids that have started.
    pub gated_unloads: Latch<R>,
    gated: Vec<String>,
    /// Ids whose loads wait for the gate.
    gated_loads: Vec<String>,
    /// Ids whose loads after their first wait for the gate.
    gated_reloads: Vec<String>,
    capacity: Option<usize>,
    observer: Option<Arc<dyn CallObserver>>,
}

/// Told about every scripted unload as it runs: what generated programs record as events of
/// their history (an eviction's unload happens long before its add returns). It also names the
/// resolved id of a load, which the loader is not told.
pub trait CallObserver: Send + Sync {
    /// An unload of the model registered under `resolved` starts; returns a token for
    /// [`CallObserver::ended`].
    fn started(&self, resolved: &str) -> usize;
    /// The unload of `token` ended: `Some(ok)` if it returned, `None` if it panicked.
    fn ended(&self, token: usize, ok: Option<bool>);
    /// The resolved id the calling thread's add registers the model it loads under, if it is
    /// an alias (`None`: the model id the loader is given). Loads and unloads are exclusive per
    /// resolved id (I1, I2): two aliases of one model may load it at the same time.
    fn loading_as(&self) -> Option<String> {
        None
    }
}

/// Reports an unload's end to the observer, a panic included.
struct Observed<'a> {
    observer: &'a dyn CallObserver,
    token: usize,
    ok: Option<bool>,
}

impl Drop for Observed<'_> {
    fn drop(&mut self) {
        self.observer.ended(self.token, self.ok);
    }
}

impl<R: SimRuntime> Probe<R> {
    /// Models alive (built, neither unloaded nor dropped), over every id.
    pub fn alive_total(&self) -> usize {
        self.alive.get()
    }

    /// Loads started for the resolved id `resolved` so far.
    pub fn load_calls(&self, resolved: &str) -> usize {
        self.region(resolved).load_calls.get()
    }

    /// Loads of the resolved id `resolved` running right now.
    pub fn loading(&self, resolved: &str) -> usize {
        self.region(resolved).loads.get()
    }

    /// Opens the gate.
    pub fn open_gate(&self) {
        self.gate.add(1);
    }

    /// Blocks until some gated unload has started.
    pub fn wait_for_gated_unload(&self) {
        self.gated_unloads.wait_for(1);
    }
}

impl<R: SimRuntime> Probe<R> {
    /// A model of `id` built outside the manager (for `register`), registered under `id`:
    /// counted as built and alive like a loaded one, without a load call.
    pub fn prebuilt(self: &Arc<Self>, id: &str) -> SimModel<R> {
        let p = self.id(id);
        let bytes = p.next_size();
        p.constructed.add(1);
        self.alive.add(1);
        SimModel {
            probe: Arc::clone(self),
            id: p.id.clone(),
            resolved: p.id.clone(),
            bytes,
            unloaded: R::counter_for_model(),
        }
    }

    /// The probe of `id`; an id the scenario did not declare is a scenario bug.
    pub fn id(&self, id: &str) -> &IdProbe<R> {
        self.ids.get(id).unwrap_or_else(|| panic!("scenario did not declare model id {id:?}"))
    }

    fn region(&self, resolved: &str) -> &Region<R> {
        self.regions
            .get(resolved)
            .unwrap_or_else(|| panic!("scenario did not declare id or alias {resolved:?}"))
    }
}

/// Builds a [`World`]: declare ids with their load/unload scripts.
pub struct WorldBuilder<R: SimRuntime> {
    rt: R,
    ids: BTreeMap<String, IdProbe<R>>,
    regions: BTreeMap<String, Region<R>>,
    gated: Vec<String>,
    gated_loads: Vec<String>,
    gated_reloads: Vec<String>,
    capacity: Option<usize>,
    work: usize,
    observer: Option<Arc<dyn CallObserver>>,
    failure_cache: Option<Duration>,
}

impl<R: SimRuntime> WorldBuilder<R> {
    /// Scheduling points (yields) inside each load (default 2). Fewer yields keep a loading
    /// thread running under PCT, which is what some races need.
    pub fn work(mut self, yields: usize) -> Self {
        self.work = yields;
        self
    }

    /// Declares `id`: call `n` of its loads does `loads[n]` (then `Ok`), likewise unloads, for
    /// the models registered under `id` itself.
    pub fn model(mut self, id: &str, loads: &[Step], unloads: &[Step]) -> Self {
        let probe = IdProbe {
            id: id.to_owned(),
            constructed: self.rt.counter(),
            unloaded: self.rt.counter(),
            dropped: self.rt.counter(),
            size_calls: self.rt.counter(),
            size_panics: false,
            drop_panics: false,
            sizes: Vec::new(),
        };
        self.ids.insert(id.to_owned(), probe);
        self.regions.insert(id.to_owned(), Region::new(&self.rt, loads, unloads));
        self
    }

    /// Declares `alias`, an id that models of declared ids are registered under; their loads
    /// and unloads succeed. Only an observer ([`WorldBuilder::observe_calls`]) tells the probe
    /// a load's alias: without one, a load counts under its model id.
    pub fn alias(mut self, alias: &str) -> Self {
        self.regions.insert(alias.to_owned(), Region::new(&self.rt, &[], &[]));
        self
    }

    /// The models of `id` report these sizes, in the order they are built (the last one for
    /// every later model; 1 without this).
    pub fn sizes(mut self, id: &str, sizes: &[u64]) -> Self {
        self.ids.get_mut(id).expect("declared id").sizes = sizes.to_vec();
        self
    }

    /// The first `size_bytes` of `id`'s models panics (M-P1).
    pub fn size_panics(mut self, id: &str) -> Self {
        self.ids.get_mut(id).expect("declared id").size_panics = true;
        self
    }

    /// The `Drop` of `id`'s models panics once they were unloaded (M-P2), and in an unwind
    /// whether or not they were (M-P2v, M-P2w); run while its thread unwinds outside a catch
    /// entered during that unwind, it fails the execution as production's abort.
    pub fn drop_panics(mut self, id: &str) -> Self {
        self.ids.get_mut(id).expect("declared id").drop_panics = true;
        self
    }

    /// Declares ids whose models' unloads wait for the probe's gate.
    pub fn gate_unloads(mut self, ids: &[&str]) -> Self {
        self.gated = ids.iter().map(|s| (*s).to_owned()).collect();
        self
    }

    /// Declares ids whose loads wait for the probe's gate.
    pub fn gate_loads(mut self, ids: &[&str]) -> Self {
        self.gated_loads = ids.iter().map(|s| (*s).to_owned()).collect();
        self
    }

    /// Declares ids whose loads after their first (a preload's) wait for the probe's gate.
    pub fn gate_reloads(mut self, ids: &[&str]) -> Self {
        self.gated_reloads = ids.iter().map(|s| (*s).to_owned()).collect();
        self
    }

    /// Tells `observer` about every unload, and asks it the resolved id of every load.
    pub fn observe_calls(mut self, observer: Arc<dyn CallObserver>) -> Self {
        self.observer = Some(observer);
        self
    }

    /// Turns the manager's negative cache on ([`ManagerConfig::with_failure_cache`]).
    pub fn failure_cache(mut self, time: Duration) -> Self {
        self.failure_cache = Some(time);
        self
    }

    /// Fails the execution (`capacity`) whenever a load would make more than `max` models alive.
    pub fn capacity(mut self, max: usize) -> Self {
        self.capacity = Some(max);
        self
    }

    /// Builds the base manager.
    pub fn build(self) -> ManagerWorld<R> {
        self.stack(|base| base)
    }

    /// Builds the base manager and wraps it with `wrap`.
    pub fn stack<S: Manager>(self, wrap: impl FnOnce(Base<R>) -> S) -> ManagerWorld<R, S> {
        self.preloaded(&[], wrap)
    }

    /// Like [`WorldBuilder::stack`], with `preload` registered in the base before wrapping.
    pub fn preloaded<S: Manager>(
        self,
        preload: &[&str],
        wrap: impl FnOnce(Base<R>) -> S,
    ) -> ManagerWorld<R, S> {
        let probe = Arc::new(Probe {
            ids: self.ids,
            alive: self.rt.counter(),
            regions: self.regions,
            work: self.work,
            gate: Latch::new(&self.rt),
            gated_unloads: Latch::new(&self.rt),
            gated: self.gated,
            gated_loads: self.gated_loads,
            gated_reloads: self.gated_reloads,
            capacity: self.capacity,
            observer: self.observer,
        });
        let loader = SimLoader { probe: Arc::clone(&probe) };
        let mut config = ManagerConfig::default()
            .with_lock_timeout(Duration::from_secs(1))
            .with_lease_drain_timeout(Duration::from_secs(1));
        if let Some(time) = self.failure_cache {
            config = config.with_failure_cache(time);
        }
        let base =
            ModelManager::with_runtime(loader, config, self.rt.clone()).expect("scenario config is valid");
        for id in preload {
            base.add_model(id, None).expect("setup loads succeed");
        }
        World::of(self.rt, Managed { probe, manager: wrap(base) })
    }
}

/// The base manager of every scenario stack.
pub type Base<R> = ModelManager<SimLoader<R>, R>;

/// The manager half of a world: the stack under test over a scripted loader, and the loader's
/// probe. Dereferences to the stack, so a spawned thread calls it directly.
pub struct Managed<R: SimRuntime, S> {
    /// Scripts and counters.
    pub probe: Arc<Probe<R>>,
    /// The stack under test.
    pub manager: S,
}

impl<R: SimRuntime, S> std::ops::Deref for Managed<R, S> {
    type Target = S;

    fn deref(&self) -> &S {
        &self.manager
    }
}

/// A world whose half under test is a manager stack.
pub type ManagerWorld<R, S = Base<R>> = World<R, Managed<R, S>>;

impl<R: SimRuntime> ManagerWorld<R> {
    /// Starts building a world on `rt`.
    pub fn builder(rt: R) -> WorldBuilder<R> {
        WorldBuilder {
            rt,
            ids: BTreeMap::new(),
            regions: BTreeMap::new(),
            gated: Vec::new(),
            gated_loads: Vec::new(),
            gated_reloads: Vec::new(),
            capacity: None,
            work: 2,
            observer: None,
            failure_cache: None,
        }
    }
}

/// The scripted loader.
pub struct SimLoader<R: SimRuntime> {
    probe: Arc<Probe<R>>,
}

impl<R: SimRuntime> Loader for SimLoader<R> {
    type Model = SimModel<R>;

    fn load(&self, id: &ModelId) -> Result<SimModel<R>, BoxError> {
        ensure_outside_monitors::<R>("a load");
        let p = self.probe.id(id.as_str());
        let resolved =
            self.probe.observer.as_ref().and_then(|o| o.loading_as()).unwrap_or_else(|| p.id.clone());
        let region = self.probe.region(&resolved);
        let call = region.load_calls.add(1);
        let reload = call > 0 && self.probe.gated_reloads.contains(&p.id);
        if reload || self.probe.gated_loads.contains(&p.id) {
            self.probe.gate.wait_for(1);
        }
        checks::exclusive::<R>(&region.loads, "I1", "load", &resolved);
        checks::exclusive::<R>(&region.mutations, "I2", "mutation", &resolved);
        for _ in 0..self.probe.work {
            R::yield_now();
        }
        let step = region.load_script.get(call).copied().unwrap_or(Step::Ok);
        let bytes = p.next_size();
        if step == Step::Ok {
            p.constructed.add(1);
            let alive = self.probe.alive.add(1) + 1;
            if let Some(max) = self.probe.capacity {
                checks::within_capacity(alive, max, id);
            }
        }
        region.mutations.sub(1);
        region.loads.sub(1);
        match step {
            Step::Ok => Ok(SimModel {
                probe: Arc::clone(&self.probe),
                id: p.id.clone(),
                resolved,
                bytes,
                unloaded: R::counter_for_model(),
            }),
            Step::Fail => Err(InjectedError::<R>::boxed(format!("injected failure of load #{call} of {id}"))),
            Step::Expire => Err(expired(id.as_str())),
            Step::Panic => std::panic::panic_any(InjectedPanic),
        }
    }
}

/// A model built by [`SimLoader`].
pub struct SimModel<R: SimRuntime> {
    probe: Arc<Probe<R>>,
    pub(crate) id: String,
    /// The id it is registered under: `id`, or an alias.
    resolved: String,
    /// What `size_bytes` reports.
    bytes: u64,
    /// Set once this very instance has been unloaded.
    unloaded: R::Counter,
}

impl<R: SimRuntime> SimModel<R> {
    /// Fails the execution (L1) if the model was unloaded: one look, for a caller that holds a
    /// lease (or is inside `infer`) and is about to let it go.
    pub fn check_loaded(&self, thread: &str) {
        checks::not_unloaded(self.unloaded.get(), thread, &self.id);
    }

    /// Uses the model across a few scheduling points, failing the execution (L1) if it is
    /// unloaded meanwhile.
    pub fn serve(&self, thread: &str) {
        for _ in 0..2 {
            checks::not_unloaded(self.unloaded.get(), thread, &self.id);
            R::yield_now();
        }
        checks::not_unloaded(self.unloaded.get(), thread, &self.id);
    }
}

impl<R: SimRuntime> Model for SimModel<R> {
    fn size_bytes(&self) -> u64 {
        ensure_outside_monitors::<R>("size_bytes");
        let p = self.probe.id(&self.id);
        if p.size_calls.add(1) == 0 && p.size_panics {
            std::panic::panic_any(InjectedPanic);
        }
        self.bytes
    }

    fn unload(&self) -> Result<(), BoxError> {
        ensure_outside_monitors::<R>("an unload");
        let mut observed = self.probe.observer.as_deref().map(|observer| Observed {
            observer,
            token: observer.started(&self.resolved),
            ok: None,
        });
        let p = self.probe.id(&self.id);
        let region = self.probe.region(&self.resolved);
        let call = region.unload_calls.add(1);
        checks::exclusive::<R>(&region.mutations, "I2", "mutation", &self.resolved);
        for _ in 0..self.probe.work.min(1) {
            R::yield_now();
        }
        if self.probe.gated.contains(&self.id) {
            self.probe.gated_unloads.add(1);
            self.probe.gate.wait_for(1);
        }
        let step = region.unload_script.get(call).copied().unwrap_or(Step::Ok);
        if step == Step::Ok {
            self.unloaded.add(1);
            p.unloaded.add(1);
            self.probe.alive.sub(1);
        }
        region.mutations.sub(1);
        if let Some(observed) = observed.as_mut() {
            observed.ok = (step != Step::Panic).then_some(step == Step::Ok);
        }
        match step {
            Step::Ok => Ok(()),
            Step::Fail => {
                Err(InjectedError::<R>::boxed(format!("injected failure of unload #{call} of {}", self.id)))
            }
            Step::Expire => Err(expired(&self.id)),
            Step::Panic => std::panic::panic_any(InjectedPanic),
        }
    }
}

impl<R: SimRuntime> Drop for SimModel<R> {
    fn drop(&mut self) {
        ensure_outside_monitors::<R>("a model's Drop");
        let probe = self.probe.ids.get(&self.id);
        if self.unloaded.get() == 0
            && let Some(p) = probe
        {
            p.dropped.add(1);
            self.probe.alive.sub(1);
        }
        let scripted = probe.is_some_and(|p| p.drop_panics);
        // Read only when scripted: a read is a scheduling point. A model not unloaded yet (its
        // unload panicked, or a replace detached it) panics too when dropped in an unwind:
        // outside a catch entered during that unwind, as production's would abort there.
        if scripted && (self.unloaded.get() > 0 || crate::unwinding::panicking()) {
            // Under loom, where no catch can be told apart, any unwind counts as an abort (the
            // models' verdict before the catches were told apart).
            super::inject_panic(&format!("{}'s Drop", self.id), true);
        }
    }
}
