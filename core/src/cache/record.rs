//! A record: one model's CPU weights resident in one device cache, and its use counters.

use super::budget::NonSharedCharge;
use super::table::Entry;
use super::weights::{Canonical, CanonicalId};
use crate::runtime::{Arc, Runtime};

/// Where a record's CPU weights live.
pub(crate) enum Residency<W, R: Runtime> {
    /// The key's canonical weights, shared with every peer that holds the key.
    Shared(Arc<Canonical<W, R>>),
    /// Weights only this record holds, charged to its cache.
    Own { weights: W, _charge: NonSharedCharge<R> },
}

/// One model resident in one cache. Identity (`Arc::ptr_eq`) decides every eviction.
pub(crate) struct Record<W, R: Runtime> {
    pub(crate) key: String,
    /// The key's hash in the record table, computed once.
    pub(crate) key_hash: u64,
    pub(crate) bytes: u64,
    pub(crate) residency: Residency<W, R>,
}

impl<W, R: Runtime> Residency<W, R> {
    pub(crate) fn shared(&self) -> Option<&Arc<Canonical<W, R>>> {
        match self {
            Residency::Shared(canonical) => Some(canonical),
            Residency::Own { .. } => None,
        }
    }
}

impl<W, R: Runtime> Record<W, R> {
    pub(crate) fn weights(&self) -> &W {
        match &self.residency {
            Residency::Shared(canonical) => canonical,
            Residency::Own { weights, .. } => weights,
        }
    }

    pub(crate) fn shared(&self) -> Option<&Arc<Canonical<W, R>>> {
        self.residency.shared()
    }
}

impl<W, R: Runtime> Entry for Record<W, R> {
    fn key(&self) -> &str {
        &self.key
    }

    fn key_hash(&self) -> u64 {
        self.key_hash
    }

    fn bytes(&self) -> u64 {
        self.bytes
    }

    fn canonical(&self) -> Option<CanonicalId> {
        self.shared().map(|c| c.id())
    }

    fn shared_elsewhere(&self) -> bool {
        self.shared().is_some_and(|c| Arc::strong_count(c) > 1)
    }
}
