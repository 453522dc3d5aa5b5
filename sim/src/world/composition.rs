//! The production composition in the sim: one `FixedSizeCache<ModelManager<loader>>` per
//! device, every loader the production [`CacheLoader`] (what `burn::SharedLoader` uses with real
//! weights and files) over scripted files, on its device's cache in one
//! [`CacheGroup`](resident::cache::CacheGroup), device budgets on. The checker runs the loader
//! that ships; its own wrapper only checks A5 on each model handed out.

use std::collections::BTreeMap;
use std::time::Duration;

use resident::cache::{CanonicalId, Declared, DeviceCache};
use resident::composition::{CacheLoader, DeviceModel, WeightFiles};
use resident::runtime::{Arc, Runtime};
use resident::{
    BoxError, Deadline, FixedSizeCache, FixedSizeConfig, Loader, ManagerConfig, Model, ModelId, ModelManager,
};

use crate::latch::Latch;
use crate::runtime::{Counter, SimRuntime};
use crate::world::cache::{Behaviour, CacheWorld, Script, Weights};
use crate::world::checks::{ensure_not_evicted, ensure_outside_monitors};

/// Scripted model files: how often each was read.
pub struct Files<R: SimRuntime> {
    reads: BTreeMap<String, R::Counter>,
    /// Each file's version: a rewrite bumps it, and a read gives weights of the version it saw.
    versions: BTreeMap<String, R::Counter>,
    bytes: u64,
    /// Reads that have started, over every file: a sync point for "a load is in flight".
    pub started: Latch<R>,
    /// Scheduling points inside each read (set before any thread starts; not a checker object).
    read_yields: std::sync::atomic::AtomicUsize,
    /// Reads of each version of each file: a record for checks, not a checker object (no
    /// scheduling point inside, so it adds none to a read).
    versions_read: std::sync::Mutex<BTreeMap<(String, u64), usize>>,
}

impl<R: SimRuntime> Files<R> {
    /// Reads of `key`'s file so far.
    pub fn reads(&self, key: &str) -> usize {
        self.reads.get(key).map_or(0, Counter::get)
    }

    /// Reads of version `version` of `key`'s file so far.
    pub fn reads_of_version(&self, key: &str, version: u64) -> usize {
        let read = self.versions_read.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        read.get(&(key.to_owned(), version)).copied().unwrap_or(0)
    }

    /// The version of `key`'s file now.
    pub fn version(&self, key: &str) -> Result<u64, BoxError> {
        let version = self.versions.get(key).ok_or_else(|| format!("no file for {key}"))?;
        Ok(version.get() as u64)
    }

    /// Rewrites `key`'s file: a new version, with other content.
    pub fn rewrite(&self, key: &str) {
        self.versions.get(key).expect("a scenario file").add(1);
    }

    /// Each read yields `n` times (default 3): fewer keep a scenario small enough for loom.
    pub fn set_read_yields(&self, n: usize) {
        self.read_yields.store(n, std::sync::atomic::Ordering::Relaxed);
    }
}

/// One device's scripted files: [`WeightFiles`] for the production [`resident::composition::CacheLoader`].
pub struct DeviceFiles<R: SimRuntime> {
    files: Arc<Files<R>>,
    script: Arc<Script<R>>,
}

impl<R: SimRuntime> WeightFiles for DeviceFiles<R> {
    type Weights = Weights<R>;
    type Plan = ();

    /// Every file declares its bytes; nothing is refused before a read.
    fn plan<C: Runtime>(
        &self,
        _: &ModelId,
        _: &DeviceCache<Weights<R>, C>,
    ) -> Result<(Declared, ()), BoxError> {
        ensure_outside_monitors::<R>("a cache loader's load");
        Ok((Declared::new(self.files.bytes), ()))
    }

    fn current(&self, id: &ModelId) -> Result<u64, BoxError> {
        ensure_outside_monitors::<R>("a file's stat");
        self.files.version(id.as_str())
    }

    fn read(&self, id: &ModelId, (): &()) -> Result<Weights<R>, BoxError> {
        ensure_outside_monitors::<R>("a file read");
        let files = &self.files;
        let reads = files.reads.get(id.as_str()).ok_or_else(|| format!("no file for {id}"))?;
        let version = files.version(id.as_str())?;
        reads.add(1);
        let mut read = files.versions_read.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        *read.entry((id.as_str().to_owned(), version)).or_default() += 1;
        drop(read);
        files.started.add(1);
        // Reading takes a while: other threads run meanwhile.
        for _ in 0..files.read_yields.load(std::sync::atomic::Ordering::Relaxed) {
            R::yield_now();
        }
        Ok(Weights::scripted(files.bytes, Behaviour::default(), &self.script).of_version(version))
    }

    fn size_bytes(&self, _: &Weights<R>) -> u64 {
        self.files.bytes
    }
}

/// One device's loader: the production [`CacheLoader`] over scripted files, each model it hands
/// out checked for A5 at once.
pub struct CheckedLoader<R: SimRuntime> {
    loader: CacheLoader<DeviceFiles<R>, R>,
}

