//! [`Slots`]: the record table's slots by key, hashed ([`Hashed`]). Beside the lookups by key,
//! it finds the slot a given record occupies by the record's identity under its key's hash, so
//! that a claim's conversion and release (which hold the record, and its key's hash) compare a
//! pointer, not the key, and hash nothing.

use crate::hashed::{Hashed, hash};

/// Slots `S` by key. Nothing depends on their order: iterating them is in no particular order.
pub(super) struct Slots<S> {
    by_key: Hashed<String, S>,
}

impl<S> Default for Slots<S> {
    fn default() -> Self {
        Self { by_key: Hashed::default() }
    }
}

impl<S> Slots<S> {
    /// The slot of `key`.
    pub(super) fn get(&self, key: &str) -> Option<&S> {
        self.by_key.get_by(key)
    }

    /// The slot of `key`, to change.
    pub(super) fn get_mut(&mut self, key: &str) -> Option<&mut S> {
        self.by_key.get_mut_by(key)
    }

    /// The slot filed under `key_hash` (its key's [`hash`]) that `is` picks out, without
    /// comparing keys: `is` must accept only a slot whose key has that hash and is the one
    /// looked for (a slot that holds the record looked for).
    pub(super) fn find_mut(&mut self, key_hash: u64, is: impl Fn(&S) -> bool) -> Option<&mut S> {
        self.by_key.find_mut(key_hash, is)
    }

    /// [`Slots::find_mut`], to read.
    pub(super) fn find(&self, key_hash: u64, is: impl Fn(&S) -> bool) -> Option<&S> {
        self.by_key.find(key_hash, is)
    }

    /// Whether `key` has a slot.
    pub(super) fn contains_key(&self, key: &str) -> bool {
        self.get(key).is_some()
    }

    /// Puts `slot` under `key`; the slot it replaces.
    pub(super) fn insert(&mut self, key: String, slot: S) -> Option<S> {
        self.by_key.insert(hash(&key), key, slot)
    }

    /// Takes the slot of `key` out.
    pub(super) fn remove(&mut self, key: &str) -> Option<S> {
        self.by_key.remove_by(key)
    }

    /// Every key with its slot.
    pub(super) fn iter(&self) -> impl Iterator<Item = (&String, &S)> {
        self.by_key.iter()
    }

    /// Every key with its slot, to change.
    pub(super) fn iter_mut(&mut self) -> impl Iterator<Item = (&String, &mut S)> {
        self.by_key.iter_mut()
    }

    /// Every slot.
    pub(super) fn values(&self) -> impl Iterator<Item = &S> {
        self.by_key.values()
    }

    /// Every slot, to change.
    pub(super) fn values_mut(&mut self) -> impl Iterator<Item = &mut S> {
        self.by_key.values_mut()
    }

    /// Every slot, taken out.
    pub(super) fn into_values(self) -> impl Iterator<Item = S> {
        self.by_key.into_values()
    }
}
