//! [`Shards`]: a value split into shards by id, each behind its own reader-writer lock on its
//! own cache line, so that readers of different ids share no lock word and readers of one id
//! only read theirs. The registry's slots and the LRU caches' stamps live in them, in a
//! [`ById`] per shard, filed under the hash the shard was chosen by.

use std::hash::BuildHasher;

use hashbrown::HashTable;
use hashbrown::hash_table::Entry;

use crate::id::ModelId;
use crate::runtime::Runtime;

/// Shards: enough that two threads on different ids rarely meet on one (1 in 16).
const SHARDS: usize = 16;

/// One shard on a cache line of its own (two cores writing neighbouring lock words would
/// otherwise share the line).
#[repr(align(128))]
pub(crate) struct Padded<T>(pub(crate) T);

/// `T` split by id into [`SHARDS`] parts, each behind the runtime's reader-writer lock.
pub(crate) struct Shards<T: Send + Sync + 'static, R: Runtime> {
    shards: Box<[Padded<R::RwLock<T>>]>,
}

impl<T: Send + Sync + 'static, R: Runtime> Shards<T, R> {
    /// Every shard starts as `empty()`.
    pub(crate) fn new(runtime: &R, empty: impl Fn() -> T) -> Self {
        Self { shards: (0..SHARDS).map(|_| Padded(runtime.rw_lock(empty()))).collect() }
    }

    /// The shard that holds `id`, and the hash that chose it.
    pub(crate) fn of(&self, id: &str) -> (&R::RwLock<T>, IdHash) {
        let hash = IdHash::of(id);
        // The hash's high bits are its best mixed (a hash table probes by the low ones).
        let at = usize::try_from(hash.0 >> 60).unwrap_or(0) % SHARDS;
        (&self.shards[at].0, hash)
    }

    /// Every shard, in order (one at a time: not a snapshot across shards).
    pub(crate) fn iter(&self) -> impl Iterator<Item = &R::RwLock<T>> {
        self.shards.iter().map(|s| &s.0)
    }
}

/// The hash an id's shard was chosen by: the shard's [`ById`] files the id under it too, so that
/// a lookup hashes the id once.
#[derive(Debug, Clone, Copy)]
pub(crate) struct IdHash(u64);

impl IdHash {
    /// The hash of `id`.
    fn of(id: &str) -> Self {
        Self(rustc_hash::FxBuildHasher.hash_one(id))
    }
}

/// Values by id, filed under each id's [`IdHash`]: a lookup compares the key of the hit only.
/// Nothing depends on their order (iterating them is in no particular order).
pub(crate) struct ById<V> {
    table: HashTable<(ModelId, V)>,
}

impl<V> Default for ById<V> {
    fn default() -> Self {
        Self { table: HashTable::new() }
    }
}

impl<V> ById<V> {
    /// The value of `id` (whose hash is `at`).
    pub(crate) fn get(&self, at: IdHash, id: &str) -> Option<&V> {
        self.table.find(at.0, |(k, _)| k.as_str() == id).map(|(_, v)| v)
    }

    /// Whether `id` (whose hash is `at`) has a value.
    pub(crate) fn contains_key(&self, at: IdHash, id: &str) -> bool {
        self.get(at, id).is_some()
    }

    /// Puts `value` under `id` (whose hash is `at`); the value it replaces.
    pub(crate) fn insert(&mut self, at: IdHash, id: ModelId, value: V) -> Option<V> {
        let rehash = |(k, _): &(ModelId, V)| IdHash::of(k.as_str()).0;
        match self.table.entry(at.0, |(k, _)| *k == id, rehash) {
            Entry::Occupied(mut occupied) => Some(std::mem::replace(&mut occupied.get_mut().1, value)),
            Entry::Vacant(vacant) => {
                vacant.insert((id, value));
                None
            }
        }
    }

    /// Takes the value of `id` (whose hash is `at`) out.
    pub(crate) fn remove(&mut self, at: IdHash, id: &str) -> Option<V> {
        let found = self.table.find_entry(at.0, |(k, _)| k.as_str() == id).ok()?;
        Some(found.remove().0.1)
    }

    /// Every id with a value.
    pub(crate) fn keys(&self) -> impl Iterator<Item = &ModelId> {
        self.table.iter().map(|(k, _)| k)
    }

    /// Keeps the values for which `keep` holds.
    pub(crate) fn retain(&mut self, mut keep: impl FnMut(&ModelId) -> bool) {
        self.table.retain(|(k, _)| keep(k));
    }

    /// How many ids have a value.
    pub(crate) fn len(&self) -> usize {
        self.table.len()
    }

    /// Whether no id has a value (cheaper than a probe that finds none).
    pub(crate) fn is_empty(&self) -> bool {
        self.table.is_empty()
    }
}
