//! [`Hashed`]: values by string key in a `hashbrown` table, every lookup under the key's
//! [`hash`] as its caller knows it ([`Keyed`]), so that a hash computed once (to pick a shard,
//! kept by a record or by a [`ModelId`](crate::ModelId)) is not computed again. The record
//! table's slots, the shards' maps and the lifecycle table are made of it.

use std::borrow::Borrow;
use std::hash::BuildHasher;

use hashbrown::HashTable;
use hashbrown::hash_table::Entry;
use rustc_hash::FxBuildHasher;

/// The hash a key is filed under.
pub(crate) fn hash(key: &str) -> u64 {
    FxBuildHasher.hash_one(key)
}

/// What a lookup of a key of type `K` knows: the [`hash`] the key is filed under (a
/// [`ModelId`](crate::ModelId) keeps its own, computed once when it was made; a `str` is hashed
/// when asked), and whether a filed key is the one looked for.
pub(crate) trait Keyed<K> {
    /// The [`hash`] the key is filed under.
    fn hashed(&self) -> u64;
    /// Whether `key` is the one looked for.
    fn is(&self, key: &K) -> bool;
}

impl<K: Borrow<str>> Keyed<K> for str {
    fn hashed(&self) -> u64 {
        hash(self)
    }

    fn is(&self, key: &K) -> bool {
        key.borrow() == self
    }
}

/// Values `V` by key `K`, each filed under its key's [`hash`]. Nothing depends on their order:
/// iterating them is in no particular order.
pub(crate) struct Hashed<K, V> {
    table: HashTable<(K, V)>,
}

impl<K, V> Default for Hashed<K, V> {
    fn default() -> Self {
        Self { table: HashTable::new() }
    }
}

impl<K: std::fmt::Debug, V: std::fmt::Debug> std::fmt::Debug for Hashed<K, V> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_map().entries(self.table.iter().map(|(k, v)| (k, v))).finish()
    }
}

impl<K: Borrow<str>, V> Hashed<K, V> {
    /// The value filed under `at` that `is` picks out, without comparing keys: `is` must accept
    /// only the value of the key looked for (one that holds the record looked for, say).
    pub(crate) fn find(&self, at: u64, is: impl Fn(&V) -> bool) -> Option<&V> {
        self.table.find(at, |(_, v)| is(v)).map(|(_, v)| v)
    }

    /// [`Hashed::find`], to change.
    pub(crate) fn find_mut(&mut self, at: u64, is: impl Fn(&V) -> bool) -> Option<&mut V> {
        self.table.find_mut(at, |(_, v)| is(v)).map(|(_, v)| v)
    }

    /// Puts `value` under `key` (whose hash is `at`); the value it replaces.
    pub(crate) fn insert(&mut self, at: u64, key: K, value: V) -> Option<V> {
        let rehash = |(k, _): &(K, V)| hash(k.borrow());
        match self.table.entry(at, |(k, _)| k.borrow() == key.borrow(), rehash) {
            Entry::Occupied(mut occupied) => Some(std::mem::replace(&mut occupied.get_mut().1, value)),
            Entry::Vacant(vacant) => {
                vacant.insert((key, value));
                None
            }
        }
    }

    /// Every key with its value.
    pub(crate) fn iter(&self) -> impl Iterator<Item = (&K, &V)> {
        self.table.iter().map(|(k, v)| (k, v))
    }

    /// Every key with its value, to change.
    pub(crate) fn iter_mut(&mut self) -> impl Iterator<Item = (&K, &mut V)> {
        self.table.iter_mut().map(|(k, v)| (&*k, v))
    }

    /// Every value.
    pub(crate) fn values(&self) -> impl Iterator<Item = &V> {
        self.table.iter().map(|(_, v)| v)
    }

    /// Every value, to change.
    pub(crate) fn values_mut(&mut self) -> impl Iterator<Item = &mut V> {
        self.table.iter_mut().map(|(_, v)| v)
    }

    /// Every value, taken out.
    pub(crate) fn into_values(self) -> impl Iterator<Item = V> {
        self.table.into_iter().map(|(_, v)| v)
    }

    /// Keeps the values whose key `keep` accepts.
    pub(crate) fn retain(&mut self, mut keep: impl FnMut(&K) -> bool) {
        self.table.retain(|(k, _)| keep(k));
    }

    /// How many keys have a value.
    pub(crate) fn len(&self) -> usize {
        self.table.len()
    }

    /// Whether no key has a value (cheaper than a probe that finds none).
    pub(crate) fn is_empty(&self) -> bool {
        self.table.is_empty()
    }

    /// The value of `id` (a key that keeps its hash is not hashed again: [`Keyed`]).
    pub(crate) fn get_by<Q: Keyed<K> + ?Sized>(&self, id: &Q) -> Option<&V> {
        self.get_at(id.hashed(), id)
    }

    /// The value of `id`, whose hash is `at`.
    pub(crate) fn get_at<Q: Keyed<K> + ?Sized>(&self, at: u64, id: &Q) -> Option<&V> {
        self.table.find(at, |(k, _)| id.is(k)).map(|(_, v)| v)
    }

    /// The value of `id`, to change.
    pub(crate) fn get_mut_by<Q: Keyed<K> + ?Sized>(&mut self, id: &Q) -> Option<&mut V> {
        self.table.find_mut(id.hashed(), |(k, _)| id.is(k)).map(|(_, v)| v)
    }

    /// Takes the value of `id` out.
    pub(crate) fn remove_by<Q: Keyed<K> + ?Sized>(&mut self, id: &Q) -> Option<V> {
        self.remove_at(id.hashed(), id)
    }

    /// Takes the value of `id`, whose hash is `at`, out.
    pub(crate) fn remove_at<Q: Keyed<K> + ?Sized>(&mut self, at: u64, id: &Q) -> Option<V> {
        let found = self.table.find_entry(at, |(k, _)| id.is(k)).ok()?;
        Some(found.remove().0.1)
    }

    /// The value of `key`, put there by `make` if it had none (then `true`).
    pub(crate) fn get_or_insert_with(&mut self, key: &K, make: impl FnOnce() -> V) -> (&mut V, bool)
    where
        K: Keyed<K> + Clone,
    {
        let rehash = |(k, _): &(K, V)| k.hashed();
        match self.table.entry(key.hashed(), |(k, _)| key.is(k), rehash) {
            Entry::Occupied(occupied) => (&mut occupied.into_mut().1, false),
            Entry::Vacant(vacant) => (&mut vacant.insert((key.clone(), make())).into_mut().1, true),
        }
    }
}
