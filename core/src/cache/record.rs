//! A record: one model's CPU weights resident in one device cache, and its use counters.

use super::budget::NonSharedCharge;
use super::weights::Canonical;
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

/// A record in a cache's map, with what protects it from eviction.
pub(crate) struct RecordSlot<W, R: Runtime> {
    pub(crate) record: Arc<Record<W, R>>,
    /// Live [`ModelGuard`](super::ModelGuard)s.
    pub(crate) locks: usize,
    /// Live [`LoadedModel`](super::LoadedModel)s that have not locked yet.
    pub(crate) holds: usize,
    /// Live [`Admission`](super::Admission)s (between `put` and the loader's retrieval).
    pub(crate) admitting: usize,
    /// Evict at the last release (set by `drop_model`, `shutdown`, or at birth after shutdown).
    pub(crate) stale: bool,
    /// LRU clock of the last use.
    pub(crate) last_used: u64,
    /// Runtime time of the last claim change (for keep-alive expiry).
    pub(crate) idle_since: std::time::Duration,
    /// The record's copy on the cache's device.
    pub(crate) device: DeviceCopy,
}

/// Where a record stands on its cache's device.
pub(crate) enum DeviceCopy {
    /// Not on the device.
    Absent,
    /// A lock is moving it there; other lockers wait for that move.
    Moving,
    /// On the device: the copy (typed by the weights' `OnDevice`) and its device bytes.
    Resident { copy: Arc<dyn std::any::Any + Send + Sync>, bytes: u64 },
}

impl DeviceCopy {
    /// Device bytes of a resident copy (0 otherwise: a move in flight is charged by the ledger).
    pub(crate) fn resident_bytes(&self) -> u64 {
        match self {
            DeviceCopy::Resident { bytes, .. } => *bytes,
            DeviceCopy::Absent | DeviceCopy::Moving => 0,
        }
    }
}

impl<W, R: Runtime> RecordSlot<W, R> {
    /// Nothing protects it: no lock, no hold, no admission.
    pub(crate) fn free(&self) -> bool {
        self.locks == 0 && self.holds == 0 && self.admitting == 0
    }
}
