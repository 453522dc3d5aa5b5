//! What the caches of one group know of each other: a cache asks its peers for room through
//! [`Peer`], and its group (its shutdown, `drop_model`, a lowered cap, the keep-alive timer)
//! acts on every cache through [`Member`]. Neither names the cache type, so the group is
//! written without it.

use std::time::Duration;

use super::budget::CacheId;
use crate::runtime::{Arc, Monitor, Runtime, Weak};

/// What a cache asks of a peer. None of these waits for the peer's lock (SPEC 3.2): a busy
/// peer is left a request its lock holder honours at release.
pub(crate) trait Peer: Send + Sync {
    /// Evict down to the budget's cap.
    fn request_reconcile(&self);
    /// Evict until `bytes` more fit the budget; how many records it evicted now (none if the
    /// peer was busy and was left the request).
    fn request_room(&self, bytes: u64) -> usize;
    /// The records no eviction may take now, with why (a busy peer is named as such).
    fn pinned_if_free(&self) -> Vec<String>;
}

/// Evictions a cache took out of its table, still to be finished (dropped, reported) outside
/// every lock; finishing returns how many.
pub(crate) type Marked<'a> = Box<dyn FnOnce() -> usize + 'a>;

/// What a group does with each of its caches.
pub(crate) trait Member: Peer {
    /// The cache's identity in the budget.
    fn id(&self) -> CacheId;
    /// The device it serves.
    fn device(&self) -> &str;
    /// Evicts this cache's free records until `room` more bytes fit; returns how many.
    fn make_room_here(&self, room: u64) -> usize;
    /// `drop_model`'s part here, marked: free records of `key` and its submodels taken out,
    /// others marked stale.
    fn mark_dropped(&self, key: &str) -> Marked<'_>;
    /// The cache's shutdown, marked: free records taken out, others marked stale.
    fn mark_shut_down(&self) -> Marked<'_>;
    /// The keep-alive timer's look: `None` without a keep-alive; else expires the idle records
    /// and says when the next one expires (`Some(None)`: none is idle).
    fn expire_for_timer(&self) -> Option<Option<Duration>>;
}

/// The caches of one group, held weakly: a cache is dropped with its last user; its entry is
/// skipped from then on and forgotten at the next join.
pub(crate) struct Members<R: Runtime> {
    list: R::Monitor<Vec<Weak<dyn Member>>>,
}

impl<R: Runtime> Members<R> {
    pub(crate) fn new(runtime: &R) -> Arc<Self> {
        Arc::new(Self { list: runtime.monitor(Vec::new()) })
    }

    /// Adds `member` (forgetting the members dropped meanwhile).
    pub(crate) fn join(&self, member: Weak<dyn Member>) {
        self.list.with(|c| {
            c.retain(|w| w.strong_count() > 0);
            c.push(member);
        });
    }

    /// The live members.
    pub(crate) fn all(&self) -> Vec<Arc<dyn Member>> {
        self.list.with(|c| c.iter().filter_map(Weak::upgrade).collect())
    }

    /// The live members other than `except`.
    pub(crate) fn peers(&self, except: CacheId) -> Vec<Arc<dyn Member>> {
        self.all().into_iter().filter(|c| c.id() != except).collect()
    }
}
