//! Reference models and operation programs for property tests of `resident`.
//!
//! A program is a sequence of [`Op`]s over a small id space. The reference model says what each
//! operation must return and what the manager must hold afterwards; the tests run the same
//! program against the real manager and compare after every step.

pub mod concurrent;

use std::collections::BTreeSet;
use std::sync::Mutex;

use resident::{BoxError, Loader, Model, ModelId};

/// Ids the programs use: few, so that operations collide often.
pub const IDS: &[&str] = &["a", "b", "c/1", "d"];

/// One operation of a program.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Op {
    /// `add_model(IDS[id], alias)`.
    Add {
        /// Index into [`IDS`].
        id: usize,
        /// Optional alias, an index into [`IDS`] too.
        alias: Option<usize>,
    },
    /// `remove(IDS[id])`.
    Remove {
        /// Index into [`IDS`].
        id: usize,
    },
    /// `lease(IDS[id])`, dropped at once.
    Lease {
        /// Index into [`IDS`].
        id: usize,
    },
    /// Make loads of canonical `IDS[id]` fail (`true`) or succeed from now on.
    BreakLoads {
        /// Index into [`IDS`].
        id: usize,
        /// Whether loads fail.
        broken: bool,
    },
    /// Make unloads of the model registered under `IDS[id]` fail (`true`) or succeed.
    BreakUnloads {
        /// Index into [`IDS`].
        id: usize,
        /// Whether unloads fail.
        broken: bool,
    },
}

/// What an operation returns, reduced to what the reference model can predict.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// Loaded a model.
    Loaded,
    /// Already registered.
    Warm,
    /// Succeeded (remove, lease, a knob).
    Done,
    /// `NotFound`.
    NotFound,
    /// `Load` error.
    LoadFailed,
    /// `Unload` error.
    UnloadFailed,
}

/// The reference model: which resolved ids are registered, which loads and unloads fail.
#[derive(Debug, Clone, Default)]
pub struct Reference {
    /// Registered resolved ids.
    pub registered: BTreeSet<String>,
    pub(crate) broken_loads: BTreeSet<String>,
    pub(crate) broken_unloads: BTreeSet<String>,
}

impl Reference {
    /// Applies `op` and returns what the manager must return.
    pub fn apply(&mut self, op: &Op) -> Outcome {
        match *op {
            Op::Add { id, alias } => {
                let resolved = IDS[alias.unwrap_or(id)].to_owned();
                if self.registered.contains(&resolved) {
                    Outcome::Warm
                } else if self.broken_loads.contains(IDS[id]) {
                    Outcome::LoadFailed
                } else {
                    self.registered.insert(resolved);
                    Outcome::Loaded
                }
            }
            Op::Remove { id } => {
                if !self.registered.contains(IDS[id]) {
                    Outcome::NotFound
                } else if self.broken_unloads.contains(IDS[id]) {
                    Outcome::UnloadFailed
                } else {
                    self.registered.remove(IDS[id]);
                    Outcome::Done
                }
            }
            Op::Lease { id } => {
                if self.registered.contains(IDS[id]) {
                    Outcome::Done
                } else {
                    Outcome::NotFound
                }
            }
            Op::BreakLoads { id, broken } => {
                set(&mut self.broken_loads, IDS[id], broken);
                Outcome::Done
            }
            Op::BreakUnloads { id, broken } => {
                set(&mut self.broken_unloads, IDS[id], broken);
                Outcome::Done
            }
        }
    }
}

fn set(set: &mut BTreeSet<String>, id: &str, on: bool) {
    if on {
        set.insert(id.to_owned());
    } else {
        set.remove(id);
    }
}

/// Failure knobs shared by the loader and the models it builds.
#[derive(Debug, Default)]
pub struct Knobs {
    broken_loads: Mutex<BTreeSet<String>>,
    broken_unloads: Mutex<BTreeSet<String>>,
}

impl Knobs {
    /// Applies a knob operation; other operations are ignored.
    pub fn apply(&self, op: &Op) {
        match *op {
            Op::BreakLoads { id, broken } => {
                set(&mut self.broken_loads.lock().expect("knobs"), IDS[id], broken)
            }
            Op::BreakUnloads { id, broken } => {
                set(&mut self.broken_unloads.lock().expect("knobs"), IDS[id], broken)
            }
            _ => {}
        }
    }
}

/// A loader driven by [`Knobs`].
#[derive(Debug, Default)]
pub struct KnobLoader {
    /// The knobs.
    pub knobs: std::sync::Arc<Knobs>,
}

/// A model built by [`KnobLoader`]; it knows the resolved id it is registered under only
/// through the manager, so unload failures are keyed by whatever the test registers it as.
#[derive(Debug)]
pub struct KnobModel {
    knobs: std::sync::Arc<Knobs>,
    /// Resolved id, set by the test right after a successful add (see `registered_as`).
    pub registered_as: Mutex<Option<String>>,
}

impl Model for KnobModel {
    fn size_bytes(&self) -> u64 {
        1
    }

    fn unload(&self) -> Result<(), BoxError> {
        let id = self.registered_as.lock().expect("id").clone().unwrap_or_default();
        if self.knobs.broken_unloads.lock().expect("knobs").contains(&id) {
            return Err(format!("unload of {id} refused").into());
        }
        Ok(())
    }
}

impl Loader for KnobLoader {
    type Model = KnobModel;

