//! Eviction: taking records out of the cache — least recently used first for room, by key for
//! `drop_model`, all of them at shutdown — and finishing evictions outside the lock (their
//! callbacks and destructors are user code).

use super::*;

impl<W: Send + Sync + 'static, R: Runtime> DeviceCache<W, R> {
    /// Evicts unprotected records of this cache, least recently used first, until `bytes`
    /// more fit the global budget (re-reading the global total after each eviction); then asks
    /// each peer to do the same without waiting for it. Returns how many records this cache
    /// evicted.
    pub fn make_room(&self, bytes: u64) -> usize {
        self.expire_idle();
        let evicted = self.make_room_here(bytes);
        if !self.group.budget.fits(bytes) {
            for peer in self.group.peers(self) {
                peer.request_room(bytes);
            }
        }
        evicted
    }

    /// [`CacheGroup::drop_model`]: drops `key` and its submodels `key:*` from the store and from
    /// every cache of this cache's group. Returns how many records were evicted now.
    pub fn drop_model(&self, key: &str) -> usize {
        if self.mutant(Mutant::DROP_ONE_CACHE) {
            let evicted = self.drop_here(key);
            self.group.invalidate(key);
            return evicted;
        }
        self.group.drop_model(key)
    }

    /// This cache's part of `drop_model`: evicts the idle records of `key` and `key:*` now and
    /// marks the locked, held or admitting ones stale (their last release evicts them).
    pub(crate) fn drop_here(&self, key: &str) -> usize {
        let dropped = self.mark_dropped(key);
        dropped.finish()
    }

    /// The state half of [`DeviceCache::drop_here`]: marks and takes out the records, running no
    /// user code; the returned evictions are finished (dropped, reported) by the caller.
    pub(crate) fn mark_dropped(&self, key: &str) -> Dropped<'_, W, R> {
        let admitting = self.mutant(Mutant::ADMISSION_UNPROTECTED);
        let locked_is_free = self.mutant(Mutant::DROP_EVICTS_LOCKED);
        let evicted = self.state.with(|s| {
            let keys: Vec<String> =
                s.slots.keys().filter(|k| is_model_or_submodel(k, key)).cloned().collect();
            keys.iter()
                .filter_map(|k| {
                    if locked_is_free {
                        return Self::remove(s, k);
                    }
                    Self::evict_or_mark(s, k, admitting)
                })
                .collect::<Vec<_>>()
        });
        Dropped { cache: self, evicted }
    }

    /// Idempotent: evicts idle records now; marks locked, held or admitting ones stale, so that
    /// their last release evicts them. After shutdown an admission is stale at birth and a
    /// prefetch is refused.
    pub fn shutdown(&self) -> usize {
        self.mark_shut_down().finish()
    }

    /// The state half of [`DeviceCache::shutdown`]: marks the cache shut down and takes out its
    /// idle records, running no user code; the caller finishes the returned evictions.
    pub(crate) fn mark_shut_down(&self) -> Dropped<'_, W, R> {
        let admitting = self.mutant(Mutant::ADMISSION_UNPROTECTED);
        let (evicted, retained, cancelled) = self.with_state(|s| {
            s.shut_down = true;
            let cancelled = s.keep_alive.take().is_some();
            let keys: Vec<String> = s.slots.keys().cloned().collect();
            let evicted =
                keys.iter().filter_map(|k| Self::evict_or_mark(s, k, admitting)).collect::<Vec<_>>();
            (evicted, keys.into_iter().filter(|k| s.slots.contains_key(k)).collect::<Vec<_>>(), cancelled)
        });
        // The timer may sleep to one of this cache's deadlines, or be kept by it alone.
        if cancelled {
            self.group.timer.poke(None, Mutant::TIMER_NOT_CANCELLED);
        }
        tracing::debug!(device = %self.device, evicted = evicted.len(), stale = retained.len(), "shutdown");
        if self.mutant(Mutant::SHUTDOWN_RELEASES_WEIGHTS) {
            retained.iter().for_each(|key| self.group.store.invalidate(key));
        }
        Dropped { cache: self, evicted }
    }

    pub(super) fn remove(s: &mut State<W, R>, key: &str) -> Option<Gone<W, R>> {
        let slot = s.slots.remove(key)?;
        s.stats.left(slot.record.bytes);
        s.stats.evictions += 1;
        s.stats.bytes_evicted = s.stats.bytes_evicted.saturating_add(slot.record.bytes);
        Some(Gone { record: slot.record, device: slot.device })
    }

    pub(super) fn evict_or_mark(
        s: &mut State<W, R>,
        key: &str,
        admitting_is_free: bool,
    ) -> Option<Gone<W, R>> {
        let slot = s.slots.get_mut(key)?;
        if evictable(slot, admitting_is_free) {
            Self::remove(s, key)
        } else {
            slot.stale = true;
            None
        }
    }

    /// Evicts this cache's free records until `room` more bytes fit the global budget.
    pub(crate) fn make_room_here(&self, room: u64) -> usize {
        let admitting = self.mutant(Mutant::ADMISSION_UNPROTECTED);
        let evicted = self.with_state(|s| Self::evict_lru_while(s, room, &self.group, admitting));
        self.finish_evictions(evicted, "room")
    }

    /// Evicts free records, least recently used first, until `room` more bytes fit the global
    /// budget, counting what the evictions so far will give back once they are dropped.
    pub(super) fn evict_lru_while(
        s: &mut State<W, R>,
        room: u64,
        group: &CacheGroup<W, R>,
        admitting_is_free: bool,
    ) -> Evicted<W, R> {
        let mut evicted: Evicted<W, R> = Vec::new();
        let mut pending = 0;
        while !group.budget.fits_after(pending, room) {
            // Records that give bytes back first (least recently used among them): evicting one
            // whose canonical a peer shares frees nothing, so it goes only when nothing else can.
            let victim = s
                .slots
                .iter()
                .filter(|(_, v)| evictable(v, admitting_is_free))
                .min_by_key(|(_, v)| (frees(&v.record) == 0, v.last_used))
                .map(|(k, _)| k.clone());
            let Some(victim) = victim else { break };
            if let Some(gone) = Self::remove(s, &victim) {
                pending += frees(&gone.record);
                evicted.push(gone);
            }
        }
        evicted
    }

    /// Reports the evictions (outside every lock), counted as `by` in the metrics (`room`:
    /// made room for a load; `idle`: keep-alive expiry; `dropped`: `drop_model`, a shutdown, a
    /// stale record's last unlock); returns how many.
    ///
    /// Each drop and each callback is user code and may panic: every record is still dropped
    /// and reported, and the first panic then goes on unwinding, unless this thread is already
    /// unwinding (a guard dropped by another panic, C-P5): then the panic is dropped, since
    /// one leaving a `Drop` during an unwind aborts the process.
    pub(super) fn finish_evictions(&self, evicted: Evicted<W, R>, by: &'static str) -> usize {
        let callback = if evicted.is_empty() { None } else { self.on_evict.with(|c| c.clone()) };
        let count = evicted.len();
        if self.mutant(Mutant::EVICTION_FORGETS_CANONICAL) {
            evicted.iter().for_each(|gone| self.group.store.invalidate(&gone.record.key));
        }
        let mut first_panic = None;
        for gone in evicted {
            let (key, bytes) = (gone.record.key.clone(), gone.record.bytes);
            let dropped = catch_unwind(AssertUnwindSafe(move || drop(gone)));
            // The report and the callback are user code, each caught on its own: a panicking
            // subscriber or recorder does not keep the callback from firing.
            let reported = catch_unwind(AssertUnwindSafe(|| {
                tracing::debug!(device = %self.device, key = %key, bytes, "evicted");
                telemetry::evicted(by, bytes);
            }));
            let called = match &callback {
                Some(callback) => catch_unwind(AssertUnwindSafe(|| callback(&key, bytes))),
                None => Ok(()),
            };
            for payload in [dropped.err(), reported.err(), called.err()].into_iter().flatten() {
                first_panic.get_or_insert(payload);
            }
        }
        if let Some(payload) = first_panic {
            if crate::runtime::panicking() && !self.mutant(Mutant::PANIC_ESCAPES_UNWINDING_DROP) {
                drop(payload);
            } else {
                self.group.runtime.resume_unwind(payload);
            }
        }
        count
    }
}
