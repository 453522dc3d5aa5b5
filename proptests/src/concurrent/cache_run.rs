//! Runs a generated [`CacheProgram`] on the sim: two device caches of one group, every thread's
//! operations with their handles, then the accounting checks.
//!
//! Checked in every execution:
//! - U1: user code (loads, weights' and copies' `Drop`, `to_device`) runs outside every
//!   internal monitor (the scripted weights check it themselves);
//! - A7: device copies alive plus moves in flight stay within each device's budget (checked
//!   from inside every move);
//! - single flight: two `get_or_put` loads of one key never run at once in the group;
//! - A5: a locked record stays in its cache — resident, or detached by a newer admission of its
//!   key while still held — from its lock to its release;
//! - A1 at quiescence: the budget counts each distinct live canonical once plus every private
//!   record, and nothing else;
//! - A6: with every handle gone, a cache the program shut down holds nothing, and shutting
//!   the others down leaves nothing resident or counted.

use resident::cache::{DeviceCache, DeviceGuard, LoadedModel, ModelGuard, Put};
use resident::runtime::Arc;
use resident_sim::cache_world::{Behaviour, CacheWorld, Script, Weights};
use resident_sim::ensure;
use resident_sim::runtime::{Counter, ShuttleRuntime, SimRuntime};
use resident_sim::violation::catching;

use super::cache_program::{BYTES, CACHES, CAP, CacheOp, CacheProgram, DEVICE_BYTES, KEYS};
use super::generated::Generated;

type Cache<R> = Arc<DeviceCache<Weights<R>, R>>;

/// A handle a thread holds, with the index of its cache.
enum Held<R: SimRuntime> {
    Loaded(LoadedModel<Weights<R>, R>),
    Locked(ModelGuard<Weights<R>, R>),
    Placed(DeviceGuard<Weights<R>, R>),
}

/// A5: the record `guard` locks is still in `cache` (resident, or detached while held).
fn ensure_kept<R: SimRuntime>(cache: &Cache<R>, guard: &ModelGuard<Weights<R>, R>, thread: &str) {
    let id = guard.canonical_id();
    let kept = cache.resident().iter().any(|r| r.key == guard.key() && r.canonical == id);
    ensure!(kept, "A5", "{thread} locked {} but its record was evicted", guard.key());
}

/// What every thread of one execution shares.
struct Shared<R: SimRuntime> {
    world: CacheWorld<R>,
    script: Arc<Script<R>>,
    /// Per key: `get_or_put` loads running now.
    loading: Vec<R::Counter>,
    /// Per cache: whether the program shut it down.
    shut: Vec<R::Counter>,
}

/// One thread's view: the shared world, the program, its handles.
struct Thread<'a, R: SimRuntime> {
    name: &'static str,
    shared: &'a Shared<R>,
    program: &'a CacheProgram,
    held: Vec<(usize, Held<R>)>,
}

