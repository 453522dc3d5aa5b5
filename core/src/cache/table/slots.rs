//! [`Slots`]: the record table's slots by key, hashed. Beside the lookups by key, it finds the
//! slot a given record occupies by the record's identity under its key's hash, so that a
//! claim's conversion and release (which hold the record) compare a pointer, not the key.

use std::hash::BuildHasher;

use hashbrown::HashTable;
use hashbrown::hash_table::Entry;
use rustc_hash::FxBuildHasher;

/// Slots `S` by key. Nothing depends on their order: iterating them is in no particular order.
pub(super) struct Slots<S> {
    table: HashTable<(String, S)>,
}

/// The hash a slot is filed under: its key's.
pub(crate) fn hash(key: &str) -> u64 {
    FxBuildHasher.hash_one(key)
}

impl<S> Default for Slots<S> {
    fn default() -> Self {
        Self { table: HashTable::new() }
    }
}

impl<S> Slots<S> {
    /// The slot of `key`.
    pub(super) fn get(&self, key: &str) -> Option<&S> {
        self.table.find(hash(key), |(k, _)| k == key).map(|(_, slot)| slot)
    }

    /// The slot of `key`, to change.
    pub(super) fn get_mut(&mut self, key: &str) -> Option<&mut S> {
        self.table.find_mut(hash(key), |(k, _)| k == key).map(|(_, slot)| slot)
    }

    /// The slot filed under `key_hash` (its key's [`hash`]) that `is` picks out, without
    /// comparing keys: `is` must accept only a slot whose key has that hash and is the one
    /// looked for (a slot that holds the record looked for).
    pub(super) fn find_mut(&mut self, key_hash: u64, is: impl Fn(&S) -> bool) -> Option<&mut S> {
        self.table.find_mut(key_hash, |(_, slot)| is(slot)).map(|(_, slot)| slot)
    }

    /// [`Slots::find_mut`], to read.
    pub(super) fn find(&self, key_hash: u64, is: impl Fn(&S) -> bool) -> Option<&S> {
        self.table.find(key_hash, |(_, slot)| is(slot)).map(|(_, slot)| slot)
    }

    /// Whether `key` has a slot.
    pub(super) fn contains_key(&self, key: &str) -> bool {
        self.get(key).is_some()
    }

    /// Puts `slot` under `key`; the slot it replaces.
    pub(super) fn insert(&mut self, key: String, slot: S) -> Option<S> {
        match self.table.entry(hash(&key), |(k, _)| *k == key, |(k, _)| hash(k)) {
            Entry::Occupied(mut occupied) => Some(std::mem::replace(&mut occupied.get_mut().1, slot)),
            Entry::Vacant(vacant) => {
                vacant.insert((key, slot));
                None
            }
        }
    }

    /// Takes the slot of `key` out.
    pub(super) fn remove(&mut self, key: &str) -> Option<S> {
        let found = self.table.find_entry(hash(key), |(k, _)| k == key).ok()?;
        Some(found.remove().0.1)
    }

    /// Every key with its slot.
    pub(super) fn iter(&self) -> impl Iterator<Item = (&String, &S)> {
        self.table.iter().map(|(key, slot)| (key, slot))
    }

    /// Every key with its slot, to change.
    pub(super) fn iter_mut(&mut self) -> impl Iterator<Item = (&String, &mut S)> {
        self.table.iter_mut().map(|(key, slot)| (&*key, slot))
    }

    /// Every slot.
    pub(super) fn values(&self) -> impl Iterator<Item = &S> {
        self.table.iter().map(|(_, slot)| slot)
    }

    /// Every slot, to change.
    pub(super) fn values_mut(&mut self) -> impl Iterator<Item = &mut S> {
        self.table.iter_mut().map(|(_, slot)| slot)
    }
}
