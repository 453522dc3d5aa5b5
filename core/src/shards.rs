//! [`Shards`]: a value split into shards by id, each behind its own reader-writer lock on its
//! own cache line, so that readers of different ids share no lock word and readers of one id
//! only read theirs. The registry's slots and the LRU caches' stamps live in them, in a
//! [`ById`] per shard, filed under the hash the shard was chosen by.

use crate::hashed::{Hashed, Keyed};
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

    /// The shard that holds `id`, and the hash that picked it (its [`ById`] files `id` under it):
    /// the id's own, if it keeps one.
    pub(crate) fn of<K: Keyed<ModelId> + ?Sized>(&self, id: &K) -> (&R::RwLock<T>, u64) {
        let hash = id.hashed();
        // The hash's high bits are its best mixed (a hash table probes by the low ones).
        let at = usize::try_from(hash >> 60).unwrap_or(0) % SHARDS;
        (&self.shards[at].0, hash)
    }

    /// Every shard, in order (one at a time: not a snapshot across shards).
    pub(crate) fn iter(&self) -> impl Iterator<Item = &R::RwLock<T>> {
        self.shards.iter().map(|s| &s.0)
    }
}

/// Values by id, filed under the hash that picked their shard ([`Shards::of`]): a lookup
/// hashes the id once (an id keeps its hash: not at all), and compares the key of the hit
/// only.
pub(crate) type ById<V> = Hashed<ModelId, V>;
