//! Taking records out of the table: for room (least recently used first), for `drop_model`
//! (by key), at shutdown (all of them), and at keep-alive expiry. A protected record is marked
//! stale instead; its last release takes it out.

use std::time::Duration;

use super::{Entry, Gone, Table, frees};
use crate::cache::weights::is_model_or_submodel;

impl<E: Entry> Table<E> {
    /// Takes the occupant of `key` out of the map, counting the eviction.
    pub(super) fn take_out(&mut self, key: &str) -> Option<Gone<E>> {
        let slot = self.slots.remove(key)?;
        self.stats.left(slot.record.bytes(), true);
        Some(Gone { record: slot.record, device: slot.device })
    }

    /// Takes the occupant of `key` out if it is free; else marks it stale (its last release
    /// takes it out).
    fn evict_or_mark(&mut self, key: &str, admitting_is_free: bool) -> Option<Gone<E>> {
        let slot = self.slots.get_mut(key)?;
        if slot.evictable(admitting_is_free) {
            self.take_out(key)
        } else {
            slot.stale = true;
            None
        }
    }

    /// `drop_model`'s part here: takes out the free records of `key` and its submodels and
    /// marks the others stale (`locked_is_free`: the C-R4 mutant, which takes them all).
    pub(crate) fn mark_dropped(
        &mut self,
        key: &str,
        (admitting_is_free, locked_is_free): (bool, bool),
    ) -> Vec<Gone<E>> {
        let keys = self.keys_where(|k, _| is_model_or_submodel(k, key));
        let evict = |t: &mut Self, k: &String| {
            if locked_is_free { t.take_out(k) } else { t.evict_or_mark(k, admitting_is_free) }
        };
        keys.iter().filter_map(|k| evict(self, k)).collect()
    }

    /// Shuts the table down: cancels the keep-alive, takes out the free records and marks the
    /// others stale. Returns them, the keys left (stale), and whether a keep-alive was on.
    pub(crate) fn mark_shut_down(&mut self, admitting_is_free: bool) -> (Vec<Gone<E>>, Vec<String>, bool) {
        self.shut_down = true;
        let cancelled = self.keep_alive.take().is_some();
        let keys = self.keys();
        let evicted = keys.iter().filter_map(|k| self.evict_or_mark(k, admitting_is_free)).collect();
        let retained = keys.into_iter().filter(|k| self.slots.contains_key(k)).collect();
        (evicted, retained, cancelled)
    }

    /// Takes free records out, least recently used first, until `fits` says yes of the bytes the
    /// evictions so far will give back once dropped. Records that give bytes back go first:
    /// evicting one whose canonical is shared elsewhere frees nothing, so it goes only when
    /// nothing else can.
    pub(crate) fn evict_lru_while(
        &mut self,
        fits: impl Fn(u64) -> bool,
        admitting_is_free: bool,
    ) -> Vec<Gone<E>> {
        let mut evicted = Vec::new();
        let mut pending = 0;
        while !fits(pending) {
            let victim = self
                .slots
                .iter()
                .filter(|(_, v)| v.evictable(admitting_is_free))
                .min_by_key(|(_, v)| (frees(&v.record) == 0, v.last_used))
                .map(|(k, _)| k.clone());
            let Some(victim) = victim else { break };
            if let Some(gone) = self.take_out(&victim) {
                pending += frees(&gone.record);
                evicted.push(gone);
            }
        }
        evicted
    }
}

impl<E: Entry> Table<E> {
    /// Sets the keep-alive; refused (`false`) after shutdown. Turned off, it forgets when each
    /// record became idle: the claims meanwhile read no clock, so every record counts as idle
    /// from the first expiry pass after a keep-alive is set again.
    pub(crate) fn set_keep_alive(&mut self, keep_alive: Option<Duration>) -> bool {
        if self.shut_down {
            return false;
        }
        if keep_alive.is_none() {
            self.slots.values_mut().for_each(|slot| slot.idle_since = None);
        }
        self.keep_alive = keep_alive;
        true
    }

    /// Takes out the records free for at least the keep-alive at `now` (`ignore_holds`: the
    /// mutant that counts held records free).
    pub(crate) fn expire(&mut self, now: Duration, ignore_holds: bool) -> Vec<Gone<E>> {
        let Some(keep_alive) = self.keep_alive else { return Vec::new() };
        let mut expired = Vec::new();
        for (key, v) in self.slots.iter_mut() {
            if v.free() || (ignore_holds && v.locks == 0 && v.admitting == 0) {
                // An untimed record (released while no keep-alive was in force) starts now.
                let since = *v.idle_since.get_or_insert(now);
                if now.saturating_sub(since) >= keep_alive {
                    expired.push(key.clone());
                }
            }
        }
        expired.sort_unstable();
        expired.iter().filter_map(|k| self.take_out(k)).collect()
    }

    /// The keep-alive in force and the earliest time one free record expires: `None` without a
    /// keep-alive; `Some(None)` when no record is free.
    pub(crate) fn next_expiry(&self) -> Option<Option<Duration>> {
        let keep_alive = self.keep_alive?;
        // An untimed record is timed by the next pass: due at once.
        let idle = self.slots.values().filter(|v| v.free()).map(|v| v.idle_since.unwrap_or_default()).min();
        Some(idle.map(|since| since.saturating_add(keep_alive)))
    }
}
