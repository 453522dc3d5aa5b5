//! [`DeviceCache::get_or_put`]: the cache-backed load every device of a group shares, and the
//! [`Declared`] size a load reserves before it runs.

use super::device::Prepared;
use super::single_flight::{LoadClaim, Turn};
use super::{DeviceCache, LoadedModel, PutOptions};
use crate::deadline::{CallOptions, Deadline};
use crate::error::{BoxError, CacheError, SourceError};
use crate::id::ModelId;
use crate::mutants::Mutant;
use crate::runtime::{Arc, Runtime};
use crate::telemetry;

/// A caller's loader, called at most once (`None` after), its error boxed.
type LoadOnce<'a, W> = &'a mut dyn FnMut() -> Option<Result<W, BoxError>>;

// ---- Declared sizes -----------------------------------------------------------------------------

/// The size of a load, declared before it runs: the bytes its weights will take once loaded
/// (what the budget charges), and the peak it allocates while loading (what it reserves; at
/// least the final bytes). A `u64` converts into a declaration whose peak is its size.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Declared {
    bytes: Option<u64>,
    peak: u64,
}

impl Declared {
    /// Weights of `bytes`, loaded with no transient allocation beyond them.
    pub const fn new(bytes: u64) -> Self {
        Self { bytes: Some(bytes), peak: bytes }
    }

    /// A load whose size nobody knows: a hard budget refuses it
    /// ([`CacheError::SizeUnknown`]).
    pub const fn unknown() -> Self {
        Self { bytes: None, peak: 0 }
    }

    /// The same weights, whose load allocates up to `peak` bytes at once (kept at least the
    /// final bytes).
    pub const fn with_peak(self, peak: u64) -> Self {
        let floor = match self.bytes {
            Some(bytes) => bytes,
            None => 0,
        };
        Self { bytes: self.bytes, peak: if peak > floor { peak } else { floor } }
    }

    /// The bytes the weights take once loaded (`None`: unknown).
    pub const fn bytes(&self) -> Option<u64> {
        self.bytes
    }

    /// The most the load allocates at once: what it reserves.
    pub const fn peak(&self) -> u64 {
        self.peak
    }
}

impl From<u64> for Declared {
    fn from(bytes: u64) -> Self {
        Self::new(bytes)
    }
}

impl From<Option<u64>> for Declared {
    fn from(bytes: Option<u64>) -> Self {
        bytes.map_or(Self::unknown(), Self::new)
    }
}

// ---- Get or load --------------------------------------------------------------------------------

