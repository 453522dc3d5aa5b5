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

// ---- The claim a handle holds -------------------------------------------------------------------

/// The constructor of a claim's handle, which takes the cache's and the record's references over.
pub(crate) type Build<W, R, T> = fn(Arc<DeviceCache<W, R>>, Arc<Record<W, R>>) -> T;

/// What a conversion reports and drains through once the handle exists: its cache and key.
pub(crate) type Parts<W, R, T> = for<'a> fn(&'a T) -> (&'a DeviceCache<W, R>, &'a str);

/// A claim's cache and record, moved whole from one handle to the next when a claim converts
/// (no reference count taken and given back on the way).
pub(crate) struct Claimed<W: Send + Sync + 'static, R: Runtime> {
    cache: Arc<DeviceCache<W, R>>,
    record: Arc<Record<W, R>>,
}

impl<W: Send + Sync + 'static, R: Runtime> Claimed<W, R> {
    /// Releases the claim `claim` (the handle's `Drop`), unless a mutant leaks unused handles.
    fn release(self, claim: Claim, unused: bool) {
        let Claimed { cache, record } = self;
        if unused && cache.leaks_unused_handles() {
            return;
        }
        let record = cache.letting_go(record);
        cache.release(record.get(), claim);
    }

    /// Turns this claim from `from` into `to`, handing out `to`'s handle (`build`).
    fn convert<T>(self, (from, to): (Claim, Claim), build: Build<W, R, T>, parts: Parts<W, R, T>) -> T {
        DeviceCache::convert(self.cache, self.record, (from, to), (build, parts))
    }
}

// ---- Admission ----------------------------------------------------------------------------------

/// Returned by `put`: the record is inside its admission window until this is turned into a
/// [`LoadedModel`] or dropped.
pub struct Admission<W: Send + Sync + 'static, R: Runtime = StdRuntime> {
    claimed: Option<Claimed<W, R>>,
}

impl<W: Send + Sync + 'static, R: Runtime> Admission<W, R> {
    /// The handle of an admission just counted on `record`.
    pub(crate) fn new(cache: Arc<DeviceCache<W, R>>, record: Arc<Record<W, R>>) -> Self {
        Self { claimed: Some(Claimed { cache, record }) }
    }

    /// Hands the admitted record to its user: the admission becomes a first-use hold in one
    /// critical section, so nothing can evict the record in between.
    pub fn into_loaded(mut self) -> LoadedModel<W, R> {
        let claimed = self.claimed.take().expect("an admission is converted once");
        claimed.convert((Claim::Admitting, Claim::Hold), LoadedModel::new, LoadedModel::parts)
    }

    /// The key.
    pub fn key(&self) -> &str {
        &self.claimed.as_ref().expect("live admission").record.key
    }
}

impl<W: Send + Sync + 'static, R: Runtime> Drop for Admission<W, R> {
    fn drop(&mut self) {
        if let Some(claimed) = self.claimed.take() {
            claimed.release(Claim::Admitting, true);
        }
    }
}

impl<W: Send + Sync + 'static, R: Runtime> fmt::Debug for Admission<W, R> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Admission").field("key", &self.claimed.as_ref().map(|c| &c.record.key)).finish()
    }
}

// ---- LoadedModel --------------------------------------------------------------------------------

/// Returned by `get`: a first-use hold on a record, armed in the same critical section as the
/// lookup. [`LoadedModel::lock`] turns it into a [`ModelGuard`]; dropping it unused releases it.
pub struct LoadedModel<W: Send + Sync + 'static, R: Runtime = StdRuntime> {
    claimed: Option<Claimed<W, R>>,
}

impl<W: Send + Sync + 'static, R: Runtime> LoadedModel<W, R> {
    /// The handle of a first-use hold just counted on `record`.
    pub(crate) fn new(cache: Arc<DeviceCache<W, R>>, record: Arc<Record<W, R>>) -> Self {
        Self { claimed: Some(Claimed { cache, record }) }
    }

    fn claimed(&self) -> &Claimed<W, R> {
        self.claimed.as_ref().expect("live hold")
    }

    /// What a conversion reports and drains through: the cache and the key.
    fn parts(&self) -> (&DeviceCache<W, R>, &str) {
        let claimed = self.claimed();
        (&claimed.cache, &claimed.record.key)
    }

    /// The weights held (read only: they are used once locked).
    pub(crate) fn weights(&self) -> &W {
        self.claimed().record.weights()
    }

    /// The cache the record is resident in.
    pub(crate) fn cache(&self) -> &Arc<DeviceCache<W, R>> {
        &self.claimed().cache
    }

    /// Locks the record for use: the hold becomes a lock in one critical section.
    pub fn lock(mut self) -> ModelGuard<W, R> {
        let claimed = self.claimed.take().expect("a loaded model is locked once");
        claimed.convert((Claim::Hold, Claim::Lock), ModelGuard::new, ModelGuard::parts)
    }

    /// The key.
    pub fn key(&self) -> &str {
        &self.claimed().record.key
    }
}

impl<W: Send + Sync + 'static, R: Runtime> Drop for LoadedModel<W, R> {
    fn drop(&mut self) {
        if let Some(claimed) = self.claimed.take() {
            claimed.release(Claim::Hold, true);
        }
    }
}

impl<W: Send + Sync + 'static, R: Runtime> fmt::Debug for LoadedModel<W, R> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LoadedModel").field("key", &self.claimed.as_ref().map(|c| &c.record.key)).finish()
    }
}

// ---- ModelGuard ---------------------------------------------------------------------------------

/// A locked record: never evicted while this lives. Dereferences to the weights.
pub struct ModelGuard<W: Send + Sync + 'static, R: Runtime = StdRuntime> {
    claimed: Option<Claimed<W, R>>,
}

impl<W: Send + Sync + 'static, R: Runtime> ModelGuard<W, R> {
    /// The guard of a lock just counted on `record`.
    pub(crate) fn new(cache: Arc<DeviceCache<W, R>>, record: Arc<Record<W, R>>) -> Self {
        Self { claimed: Some(Claimed { cache, record }) }
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

    fn claimed(&self) -> &Claimed<W, R> {
        self.claimed.as_ref().expect("live guard")
    }

    fn record(&self) -> &Record<W, R> {
        &self.claimed().record
    }

    /// What a conversion reports and drains through: the cache and the key.
    fn parts(&self) -> (&DeviceCache<W, R>, &str) {
        let claimed = self.claimed();
        (&claimed.cache, &claimed.record.key)
    }

    /// The cache this guard belongs to.
    pub(crate) fn cache(&self) -> &Arc<DeviceCache<W, R>> {
        &self.claimed().cache
    }

    /// The record this guard locks.
    pub(crate) fn locked(&self) -> &Arc<Record<W, R>> {
        &self.claimed().record
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
        if let Some(claimed) = self.claimed.take() {
            claimed.release(Claim::Lock, false);
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