impl<R: SimRuntime> CheckedLoader<R> {
    fn served(&self, model: DeviceModel<Weights<R>, R>) -> Served<R> {
        let served = Served { model, cache: Arc::clone(self.loader.cache()) };
        served.check_resident("a cache loader");
        served
    }
}

impl<R: SimRuntime> Loader for CheckedLoader<R> {
    type Model = Served<R>;

    fn load(&self, id: &ModelId) -> Result<Served<R>, BoxError> {
        self.load_until(id, Deadline::NONE)
    }

    fn load_until(&self, id: &ModelId, deadline: Deadline) -> Result<Served<R>, BoxError> {
        self.loader.load_until(id, deadline).map(|model| self.served(model))
    }

    fn reload_until(&self, id: &ModelId, deadline: Deadline) -> Result<Served<R>, BoxError> {
        self.loader.reload_until(id, deadline).map(|model| self.served(model))
    }
}

/// A model served from a device: its record locked and placed until the manager unloads it.
pub struct Served<R: SimRuntime> {
    model: DeviceModel<Weights<R>, R>,
    cache: Arc<DeviceCache<Weights<R>, R>>,
}

impl<R: SimRuntime> Served<R> {
    /// The version of its file its weights were read from.
    pub fn version(&self) -> u64 {
        self.model.guard().cpu().version
    }

    /// Identity of the canonical weights it serves.
    pub fn canonical(&self) -> Option<CanonicalId> {
        self.model.guard().cpu().canonical_id()
    }

    /// A5: the locked record is still in its device's cache (no eviction path, a `drop_model`
    /// included, took it while in use); a replace may have detached it (a newer version took
    /// its key), which is not an eviction.
    pub fn check_resident(&self, thread: &str) {
        ensure_not_evicted(&self.cache, self.model.guard().cpu(), thread);
    }

    /// Serves across a few scheduling points, checking A5 at each.
    pub fn serve(&self, thread: &str) {
        for _ in 0..2 {
            self.check_resident(thread);
            R::yield_now();
        }
        self.check_resident(thread);
    }
}

impl<R: SimRuntime> Model for Served<R> {
    fn size_bytes(&self) -> u64 {
        self.model.size_bytes()
    }
}

/// One device's stack.
pub type Device<R> = FixedSizeCache<ModelManager<CheckedLoader<R>, R>>;

/// Devices over one cache group.
pub struct Composition<R: SimRuntime> {
    /// The group, its caches and their checks.
    pub world: CacheWorld<R>,
    /// The model files.
    pub files: Arc<Files<R>>,
    /// One stack per device, in the caches' order.
    pub devices: Vec<Arc<Device<R>>>,
}

impl<R: SimRuntime> Composition<R> {
    /// `devices` stacks of capacity `max_size`, models `keys` of `bytes` each, a RAM budget of
    /// `cap` and a device budget of `device_bytes` per device.
    pub fn new(
        rt: R,
        keys: &[&str],
        bytes: u64,
        cap: u64,
        device_bytes: u64,
        devices: usize,
        max_size: usize,
    ) -> Self {
        let world = CacheWorld::new(rt, cap, devices);
        world.group.set_load_wait(Duration::from_secs(1)).expect("a valid load wait");
        let reads = keys.iter().map(|k| ((*k).to_owned(), world.rt.counter())).collect();
        let versions = keys.iter().map(|k| ((*k).to_owned(), world.rt.counter())).collect();
        let started = Latch::new(&world.rt);
        let versions_read = std::sync::Mutex::default();
        let files = Arc::new(Files { reads, versions, bytes, started, read_yields: 3.into(), versions_read });
        let config = ManagerConfig::default()
            .with_lock_timeout(Duration::from_secs(1))
            .with_lease_drain_timeout(Duration::from_secs(1));
        // Each device its own budget; one script checks every device's from inside the moves
        // (weights loaded by one device are placed by the other after an adoption).
        let script = world.with_device(device_bytes);
        let devices = world
            .caches
            .iter()
            .map(|cache| {
                let script = Arc::clone(&script);
                let files = DeviceFiles { files: Arc::clone(&files), script };
                let loader = CheckedLoader { loader: CacheLoader::new(files, Arc::clone(cache)) };
                let base =
                    ModelManager::with_runtime(loader, config, world.rt.clone()).expect("valid config");
                let fixed = FixedSizeConfig::new(max_size).with_capacity_wait(Duration::from_secs(1));
                Arc::new(FixedSizeCache::new(base, fixed).expect("valid config"))
            })
            .collect();
        Self { world, files, devices }
    }

    /// Spawns a named scenario thread that gets device `d`'s stack.
    pub fn spawn<T, F>(&self, name: &'static str, d: usize, f: F) -> R::Handle<T>
    where
        T: Send + 'static,
        F: FnOnce(&Device<R>, &'static str) -> T + Send + 'static,
    {
        let device = Arc::clone(&self.devices[d]);
        self.world.rt.spawn(name, move || f(&device, name))
    }
}
