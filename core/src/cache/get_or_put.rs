//! [`DeviceCache::get_or_put`]: the cache-backed load every device of a group shares.

use super::single_flight::Turn;
use super::{DeviceCache, LoadedModel, Put};
use crate::error::{BoxError, CacheError, SourceError};
use crate::id::ModelId;
use crate::mutants::Mutant;
use crate::runtime::{Arc, Runtime};

impl<W: Send + Sync + 'static, R: Runtime> DeviceCache<W, R> {
    /// The model `key` from this cache, loading it if no device of the group has it.
    ///
    /// In order: this cache's record (a hit); a canonical alive in the group's store, adopted
    /// as it is (no load, no second copy); else `load` runs and its weights are admitted with
    /// `declared_bytes`, the size declared before loading. Loads are single-flight per key
    /// across the whole group: a second device that finds a load of `key` in flight waits for
    /// it (at most [`CacheGroup::load_wait`](super::CacheGroup::load_wait), then
    /// [`CacheError::LoadWaitTimeout`]) and adopts its canonical, so each file is read once.
    ///
    /// A declared size over the whole RAM budget is refused before anything loads
    /// ([`CacheError::TooLarge`]). `load` is user code: it runs with no lock of the cache held. If it fails
    /// ([`CacheError::Load`]) or panics, nothing is admitted and a waiting device tries again.
    ///
    /// Once the group is [shut down](super::CacheGroup::shutdown) a call that starts, or that
    /// waits for another device's load, is refused with [`CacheError::ShutDown`]; a load
    /// already in flight finishes, and its record is stale: its caller uses it, and its last
    /// release evicts it.
    pub fn get_or_put<E: Into<BoxError>>(
        self: &Arc<Self>,
        key: &str,
        declared_bytes: u64,
        load: impl FnOnce() -> Result<W, E>,
    ) -> Result<LoadedModel<W, R>, CacheError> {
        ModelId::validate(key)?;
        let cap = self.group().budget().cap();
        if declared_bytes > cap {
            return Err(CacheError::TooLarge { key: key.to_owned(), bytes: declared_bytes, cap });
        }
        let loads = &self.group().loads;
        let wait = loads.wait();
        let mut start = self.now();
        loop {
            if self.runtime().mutant(Mutant::LOAD_WAIT_RESTARTS) {
                start = self.now();
            }
            if loads.is_shut_down() {
                return Err(CacheError::ShutDown { key: key.to_owned() });
            }
            if let Some(loaded) = self.get(key) {
                return Ok(loaded);
            }
            if let Some(admission) = self.adopt(key)? {
                return Ok(admission.into_loaded());
            }
            let left = wait.saturating_sub(self.now().saturating_sub(start));
            let claim = match loads.claim_or_wait(key, left) {
                Ok(Turn::Load(claim)) => claim,
                Ok(Turn::Retry) => continue,
                Ok(Turn::ShutDown) => return Err(CacheError::ShutDown { key: key.to_owned() }),
                Err(_) => return Err(CacheError::LoadWaitTimeout { key: key.to_owned(), waited: wait }),
            };
            // A load may have ended between the lookups and the claim.
            if let Some(loaded) = self.get(key) {
                return Ok(loaded);
            }
            if let Some(admission) = self.adopt(key)? {
                return Ok(admission.into_loaded());
            }
            let weights = load()
                .map_err(|e| CacheError::Load { key: key.to_owned(), source: SourceError::new(e.into()) })?;
            let loaded = self.put(key, weights, declared_bytes, Put::default())?.into_loaded();
            drop(claim);
            return Ok(loaded);
        }
    }
}
