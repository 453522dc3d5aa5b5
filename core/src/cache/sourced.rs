//! Weights that name their source (SPEC 1.11, 3.3; `X-5`): a cache-backed loader hands out
//! only weights read from its source as the source is now.
//!
//! A record resident in a cache, or a canonical alive in a peer, was read from the source as it
//! was then. When the source has changed since (a model file rewritten in place), serving it
//! would serve the old content for as long as the cache keeps it: across a `remove` and a new
//! `add`, and even across a `replace`, whose whole point is the new content.
//! [`DeviceCache::get_or_load_current`] compares the identity the weights came from with the
//! source's identity now; a mismatch drops the key ([`DeviceCache::drop_model`]: no device
//! adopts the old canonical again, holders keep it until they let go) and reads the source
//! afresh — unless a second look finds the source at the weights' version: the call's first
//! look was the stale one (another caller read the source after it changed), and the weights
//! are served. A replace asks for `fresh` weights, which drops the key first whatever it holds.

use super::DeviceCache;
use super::device::LoadedModel;
use super::get_or_put::Declared;
use crate::deadline::Deadline;
use crate::error::{BoxError, CacheError, SourceError};
use crate::mutants::Mutant;
use crate::runtime::{Arc, Runtime};

/// Weights that know which version of their source they were read from.
pub trait Sourced {
    /// What names one version of a source: a file's length, modification time and inode; a
    /// version number. A change of the source changes it.
    type Source: PartialEq + std::fmt::Debug;

    /// The version of the source these weights were read from.
    fn source(&self) -> Self::Source;
}

/// How often the source may change under one call before it gives up.
const ROUNDS: usize = 3;

impl<W: Sourced + Send + Sync + 'static, R: Runtime> DeviceCache<W, R> {
    /// [`DeviceCache::get_or_put_until`] that hands out only weights read from the source as
    /// `current` says it is now: a resident record or a peer's canonical read from another
    /// version is dropped from the whole group (its holders keep it until they let go) and the
    /// source read again with `load`. With `fresh` (a replace) the key is dropped first,
    /// whatever it holds: a replace never adopts the weights it replaces, not even unchanged
    /// ones. If the source keeps changing under the call, it gives up after a few rounds with
    /// [`CacheError::SourceChanged`]. `current` and `load` are user code, run with no lock held.
    pub fn get_or_load_current<E: Into<BoxError>>(
        self: &Arc<Self>,
        key: &str,
        declared: impl Into<Declared>,
        mut current: impl FnMut() -> Result<W::Source, E>,
        mut load: impl FnMut() -> Result<W, E>,
        fresh: bool,
        deadline: Deadline,
    ) -> Result<LoadedModel<W, R>, CacheError> {
        let declared = declared.into();
        let failed =
            |error: E| CacheError::Load { key: key.to_owned(), source: SourceError::new(error.into()) };
        if fresh {
            self.drop_model(key);
        }
        for _ in 0..ROUNDS {
            let now = current().map_err(failed)?;
            let loaded = self.get_or_put_until(key, declared, &mut load, deadline)?;
            let source = loaded.weights().source();
            if self.runtime().mutant(Mutant::SOURCE_IDENTITY_IGNORED) || source == now {
                return Ok(loaded);
            }
            // This call's look may be the stale one: another caller read the source after it
            // changed. Weights of the source as it is now are served, never dropped from the
            // group for an older look.
            let look_again = !self.runtime().mutant(Mutant::STALE_LOOK_DROPS_NEWER);
            match look_again.then(&mut current) {
                Some(Ok(again)) if again == source => return Ok(loaded),
                // The source cannot be looked at now: this call fails, and drops nothing of the
                // group's on the strength of its own older look.
                Some(Err(error)) => return Err(failed(error)),
                _ => {}
            }
            // The key is dropped first (the held record marked stale: its release below evicts
            // it), then released and reported: a panic of user code in either (the release's
            // reconciles, a subscriber) must not leave the old version adoptable in the group.
            if self.runtime().mutant(Mutant::STALE_DROP_REPORTED_FIRST) {
                self.stale_dropped_after_report(key, loaded);
                continue;
            }
            self.drop_model(key);
            drop(loaded);
            tracing::debug!(device = %self.device(), key, "weights of an earlier version of their source: dropped");
        }
        Err(CacheError::SourceChanged { key: key.to_owned(), rounds: ROUNDS })
    }
}

// Historical bugs: the bodies of the switches above (see `crate::mutants`).
impl<W: Sourced + Send + Sync + 'static, R: Runtime> DeviceCache<W, R> {
    /// X-5p (`stale-drop-reported-first`): stale weights are reported, then let go of, before
    /// their key is dropped: a panic of user code there leaves the old version resident and
    /// adoptable in the group.
    fn stale_dropped_after_report(&self, key: &str, loaded: LoadedModel<W, R>) {
        tracing::debug!(device = %self.device(), key, "weights of an earlier version of their source: dropped");
        drop(loaded);
        self.drop_model(key);
    }
}
