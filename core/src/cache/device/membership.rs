//! A cache as a member of its group: created by [`CacheGroup::cache`], asked for room by its
//! peers ([`Peer`]), and acted on by its group ([`Member`]).

use super::*;
use crate::cache::member::{Marked, Member, Peer};
use crate::runtime::Weak;

impl<W: Send + Sync + 'static, R: Runtime> CacheGroup<W, R> {
    /// A new device cache (one per device), a peer of every other cache of the group. After
    /// [`CacheGroup::shutdown`] the new cache starts shut down.
    pub fn cache(self: &Arc<Self>, device: &str) -> Arc<DeviceCache<W, R>> {
        let cache = DeviceCache::new(Arc::clone(self), device);
        let member: Weak<DeviceCache<W, R>> = Arc::downgrade(&cache);
        if self.join(member) {
            cache.shutdown();
        }
        cache
    }
}

impl<W: Send + Sync + 'static, R: Runtime> Peer for DeviceCache<W, R> {
    fn request_reconcile(&self) {
        DeviceCache::request_reconcile(self);
    }

    fn request_room(&self, bytes: u64) -> usize {
        DeviceCache::request_room(self, bytes)
    }

    fn pinned_if_free(&self) -> Vec<String> {
        DeviceCache::pinned_if_free(self)
    }
}

impl<W: Send + Sync + 'static, R: Runtime> Member for DeviceCache<W, R> {
    fn id(&self) -> CacheId {
        self.id
    }

    fn device(&self) -> &str {
        &self.device
    }

    fn make_room_here(&self, room: u64) -> usize {
        DeviceCache::make_room_here(self, room)
    }

    fn mark_dropped(&self, key: &str) -> Marked<'_> {
        let dropped = DeviceCache::mark_dropped(self, key);
        Box::new(move || dropped.finish())
    }

    fn mark_shut_down(&self) -> Marked<'_> {
        let marked = DeviceCache::mark_shut_down(self);
        Box::new(move || marked.finish())
    }

    fn expire_for_timer(&self) -> Option<Option<Duration>> {
        self.keep_alive()?;
        self.expire_idle();
        self.next_expiry()
    }
}