    fn load(&self, id: &ModelId) -> Result<KnobModel, BoxError> {
        if self.knobs.broken_loads.lock().expect("knobs").contains(id.as_str()) {
            return Err(format!("load of {id} refused").into());
        }
        Ok(KnobModel { knobs: std::sync::Arc::clone(&self.knobs), registered_as: Mutex::new(None) })
    }
}

/// Operations of a cache program: the manager's plus pins.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CacheOp {
    /// A manager operation (aliases are not used here: the queue order is the point).
    Base(Op),
    /// `pin(IDS[id])`.
    Pin {
        /// Index into [`IDS`].
        id: usize,
    },
    /// `unpin(IDS[id])`.
    Unpin {
        /// Index into [`IDS`].
        id: usize,
    },
}

/// What a cache operation returns, reduced: the manager's outcomes plus `CapacityExhausted`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CacheOutcome {
    /// As for the manager.
    Base(Outcome),
    /// No room and nothing evictable.
    Full,
}

/// Reference model of a `FixedSizeCache` over the manager, for sequential programs: an exact
/// LRU queue (front = least recently used), pins, failure knobs.
#[derive(Debug, Clone)]
pub struct CacheReference {
    max_size: usize,
    /// The queue, least recently used first.
    pub queue: Vec<String>,
    pinned: BTreeSet<String>,
    knobs: Reference,
}

impl CacheReference {
    /// An empty cache of capacity `max_size`.
    pub fn new(max_size: usize) -> Self {
        Self { max_size, queue: Vec::new(), pinned: BTreeSet::new(), knobs: Reference::default() }
    }

    fn touch(&mut self, id: &str) {
        if let Some(at) = self.queue.iter().position(|q| q == id) {
            let id = self.queue.remove(at);
            self.queue.push(id);
        }
    }

    /// Applies `op` and returns what the cache must return.
    pub fn apply(&mut self, op: &CacheOp) -> CacheOutcome {
        use CacheOutcome::{Base, Full};
        match op {
            CacheOp::Pin { id } => {
                self.pinned.insert(IDS[*id].to_owned());
                Base(Outcome::Done)
            }
            CacheOp::Unpin { id } => {
                self.pinned.remove(IDS[*id]);
                Base(Outcome::Done)
            }
            CacheOp::Base(Op::Add { id, .. }) => {
                let id = IDS[*id];
                if self.queue.iter().any(|q| q == id) {
                    self.touch(id);
                    return Base(Outcome::Warm);
                }
                while self.queue.len() >= self.max_size {
                    let Some(victim) = self.queue.iter().find(|q| !self.pinned.contains(*q)).cloned() else {
                        return Full;
                    };
                    if self.knobs.broken_unloads.contains(&victim) {
                        return Base(Outcome::UnloadFailed);
                    }
                    self.queue.retain(|q| *q != victim);
                }
                if self.knobs.broken_loads.contains(id) {
                    return Base(Outcome::LoadFailed);
                }
                self.queue.push(id.to_owned());
                Base(Outcome::Loaded)
            }
            CacheOp::Base(Op::Remove { id }) => {
                let id = IDS[*id];
                if !self.queue.iter().any(|q| q == id) {
                    Base(Outcome::NotFound)
                } else if self.knobs.broken_unloads.contains(id) {
                    Base(Outcome::UnloadFailed)
                } else {
                    self.queue.retain(|q| q != id);
                    Base(Outcome::Done)
                }
            }
            CacheOp::Base(Op::Lease { id }) => {
                let id = IDS[*id];
                if self.queue.iter().any(|q| q == id) {
                    self.touch(id);
                    Base(Outcome::Done)
                } else {
                    Base(Outcome::NotFound)
                }
            }
            CacheOp::Base(knob) => Base(self.knobs.apply(knob)),
        }
    }
}

/// Operations of a shared-weight cache program over two peer caches.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CacheProgramOp {
    /// `put` on cache `cache` of key `key` with `bytes`; `shared` or private; keep the handle
    /// as a hold, a lock, or drop it at once.
    Put {
        /// Which peer (0 or 1).
        cache: usize,
        /// Key index.
        key: usize,
        /// Size.
        bytes: u64,
        /// Shared through the store.
        shared: bool,
        /// 0: drop the admission, 1: keep a hold, 2: keep a lock.
        keep: u8,
    },
    /// `get` on a cache; keep a hold (`lock: false`) or a lock.
    Get {
        /// Which peer.
        cache: usize,
        /// Key index.
        key: usize,
        /// Lock it.
        lock: bool,
    },
    /// `get_or_put` on a cache of key `key` declared `bytes` (its load builds them); keep the
    /// handle as a hold or drop it at once.
    GetOrPut {
        /// Which peer.
        cache: usize,
        /// Key index.
        key: usize,
        /// Declared (and built) size.
        bytes: u64,
        /// Keep the handle.
        keep: bool,
    },
    /// `get_locked` on a cache (the lookup and the lock in one step); keep the lock.
    GetLocked {
        /// Which peer.
        cache: usize,
        /// Key index.
        key: usize,
    },
    /// Drop the oldest kept handle.
    Release,
    /// `make_room(bytes)` on a cache.
    MakeRoom {
        /// Which peer.
        cache: usize,
        /// Bytes.
        bytes: u64,
    },
    /// `drop_model` on a cache.
    DropModel {
        /// Which peer.
        cache: usize,
        /// Key index.
        key: usize,
    },
    /// `shutdown` on a cache.
    Shutdown {
        /// Which peer.
        cache: usize,
    },
}
