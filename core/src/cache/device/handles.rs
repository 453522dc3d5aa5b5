//! The handles a cache hands out. Each one protects its record from eviction for as long as it
//! lives, and its `Drop` is the record's guaranteed releaser: no hold, lock or admission can be
//! stranded, whatever path (return, error, panic) drops it.

use std::fmt;
use std::ops::Deref;

use super::DeviceCache;
use crate::cache::record::Record;
use crate::cache::table::Claim;
use crate::cache::weights::CanonicalId;
use crate::held::Held;
use crate::mutants::Mutant;
use crate::runtime::{Arc, Runtime, StdRuntime};

/// Returned by `put`: the record is inside its admission window until this is turned into a
/// [`LoadedModel`] or dropped.
pub struct Admission<W: Send + Sync + 'static, R: Runtime = StdRuntime> {
    pub(crate) cache: Arc<DeviceCache<W, R>>,
    pub(crate) record: Option<Arc<Record<W, R>>>,
}

impl<W: Send + Sync + 'static, R: Runtime> Admission<W, R> {
    /// Hands the admitted record to its user: the admission becomes a first-use hold in one
    /// critical section, so nothing can evict the record in between.
    pub fn into_loaded(mut self) -> LoadedModel<W, R> {
        let record = self.record.take().expect("an admission is converted once");
        let cache = Arc::clone(&self.cache);
        let build = |record| LoadedModel { cache, record: Some(record) };
        self.cache.convert(record, (Claim::Admitting, Claim::Hold), (build, LoadedModel::key))
    }

    /// The key.
    pub fn key(&self) -> &str {
        &self.record.as_ref().expect("live admission").key
    }
}

impl<W: Send + Sync + 'static, R: Runtime> Drop for Admission<W, R> {
    fn drop(&mut self) {
        if let Some(record) = self.record.take().filter(|_| !self.cache.leaks_unused_handles()) {
            let record = self.cache.letting_go(record);
            self.cache.release(record.get(), Claim::Admitting);
        }
    }
}

impl<W: Send + Sync + 'static, R: Runtime> fmt::Debug for Admission<W, R> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Admission").field("key", &self.record.as_ref().map(|r| &r.key)).finish()
    }
}

/// Returned by `get`: a first-use hold on a record, armed in the same critical section as the
/// lookup. [`LoadedModel::lock`] turns it into a [`ModelGuard`]; dropping it unused releases it.
pub struct LoadedModel<W: Send + Sync + 'static, R: Runtime = StdRuntime> {
    pub(crate) cache: Arc<DeviceCache<W, R>>,
    pub(crate) record: Option<Arc<Record<W, R>>>,
}

impl<W: Send + Sync + 'static, R: Runtime> LoadedModel<W, R> {
    /// The weights held (read only: they are used once locked).
    pub(crate) fn weights(&self) -> &W {
        self.record.as_ref().expect("live holder").weights()
    }

    /// Locks the record for use: the hold becomes a lock in one critical section.
    pub fn lock(mut self) -> ModelGuard<W, R> {
        let record = self.record.take().expect("a loaded model is locked once");
        let cache = Arc::clone(&self.cache);
        let build = |record| ModelGuard::new(cache, record);
        self.cache.convert(record, (Claim::Hold, Claim::Lock), (build, ModelGuard::key))
    }

    /// The key.
    pub fn key(&self) -> &str {
        &self.record.as_ref().expect("live hold").key
    }
}

impl<W: Send + Sync + 'static, R: Runtime> Drop for LoadedModel<W, R> {
    fn drop(&mut self) {
        if let Some(record) = self.record.take().filter(|_| !self.cache.leaks_unused_handles()) {
            let record = self.cache.letting_go(record);
            self.cache.release(record.get(), Claim::Hold);
        }
    }
}

impl<W: Send + Sync + 'static, R: Runtime> fmt::Debug for LoadedModel<W, R> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LoadedModel").field("key", &self.record.as_ref().map(|r| &r.key)).finish()
    }
}

/// A locked record: never evicted while this lives. Dereferences to the weights.
pub struct ModelGuard<W: Send + Sync + 'static, R: Runtime = StdRuntime> {
    cache: Arc<DeviceCache<W, R>>,
    record: Option<Arc<Record<W, R>>>,
}

impl<W: Send + Sync + 'static, R: Runtime> ModelGuard<W, R> {
    /// The guard of a lock just counted on `record`.
    pub(crate) fn new(cache: Arc<DeviceCache<W, R>>, record: Arc<Record<W, R>>) -> Self {
        Self { cache, record: Some(record) }
    }

    /// The key.
    pub fn key(&self) -> &str {
        &self.record().key
    }

    /// Whether this record's weights are the key's shared canonical (`false`: private copy).
    pub fn is_shared(&self) -> bool {
        self.record().shared().is_some()
    }

    /// Identity of the shared canonical this record uses (equal for records sharing one), or
    /// `None` for a private copy.
    pub fn canonical_id(&self) -> Option<CanonicalId> {
        self.record().shared().map(|c| c.id())
    }

    /// Whether this record shares its canonical weights with `other`'s.
    pub fn shares_weights_with(&self, other: &ModelGuard<W, R>) -> bool {
        match (self.record().shared(), other.record().shared()) {
            (Some(a), Some(b)) => Arc::ptr_eq(a, b),
            _ => false,
        }
    }

    fn record(&self) -> &Record<W, R> {
        self.record.as_ref().expect("live guard")
    }

    /// The cache this guard belongs to.
    pub(crate) fn cache(&self) -> &Arc<DeviceCache<W, R>> {
        &self.cache
    }

    /// The record this guard locks.
    pub(crate) fn locked(&self) -> &Arc<Record<W, R>> {
        self.record.as_ref().expect("live guard")
    }
}

impl<W: Send + Sync + 'static, R: Runtime> Deref for ModelGuard<W, R> {
    type Target = W;

    fn deref(&self) -> &W {
        self.record().weights()
    }
}

impl<W: Send + Sync + 'static, R: Runtime> Drop for ModelGuard<W, R> {
    fn drop(&mut self) {
        if let Some(record) = self.record.take() {
            let record = self.cache.letting_go(record);
            self.cache.release(record.get(), Claim::Lock);
        }
    }
}

impl<W: Send + Sync + 'static, R: Runtime> fmt::Debug for ModelGuard<W, R> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ModelGuard").field("key", &self.key()).finish()
    }
}

impl<W: Send + Sync + 'static, R: Runtime> DeviceCache<W, R> {
    /// A handle's reference to its record, held while its claim is released: possibly the last
    /// one, whose weights' `Drop` is user code. The release runs user code too (reconciles, the
    /// library's reports): if that panics, or the thread already unwinds another panic, the
    /// record is let go under a catch (a panic leaving a `Drop` during an unwind aborts the
    /// process). Not under the `record-dropped-in-release-unwind` mutant's, which lets go of
    /// it after the release, in its unwind.
    fn letting_go(&self, record: Arc<Record<W, R>>) -> Held<Arc<Record<W, R>>, R> {
        Held::new(record, !self.mutant(Mutant::RECORD_DROPPED_IN_RELEASE_UNWIND))
    }
}
