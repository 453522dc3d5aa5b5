//! The cache's bookkeeping: the LRU queue of resolved ids, pins, cold loads in flight, sizes.
//! Pure data; the cache keeps it behind one monitor, beside the stamps that order the queue
//! between a lease's touches (`stamps.rs`): the bookkeeping notes which ids moved to the back,
//! for the stamps to follow.

use std::collections::{BTreeSet, VecDeque};

use crate::hashed::Hashed;
use crate::id::ModelId;
use crate::line::Line;

/// LRU queue (front = least recently used), pins, loads in flight, byte sizes, and the adds
/// waiting for capacity (each with its waker `W`).
#[derive(Debug)]
pub(crate) struct Bookkeeping<W = ()> {
    pub(crate) queue: VecDeque<ModelId>,
    pub(crate) pinned: BTreeSet<ModelId>,
    pub(crate) loading: usize,
    /// Hashed: only looked up by id (under the hash it keeps) and summed, never listed in
    /// order.
    pub(crate) sizes: Hashed<ModelId, u64>,
    /// The capacity now ([`FixedSizeCache::set_max_size`](super::FixedSizeCache::set_max_size)
    /// changes it while serving).
    pub(crate) max_size: usize,
    /// Bumped whenever the queue gains or loses an id or a pin is lifted: a cold add whose
    /// victims were all skipped waits for a change, not for the same victims again.
    pub(crate) version: u64,
    /// Adds waiting for capacity, in arrival order: only the first plans evictions and takes
    /// room that appears; the others wait behind it (SPEC 2.14), each for its turn.
    pub(crate) waiters: Line<W>,
    /// Ids moved to the MRU end since the stamps last followed: each gets a fresh stamp.
    pub(crate) restamped: Vec<ModelId>,
    /// How many ids the stamps hold a stamp for (queued or not: the stamps keep those of ids
    /// dropped a while).
    pub(crate) stamped: usize,
}

impl<W> Default for Bookkeeping<W> {
    fn default() -> Self {
        Self {
            queue: VecDeque::new(),
            pinned: BTreeSet::new(),
            loading: 0,
            sizes: Hashed::default(),
            max_size: 0,
            version: 0,
            waiters: Line::default(),
            restamped: Vec::new(),
            stamped: 0,
        }
    }
}

// ---- The bookkeeping ----------------------------------------------------------------------------

impl<W> Bookkeeping<W> {
    /// Moves `id` to the MRU end if it is queued; an unqueued id is left alone (no phantoms).
    pub(crate) fn touch(&mut self, id: &ModelId) {
        if let Some(at) = self.queue.iter().position(|q| q == id) {
            let id = self.queue.remove(at).expect("position is in range");
            self.restamped.push(id.clone());
            self.queue.push_back(id);
        }
    }

    /// Queues `id` at the MRU end, once.
    pub(crate) fn push(&mut self, id: &ModelId) {
        self.queue.retain(|q| q != id);
        self.queue.push_back(id.clone());
        self.restamped.push(id.clone());
        self.version += 1;
    }

    /// Drops `id` from the queue and the size table; whether it was queued.
    pub(crate) fn forget(&mut self, id: &ModelId) -> bool {
        let queued = self.queue.len();
        self.queue.retain(|q| q != id);
        self.sizes.remove_by(id);
        self.version += 1;
        self.queue.len() < queued
    }

    /// Lifts the pin of `id`.
    pub(crate) fn unpin(&mut self, id: &ModelId) {
        self.pinned.remove(id);
        self.version += 1;
    }