impl<R: SimRuntime> Thread<'_, R> {
    fn weights(&self, key: usize) -> Weights<R> {
        let behaviour = Behaviour {
            drop_panics: self.program.faults.weights_drop[key],
            copy_drop_panics: self.program.faults.copy_drop[key],
            gated_move: false,
        };
        Weights::scripted(BYTES[key], behaviour, &self.shared.script)
    }

    /// A `get_or_put` load: fresh weights, checking that no other load of the key runs.
    fn load(&self, key: usize) -> Weights<R> {
        let loading = &self.shared.loading[key];
        let others = loading.add(1);
        ensure!(
            others == 0,
            "single-flight",
            "{} loads of {} ran at once in the group",
            others + 1,
            KEYS[key]
        );
        R::yield_now();
        loading.sub(1);
        self.weights(key)
    }

    fn cache(&self, c: usize) -> &Cache<R> {
        &self.shared.world.caches[c]
    }

    /// Takes the held handle number `k` (modulo how many), if any.
    fn take(&mut self, k: usize) -> Option<(usize, Held<R>)> {
        (!self.held.is_empty()).then(|| self.held.remove(k % self.held.len()))
    }

    fn keep(&mut self, c: usize, handle: Held<R>) {
        self.held.push((c, handle));
    }

    /// Releases a handle, checking A5 first if it is a lock.
    fn release(&self, c: usize, handle: Held<R>) {
        match &handle {
            Held::Loaded(_) => {}
            Held::Locked(guard) => ensure_kept(self.cache(c), guard, self.name),
            Held::Placed(guard) => ensure_kept(self.cache(c), guard.cpu(), self.name),
        }
        catching(|| drop(handle));
    }

    fn run(&mut self, op: CacheOp) {
        match op {
            CacheOp::GetOrPut { cache, key } => {
                let weights = || Ok::<_, std::convert::Infallible>(self.load(key));
                let loaded = catching(|| self.cache(cache).get_or_put(KEYS[key], BYTES[key], weights));
                if let Some(Ok(loaded)) = loaded {
                    self.keep(cache, Held::Loaded(loaded));
                }
            }
            CacheOp::Get { cache, key } => {
                if let Some(Some(loaded)) = catching(|| self.cache(cache).get(KEYS[key])) {
                    self.keep(cache, Held::Loaded(loaded));
                }
            }
            CacheOp::Put { cache, key, shared } => {
                let how = Put { shared, ..Put::default() };
                let weights = self.weights(key);
                let admitted = catching(|| self.cache(cache).put(KEYS[key], weights, BYTES[key], how));
                if let Some(Ok(admission)) = admitted {
                    self.keep(cache, Held::Loaded(admission.into_loaded()));
                }
            }
            CacheOp::Lock(k) => match self.take(k) {
                Some((c, Held::Loaded(loaded))) => {
                    if let Some(guard) = catching(|| loaded.lock()) {
                        ensure_kept(self.cache(c), &guard, self.name);
                        self.keep(c, Held::Locked(guard));
                    }
                }
                Some((c, other)) => self.keep(c, other),
                None => {}
            },
            CacheOp::LockOnDevice(k) => match self.take(k) {
                Some((c, Held::Loaded(loaded))) => {
                    if let Some(Ok(guard)) = catching(|| loaded.lock_on_device()) {
                        ensure_kept(self.cache(c), guard.cpu(), self.name);
                        self.keep(c, Held::Placed(guard));
                    }
                }
                Some((c, other)) => self.keep(c, other),
                None => {}
            },
            CacheOp::Release(k) => {
                if let Some((c, handle)) = self.take(k) {
                    self.release(c, handle);
                }
            }
            CacheOp::DropModel(key) => {
                catching(|| self.shared.world.group.drop_model(KEYS[key]));
            }
            CacheOp::MakeRoom { cache, bytes } => {
                catching(|| self.cache(cache).make_room(bytes));
            }
            CacheOp::Shutdown(cache) => {
                self.shared.shut[cache].add(1);
                catching(|| self.cache(cache).shutdown());
            }
        }
    }

    fn finish(mut self) {
        while let Some((c, handle)) = self.take(0) {
            self.release(c, handle);
        }
    }
}

/// One execution of `program` on `rt`.
fn run_once<R: SimRuntime>(rt: R, program: &CacheProgram) {
    let world = CacheWorld::new(rt, CAP, CACHES);
    let script = world.with_device(DEVICE_BYTES);
    let loading = KEYS.iter().map(|_| world.rt.counter()).collect();
    let shut = world.caches.iter().map(|_| world.rt.counter()).collect();
    let shared = Arc::new(Shared { world, script, loading, shut });
    let handles: Vec<_> = (0..program.threads.len())
        .map(|t| {
            let (shared, program) = (Arc::clone(&shared), program.clone());
            let name = ["T1", "T2", "T3"][t.min(2)];
            shared.world.rt.clone().spawn(name, move || {
                let mut thread = Thread { name, shared: &shared, program: &program, held: Vec::new() };
                for &op in &program.threads[t] {
                    thread.run(op);
                }
                thread.finish();
            })
        })
        .collect();
    for handle in handles {
        R::join(handle).unwrap_or_else(|payload| std::panic::resume_unwind(payload));
    }
    shared.script.disarm();
    let world = &shared.world;
    world.check_accounting();
    for (cache, shut) in world.caches.iter().zip(&shared.shut) {
        let keys = cache.keys();
        let kept = shut.get() > 0 && !keys.is_empty();
        ensure!(!kept, "A6", "{} keeps {keys:?} after its shutdown with no handle left", cache.device());
    }
    world.check_drained();
}

impl Generated for CacheProgram {
    const KIND: &'static str = "cache-program";

    fn execute(&self, rt: ShuttleRuntime) {
        run_once(rt, self);
    }
}
