//! What a cache reports of its table: its counters and its records.

use crate::cache::weights::CanonicalId;

/// Counters of one cache.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CacheStats {
    /// `get` found the key.
    pub hits: u64,
    /// `get` did not find the key.
    pub misses: u64,
    /// Records admitted (an admission that joined the key's live occupant admits none). Each
    /// leaves as one of `evictions`: `admissions - evictions` records occupy keys now or were
    /// replaced while stale and are still held.
    pub admissions: u64,
    /// Records evicted, by every path: a stale record replaced by a new admission of its key
    /// counts at its holders' last release, as a stale occupant does.
    pub evictions: u64,
    /// Bytes of the evicted records.
    pub bytes_evicted: u64,
    /// Bytes of the records resident now (a shared record counts its canonical's bytes here in
    /// every cache that uses it; the group's [`RamBudget`](crate::cache::RamBudget) counts it once).
    pub bytes_resident: u64,
    /// The most bytes resident at once since the cache was created.
    pub high_water: u64,
}

impl CacheStats {
    pub(super) fn admitted(&mut self, bytes: u64) {
        self.admissions += 1;
        self.bytes_resident = self.bytes_resident.saturating_add(bytes);
        self.high_water = self.high_water.max(self.bytes_resident);
    }

    /// A record left the map (`evicted`: and the cache with it; a detached record leaves the
    /// cache at its last release, [`CacheStats::evicted`]).
    pub(super) fn left(&mut self, bytes: u64, evicted: bool) {
        self.bytes_resident = self.bytes_resident.saturating_sub(bytes);
        if evicted {
            self.evicted(bytes);
        }
    }

    /// A record of `bytes` left the cache.
    pub(super) fn evicted(&mut self, bytes: u64) {
        self.evictions += 1;
        self.bytes_evicted = self.bytes_evicted.saturating_add(bytes);
    }
}

/// One resident record, as [`DeviceCache::resident`](crate::cache::DeviceCache::resident) reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Resident {
    /// The key.
    pub key: String,
    /// The record's bytes.
    pub bytes: u64,
    /// Identity of the shared canonical it uses (equal for records sharing one), or `None` for a
    /// private copy.
    pub canonical: Option<CanonicalId>,
    /// Replaced in the map while stale; alive only through a handle.
    pub detached: bool,
}