    /// Records the size of a queued model.
    pub(crate) fn set_size(&mut self, id: &ModelId, bytes: u64) {
        *self.sizes.get_or_insert_with(id, || bytes).0 = bytes;
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

// ---- Victims pinned below -----------------------------------------------------------------------

/// The stack's counts of pins lifted and of ids removed below a layer
/// ([`Manager::unpins`](crate::Manager::unpins), [`Manager::removals`](crate::Manager::removals);
/// `None`: not counted), read when a victim is found pinned below, under the victim's lifecycle
/// lock: an unpin or a removal of it comes after, and moves one of them.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub(crate) struct BelowCounts {
    pub(crate) unpins: Option<u64>,
    pub(crate) removals: Option<u64>,
}

/// Victims that a layer below pins (this layer's hints cannot see those pins), with the
/// bookkeeping version of the plan that found them and the counts below when they were found:
/// left out of every eviction plan until this layer's queue or pins change, or a pin is lifted
/// or an id removed below, so that a wake-up never re-tries them in a loop.
#[derive(Debug, Default)]
pub(crate) struct PinnedBelow {
    version: u64,
    counts: BelowCounts,
    ids: Vec<ModelId>,
}

impl PinnedBelow {
    /// Forgets them if the queue or the pins changed since they were found (`version`), or the
    /// counts below moved (`counts`, read only while some are left out).
    pub(crate) fn refresh(&mut self, version: u64, counts: impl FnOnce() -> BelowCounts) {
        if !self.ids.is_empty() && (self.version != version || self.counts != counts()) {
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

    /// Remembers `ids`, found pinned below by a plan made at `version`, the counts below then
    /// being `counts` (no id found pinned: nothing changes).
    pub(crate) fn remember(
        &mut self,
        version: u64,
        counts: BelowCounts,
        ids: impl IntoIterator<Item = ModelId>,
    ) {
        let ids: Vec<ModelId> = ids.into_iter().collect();
        if ids.is_empty() {
            return;
        }
        if self.version != version || self.counts != counts {
            *self = Self { version, counts, ids: Vec::new() };
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
        self.restamped.push(id.clone());
    }

    /// Appends `id` even if it is queued already (mutants only).
    pub(crate) fn enqueue_again(&mut self, id: &ModelId) {
        self.queue.push_back(id.clone());
        self.restamped.push(id.clone());
    }

    /// Drops every queue entry of `id`, its size kept (mutants only).
    pub(crate) fn dequeue_all(&mut self, id: &ModelId) {
        self.queue.retain(|q| q != id);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

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

    /// One step of the bookkeeping, as the cache takes them.
    #[derive(Debug, Clone)]
    enum Step {
        Push(usize),
        Touch(usize),
        Forget(usize),
        Pin(usize),
        Unpin(usize),
        Size(usize, u64),
    }

    fn step() -> impl proptest::strategy::Strategy<Value = Step> {
        use proptest::prelude::*;
        let i = 0..5usize;
        prop_oneof![
            i.clone().prop_map(Step::Push),
            i.clone().prop_map(Step::Touch),
            i.clone().prop_map(Step::Forget),
            i.clone().prop_map(Step::Pin),
            i.clone().prop_map(Step::Unpin),
            (i, 0..u64::MAX / 4).prop_map(|(i, b)| Step::Size(i, b)),
        ]
    }

    const NAMES: [&str; 5] = ["a", "b", "c", "d", "e"];

    proptest::proptest! {
        /// Without a runtime, against a list model: the queue holds each id once, in the
        /// order of its last push or touch (a touch of an unqueued id changes nothing: no
        /// phantoms, I4); every change an add waiting for room could use (an id queued or
        /// dropped, a pin lifted) bumps the version; a forgotten id's size goes with it; and
        /// the victims are the first `n` queued ids that are neither pinned, excluded nor
        /// refused, in LRU order (I6, I10: a pinned or busy victim is skipped, never evicted).
        #[test]
        fn the_bookkeeping_follows_its_model(steps in proptest::collection::vec(step(), 0..40), n in 0..6usize, except in 0..6usize, busy in 0..32u8) {
            let mut b: Bookkeeping = Bookkeeping::default();
            let (mut queue, mut pinned, mut sized) = (Vec::<usize>::new(), BTreeSet::new(), BTreeMap::new());
            for step in steps {
                let before = b.version;
                let bumps = match step {
                    Step::Push(i) => {
                        b.push(&id(NAMES[i]));
                        queue.retain(|q| *q != i);
                        queue.push(i);
                        true
                    }
                    Step::Touch(i) => {
                        b.touch(&id(NAMES[i]));
                        if let Some(at) = queue.iter().position(|q| *q == i) {
                            queue.remove(at);
                            queue.push(i);
                        }
                        false
                    }
                    Step::Forget(i) => {
                        b.forget(&id(NAMES[i]));
                        queue.retain(|q| *q != i);
                        sized.remove(&i);
                        true
                    }
                    Step::Pin(i) => {
                        b.pinned.insert(id(NAMES[i]));
                        pinned.insert(i);
                        false
                    }
                    Step::Unpin(i) => {
                        b.unpin(&id(NAMES[i]));
                        pinned.remove(&i);
                        true
                    }
                    Step::Size(i, bytes) => {
                        b.set_size(&id(NAMES[i]), bytes);
                        sized.insert(i, bytes);
                        false
                    }
                };
                proptest::prop_assert_eq!(b.version > before, bumps, "{:?}", step);
                proptest::prop_assert_eq!(ids(&b.queue), queue.iter().map(|&i| NAMES[i]).collect::<Vec<_>>());
            }
            let total = sized.values().fold(0u64, |sum, b| sum.saturating_add(*b));
            proptest::prop_assert_eq!(b.bytes(), total);
            let except = NAMES.get(except).map(|s| id(s));
            let refused = |i: usize| busy & (1 << i) != 0;
            let victims = b.victims(n, except.as_ref(), |v| {
                !refused(NAMES.iter().position(|s| *s == v.as_str()).expect("a known id"))
            });
            let expected: Vec<&str> = queue
                .iter()
                .filter(|&&i| Some(NAMES[i]) != except.as_ref().map(ModelId::as_str) && !pinned.contains(&i) && !refused(i))
                .take(n)
                .map(|&i| NAMES[i])
                .collect();
            proptest::prop_assert_eq!(victims.iter().map(ModelId::as_str).collect::<Vec<_>>(), expected);
        }
    }
}