impl<W: Send + Sync + 'static, R: Runtime> DeviceCache<W, R> {
    /// The model `key` from this cache, loading it if no device of the group has it.
    ///
    /// Counted in [`DeviceCache::stats`] as one hit or one miss, as its first lookup found the
    /// key (however many times it looks again after waiting for a load).
    ///
    /// In order: this cache's record (a hit); a canonical alive in the group's store, adopted
    /// as it is (no load, no second copy); else the declared peak is reserved in the RAM budget
    /// (making room and waiting for it, see [`RamBudget`](super::RamBudget); then
    /// [`CacheError::NoRoom`]), and only then does `load` run; its weights are admitted with
    /// the declared bytes, charged out of the reservation. The reservation is released on
    /// every other path: a load error, a panic, an adoption after all. An unknown size is
    /// refused ([`CacheError::SizeUnknown`]) before anything loads. Loads are single-flight per key
    /// across the whole group: a second device that finds a load of `key` in flight waits for
    /// it (at most [`CacheGroup::load_wait`](super::CacheGroup::load_wait), then
    /// [`CacheError::LoadWaitTimeout`]) and adopts its canonical, so each file is read once.
    ///
    /// A declared size over the whole RAM budget is refused before anything loads or is adopted
    /// ([`CacheError::TooLarge`]); a record of `key` resident in this cache is still served,
    /// whatever the cap became, and a shut-down group refuses with [`CacheError::ShutDown`]
    /// first. `load` is user code: it runs with no lock of the cache held. If it fails
    /// ([`CacheError::Load`]) or panics, nothing is admitted and a waiting device tries again.
    ///
    /// A caller that itself holds or locks the records whose room its load needs waits the whole
    /// room wait for room only it can free, then gets [`CacheError::NoRoom`] (which names those
    /// records); with an unbounded room wait it would wait for good. Let go of what you hold
    /// before loading more, or size the cap for everything held at once plus one load's peak.
    ///
    /// Once the group is [shut down](super::CacheGroup::shutdown) a call that starts, or that
    /// waits for another device's load or for RAM room, is refused with
    /// [`CacheError::ShutDown`]; a load already past its wait finishes, and its record is
    /// stale: its caller uses it, and its last release evicts it.
    pub fn get_or_put<E: Into<BoxError>>(
        self: &Arc<Self>,
        key: &str,
        declared: impl Into<Declared>,
        load: impl FnOnce() -> Result<W, E>,
    ) -> Result<LoadedModel<W, R>, CacheError> {
        self.get_or_put_until(key, declared, load, Deadline::NONE)
    }

    /// [`DeviceCache::get_or_put`] with its waits — for another device's load of the key
    /// ([`CacheError::LoadWaitTimeout`]) and for room in the RAM budget
    /// ([`CacheError::NoRoom`]) — bounded by `options` too (SPEC 1.10); each error's `waited`
    /// is the bound that wait had, and a refused call leaves nothing behind (no reservation,
    /// no claim). `load` itself is not interrupted.
    ///
    /// ```
    /// use std::time::Duration;
    /// use resident::cache::CacheGroup;
    /// use resident::{CacheError, CallOptions};
    /// let group = CacheGroup::<Vec<u8>>::new(1_000)?;
    /// let cpu = group.cache("cpu");
    /// let held = cpu.get_or_put("a", 800, || Ok::<_, CacheError>(vec![0; 800]))?;
    /// let _locked = held.lock(); // in use: not evictable
    /// let within = CallOptions::new().with_timeout(Duration::from_millis(20));
    /// let refused = cpu.get_or_put_with("b", 800, || Ok::<_, CacheError>(vec![0; 800]), within);
    /// assert!(matches!(refused, Err(CacheError::NoRoom { waited, .. }) if waited <= Duration::from_millis(20)));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn get_or_put_with<E: Into<BoxError>>(
        self: &Arc<Self>,
        key: &str,
        declared: impl Into<Declared>,
        load: impl FnOnce() -> Result<W, E>,
        options: CallOptions,
    ) -> Result<LoadedModel<W, R>, CacheError> {
        self.get_or_put_until(key, declared, load, options.deadline(self.runtime()))
    }

    /// [`DeviceCache::get_or_put_with`] for a caller that already has its deadline (a
    /// [`Loader::load_until`](crate::Loader::load_until) passing its call's on).
    pub fn get_or_put_until<E: Into<BoxError>>(
        self: &Arc<Self>,
        key: &str,
        declared: impl Into<Declared>,
        load: impl FnOnce() -> Result<W, E>,
        deadline: Deadline,
    ) -> Result<LoadedModel<W, R>, CacheError> {
        let mut load = Some(load);
        let mut load_once = || load.take().map(|load| load().map_err(Into::into));
        self.get_or_put_once(key, declared.into(), &mut load_once, deadline)
    }

    /// [`DeviceCache::get_or_put_until`] with its loader behind a reference: compiled once per
    /// cache type rather than once per loader and error type of its callers.
    fn get_or_put_once(
        self: &Arc<Self>,
        key: &str,
        declared: Declared,
        load: LoadOnce<'_, W>,
        deadline: Deadline,
    ) -> Result<LoadedModel<W, R>, CacheError> {
        ModelId::validate_key(key)?;
        let Some(declared_bytes) = declared.bytes() else {
            return Err(CacheError::SizeUnknown { key: key.to_owned() });
        };
        // The cap as the call found it; a lowering while it waits for room refuses it there.
        let cap = self.group().budget().cap();
        if self.runtime().mutant(Mutant::TOO_LARGE_BEFORE_HIT) && declared.peak() > cap {
            return Err(CacheError::TooLarge { key: key.to_owned(), bytes: declared.peak(), cap });
        }
        let loads = &self.group().loads;
        let wait = deadline.bound(self.runtime(), loads.wait(), Mutant::DEADLINE_SKIPS_LOAD_WAIT);
        let mut start = self.now();
        // One call, one hit or one miss: the lookups after a wait or a claim are not counted.
        let mut counted = true;
        loop {
            if self.runtime().mutant(Mutant::LOAD_WAIT_RESTARTS) {
                start = self.now();
            }
            if loads.is_shut_down() {
                return Err(telemetry::cache_refused(CacheError::ShutDown { key: key.to_owned() }));
            }
            if let Some(loaded) = self.look_up(key, std::mem::take(&mut counted)) {
                return Ok(loaded);
            }
            // Refused before any admission (an adoption, a load), not before a hit: a record
            // resident here is served whatever the cap became, and a closed group says so first.
            if declared.peak() > cap {
                // A miss because the group's shutdown shut this cache meanwhile: it refused
                // loads first, and says so.
                let refused = if loads.is_shut_down() {
                    CacheError::ShutDown { key: key.to_owned() }
                } else {
                    CacheError::TooLarge { key: key.to_owned(), bytes: declared.peak(), cap }
                };
                return Err(telemetry::cache_refused(refused));
            }
            if let Some(admission) = self.adopt(key)? {
                return Ok(admission.into_loaded());
            }
            let left = wait.saturating_sub(self.now().saturating_sub(start));
            let claim = match loads.claim_or_wait(key, left) {
                Ok(Turn::Load(claim)) => claim,
                Ok(Turn::Retry) => continue,
                Ok(Turn::ShutDown) => {
                    return Err(telemetry::cache_refused(CacheError::ShutDown { key: key.to_owned() }));
                }
                Err(_) => return Err(load_wait_timeout(key, wait)),
            };
            return self.load_claimed(key, (declared, declared_bytes), load, deadline, claim);
        }
    }

    /// The rest of [`DeviceCache::get_or_put_until`] once this call holds the group's claim to
    /// load `key` (released once the loaded record is in place, or on the way out): a load that
    /// ended meanwhile is served or adopted; otherwise the room is reserved, the weights are
    /// built, and they are put under the reservation.
    fn load_claimed(
        self: &Arc<Self>,
        key: &str,
        (declared, declared_bytes): (Declared, u64),
        load: LoadOnce<'_, W>,
        deadline: Deadline,
        claim: LoadClaim<'_, R>,
    ) -> Result<LoadedModel<W, R>, CacheError> {
        // A load may have ended between the lookups and the claim.
        if let Some(loaded) = self.look_up(key, false) {
            return Ok(loaded);
        }
        if let Some(admission) = self.adopt(key)? {
            return Ok(admission.into_loaded());
        }
        // Read before the weights are built: a drop from now on may be one they straddle.
        let since = self.group().store.drop_mark();
        // The C-B1 mutant loads first; `put` then reserves for weights already built.
        let mut reservation = if self.runtime().mutant(Mutant::RESERVE_AFTER_LOAD) {
            None
        } else {
            self.reserve_room(key, declared.peak(), deadline)?
        };
        let weights = match R::catch_unwind(load) {
            Ok(Some(weights)) => {
                weights.map_err(|e| CacheError::Load { key: key.to_owned(), source: SourceError::new(e) })?
            }
            Ok(None) => unreachable!("a call claims one load, so it runs its loader once"),
            Err(payload) => {
                if self.runtime().mutant(Mutant::RAM_RESERVATION_LEAKS_ON_PANIC) {
                    std::mem::forget(reservation.take());
                }
                R::resume_caught(payload)
            }
        };
        let prepared = Prepared { reservation, deadline, since: Some(since) };
        let loaded =
            self.put_reserved(key, weights, declared_bytes, PutOptions::default(), prepared)?.into_loaded();
        drop(claim);
        Ok(loaded)
    }
}

/// The refusal of a wait for another caller's load of `key` that ran out after `waited`,
/// counted.
fn load_wait_timeout(key: &str, waited: std::time::Duration) -> CacheError {
    telemetry::cache_refused(CacheError::LoadWaitTimeout { key: key.to_owned(), waited })
}
