//! The cache's bookkeeping: the LRU queue of resolved ids, pins, cold loads in flight, sizes.
//! Pure data; the cache keeps it behind one monitor.

use std::collections::{BTreeMap, BTreeSet, VecDeque};

use crate::id::ModelId;
use crate::line::Line;

/// LRU queue (front = least recently used), pins, loads in flight, byte sizes, and the adds
/// waiting for capacity (each with its waker `W`).
#[derive(Debug)]
pub(crate) struct Bookkeeping<W = ()> {
    pub(crate) queue: VecDeque<ModelId>,
    pub(crate) pinned: BTreeSet<ModelId>,
    pub(crate) loading: usize,
    pub(crate) sizes: BTreeMap<ModelId, u64>,
    /// The capacity now ([`FixedSizeCache::set_max_size`](super::FixedSizeCache::set_max_size)
    /// changes it while serving).
    pub(crate) max_size: usize,
    /// Bumped whenever the queue gains or loses an id or a pin is lifted: a cold add whose
    /// victims were all skipped waits for a change, not for the same victims again.
    pub(crate) version: u64,
    /// Adds waiting for capacity, in arrival order: only the first plans evictions and takes
    /// room that appears; the others wait behind it (SPEC 2.14), each for its turn.
    pub(crate) waiters: Line<W>,
}

impl<W> Default for Bookkeeping<W> {
    fn default() -> Self {
        Self {
            queue: VecDeque::new(),
            pinned: BTreeSet::new(),
            loading: 0,
            sizes: BTreeMap::new(),
            max_size: 0,
            version: 0,
            waiters: Line::default(),
        }
    }
}

impl<W> Bookkeeping<W> {
    /// Moves `id` to the MRU end if it is queued; an unqueued id is left alone (no phantoms).
    pub(crate) fn touch(&mut self, id: &ModelId) {
        if let Some(at) = self.queue.iter().position(|q| q == id) {
            let id = self.queue.remove(at).expect("position is in range");
            self.queue.push_back(id);
        }
    }

    /// Queues `id` at the MRU end, once.
    pub(crate) fn push(&mut self, id: &ModelId) {
        self.queue.retain(|q| q != id);
        self.queue.push_back(id.clone());
        self.version += 1;
    }

    /// Drops `id` from the queue and the size table.
    pub(crate) fn forget(&mut self, id: &ModelId) {
        self.queue.retain(|q| q != id);
        self.sizes.remove(id);
        self.version += 1;
    }

    /// Lifts the pin of `id`.
    pub(crate) fn unpin(&mut self, id: &ModelId) {
        self.pinned.remove(id);
        self.version += 1;
    }

    /// Records the size of a queued model.
    pub(crate) fn set_size(&mut self, id: &ModelId, bytes: u64) {
        self.sizes.insert(id.clone(), bytes);
    }

    /// Bytes of the queued models, saturating: a sum past `u64::MAX` is over any byte budget.
    pub(crate) fn bytes(&self) -> u64 {
        self.sizes.values().fold(0, |sum, b| sum.saturating_add(*b))
    }

    /// Up to `n` eviction candidates in LRU order: queued, not pinned, not `except`, and
    /// accepted by `evictable`.
    pub(crate) fn victims(
        &self,
        n: usize,
        except: Option<&ModelId>,
        mut evictable: impl FnMut(&ModelId) -> bool,
    ) -> Vec<ModelId> {
        self.queue
            .iter()
            .filter(|id| Some(*id) != except && !self.pinned.contains(*id) && evictable(id))
            .take(n)
            .cloned()
            .collect()
    }
}

/// Victims that a layer below pins (this layer's hints cannot see those pins), and the queue
/// version they were found at: left out of every eviction plan until this layer's queue or pins
/// change, so that a wake-up never re-tries them in a loop.
#[derive(Debug, Default)]
pub(crate) struct PinnedBelow {
    version: u64,
    ids: Vec<ModelId>,
}

impl PinnedBelow {
    /// Forgets them if the queue or the pins changed since they were found.
    pub(crate) fn refresh(&mut self, version: u64) {
        if self.version != version {
            self.ids.clear();
        }
    }

    /// Whether `id` was found pinned below.
    pub(crate) fn contains(&self, id: &ModelId) -> bool {
        self.ids.contains(id)
    }

    /// Whether none is left out.
    pub(crate) fn is_empty(&self) -> bool {
        self.ids.is_empty()
    }

    /// Remembers `ids`, found pinned below by a plan made at `version`.
    pub(crate) fn remember(&mut self, version: u64, ids: impl IntoIterator<Item = ModelId>) {
        if self.version != version {
            *self = Self { version, ids: Vec::new() };
        }
        self.ids.extend(ids);
    }
}

// Historical bugs: the bodies of the switches above (see `crate::mutants`).
impl<W> Bookkeeping<W> {
    /// Upstream's touch: drop every occurrence and append, queued or not (mutants only).
    pub(crate) fn touch_appending(&mut self, id: &ModelId) {
        self.queue.retain(|q| q != id);
        self.queue.push_back(id.clone());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ids(q: &VecDeque<ModelId>) -> Vec<&str> {
        q.iter().map(ModelId::as_str).collect()
    }

    fn id(s: &str) -> ModelId {
        ModelId::new(s).unwrap()
    }

    #[test]
    fn touch_moves_queued_ids_and_ignores_unknown_ones() {
        let mut b: Bookkeeping = Bookkeeping::default();
        for s in ["a", "b", "c"] {
            b.push(&id(s));
        }
        b.touch(&id("a"));
        assert_eq!(ids(&b.queue), ["b", "c", "a"]);
        b.touch(&id("zzz"));
        assert_eq!(ids(&b.queue), ["b", "c", "a"], "no phantom entry");
        b.push(&id("c"));
        assert_eq!(ids(&b.queue), ["b", "a", "c"], "queued once");
    }

    #[test]
    fn the_byte_sum_saturates_instead_of_wrapping() {
        let mut b: Bookkeeping = Bookkeeping::default();
        b.set_size(&id("a"), u64::MAX / 2 + 1);
        b.set_size(&id("b"), u64::MAX / 2 + 1);
        assert_eq!(b.bytes(), u64::MAX);
    }

    #[test]
    fn victims_skip_pins_and_the_new_id_in_lru_order() {
        let mut b: Bookkeeping = Bookkeeping::default();
        for s in ["p", "a", "n", "b"] {
            b.push(&id(s));
        }
        b.pinned.insert(id("p"));
        assert_eq!(b.victims(2, Some(&id("n")), |_| true), [id("a"), id("b")]);
        assert_eq!(b.victims(5, Some(&id("n")), |v| v.as_str() != "a"), [id("b")]);
        assert_eq!(b.victims(5, None, |_| true), [id("a"), id("n"), id("b")]);
    }
}
