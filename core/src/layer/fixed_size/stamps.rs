//! The LRU order without a lock per lease: every queued id has a stamp, an atomic word that a
//! lease's touch raises to a fresh value drawn from one clock, and the order is derived from
//! the stamps where eviction (or [`FixedSizeCache::queue`](super::FixedSizeCache::queue)) needs
//! it. Each cache keeps its own stamps: nested caches each keep their own order.
//!
//! The bookkeeping (membership, pins, sizes, the line) stays behind its monitor; [`Lru`] pairs
//! it with the stamps and keeps the two in step before the monitor is released: an id queued or
//! moved to the back gets a fresh stamp (an id dropped keeps its stamp a while, see
//! [`Lru::follow`]). A touch reads one shard of the stamps (a reader-writer lock, never written
//! by a lease) and takes no monitor.
//!
//! # The order's semantics
//! A touch draws its stamp from the clock (a `fetch_add`, so stamps follow every
//! happens-before edge between touches) and raises the id's stamp to it (a `fetch_max`, so a
//! touch that drew earlier but stores later never hides a later touch of the same id). An
//! order read under the bookkeeping monitor sees every touch that happened before it; a touch
//! still in flight may or may not count, and two reads around the same touch in flight may
//! place it differently (its place is when it drew, what a read sees is when it stored: an
//! order read while leases run is not a snapshot of one instant). A touch of an unqueued id
//! changes no order (no phantoms, I4): only queued ids are ordered.

use std::collections::VecDeque;

use super::queue::Bookkeeping;
use crate::id::ModelId;
use crate::mutants::Mutant;
use crate::runtime::Ordering::Relaxed;
use crate::runtime::{AtomicWord, Monitor, Runtime, RwLock};
use crate::shards::{ById, Padded, Shards};

// ---- The stamps ---------------------------------------------------------------------------------

/// How many stamps of ids no longer queued are kept beyond the queue's own length.
const PRUNE_SLACK: usize = 16;

/// The stamps of the queued ids and the clock they are drawn from.
struct Stamps<R: Runtime> {
    /// The last stamp drawn, on a cache line of its own (every touch writes it).
    clock: Padded<R::Atomic>,
    cells: Shards<ById<R::Atomic>, R>,
}

impl<R: Runtime> Stamps<R> {
    /// A fresh stamp, later than every stamp drawn before.
    fn draw(&self) -> u64 {
        self.clock.0.fetch_add(1, Relaxed) + 1
    }

    /// Raises the stamp of `id` to a fresh one, if `id` has one (`overwrite`: the mutant that
    /// stores the stamp over a later one instead).
    fn touch(&self, id: &str, overwrite: bool) {
        let (shard, at) = self.cells.of(id);
        shard.read(|cells| {
            if let Some(cell) = cells.get_at(at, id) {
                let stamp = self.draw();
                if overwrite {
                    cell.store(stamp, Relaxed);
                } else {
                    cell.fetch_max(stamp, Relaxed);
                }
            }
        });
    }

    /// Gives `id` a fresh stamp (it was queued or moved to the back): raises the one it has, or
    /// adds one (then `true`).
    fn restamp(&self, runtime: &R, id: &ModelId) -> bool {
        let (shard, at) = self.cells.of(id);
        let raised =
            shard.read(|cells| cells.get_at(at, id).map(|cell| cell.fetch_max(self.draw(), Relaxed)));
        raised.is_none()
            && shard.write(|cells| cells.insert(at, id.clone(), runtime.atomic(self.draw())).is_none())
    }

    /// Drops the stamps of the ids not in `queue`; how many are left.
    fn keep_only(&self, queue: &VecDeque<ModelId>) -> usize {
        self.cells
            .iter()
            .map(|shard| {
                shard.write(|cells| {
                    cells.retain(|id| queue.contains(id));
                    cells.len()
                })
            })
            .sum()
    }

    /// The stamp of `id`; an id without one counts as the most recent.
    fn stamp(&self, id: &ModelId) -> u64 {
        let (shard, at) = self.cells.of(id);
        shard.read(|cells| cells.get_at(at, id).map_or(u64::MAX, |c| c.load(Relaxed)))
    }
}

// ---- The bookkeeping with its stamps ------------------------------------------------------------

/// The bookkeeping behind its monitor, with the stamps that order its queue.
pub(super) struct Lru<W: Send + 'static, R: Runtime> {
    book: R::Monitor<Bookkeeping<W>>,
    stamps: Stamps<R>,
    runtime: R,
}

impl<W: Send + 'static, R: Runtime> Lru<W, R> {
    /// Stamps the ids `book` holds queued, in queue order.
    pub(super) fn new(runtime: &R, book: Bookkeeping<W>) -> Self {
        let stamps = Stamps { clock: Padded(runtime.atomic(0)), cells: Shards::new(runtime, ById::default) };
        let lru = Self { book: runtime.monitor(book), stamps, runtime: runtime.clone() };
        lru.with(|_| ());
        lru
    }

    /// Runs `f` on the bookkeeping under its monitor; the queue's order may lag the touches
    /// (use [`Lru::ordered`] to read it).
    pub(super) fn with<U>(&self, f: impl FnOnce(&mut Bookkeeping<W>) -> U) -> U {
        self.book.with(|b| {
            let out = f(b);
            self.follow(b);
            out
        })
    }

    /// Runs `f` on the bookkeeping under its monitor, its queue first put in LRU order.
    pub(super) fn ordered<U>(&self, f: impl FnOnce(&mut Bookkeeping<W>) -> U) -> U {
        self.book.with(|b| {
            self.order(&mut b.queue);
            let out = f(b);
            self.follow(b);
            out
        })
    }

    /// Runs `f` on the bookkeeping under its monitor, with what puts its queue in LRU order
    /// (for `f` to call only if it needs the order).
    pub(super) fn planned<U>(
        &self,
        f: impl FnOnce(&mut Bookkeeping<W>, &dyn Fn(&mut VecDeque<ModelId>)) -> U,
    ) -> U {
        self.book.with(|b| {
            let out = f(b, &|queue| self.order(queue));
            self.follow(b);
            out
        })
    }

    /// A lease's touch: moves `id` to the MRU end if it is queued, without the monitor.
    pub(super) fn touch(&self, id: &str) {
        let overwrite = self.runtime.mutant(Mutant::TOUCH_OVERWRITES_LATER_STAMP);
        self.stamps.touch(id, overwrite);
    }

    /// Brings the stamps in step with the queue's changes since they last were. An id that
    /// left the queue keeps its stamp (a touch of it changes no order: only queued ids are
    /// ordered, and queued again it gets a fresh one), until the stamps of ids no longer queued
    /// outnumber the queue: then they go, all at once (so churn over a working set of ids
    /// writes no shard per add, and a stream of new ids keeps the stamps bounded).
    fn follow(&self, b: &mut Bookkeeping<W>) {
        // Most monitor sections queue or move nothing: no drain to set up then. Drained, not
        // taken: the journal keeps its capacity for the next call.
        if !b.restamped.is_empty() {
            for id in b.restamped.drain(..) {
                if b.queue.contains(&id) && self.stamps.restamp(&self.runtime, &id) {
                    b.stamped += 1;
                }
            }
        }
        if b.stamped > 2 * b.queue.len() + PRUNE_SLACK {
            b.stamped = self.stamps.keep_only(&b.queue);
        }
    }

    /// Sorts `queue` by stamp, stably (an id queued twice, a mutant's doing, keeps both places
    /// next to each other).
    fn order(&self, queue: &mut VecDeque<ModelId>) {
        // Without a lease since the last order (or only leases of the most recent ids), the
        // queue is in order already: one pass of reads, no allocation.
        let mut previous = 0;
        let in_order = queue.iter().all(|id| {
            let stamp = self.stamps.stamp(id);
            let after = previous <= stamp;
            previous = stamp;
            after
        });
        if in_order {
            return;
        }
        let mut keyed: Vec<(u64, ModelId)> = queue.drain(..).map(|id| (self.stamps.stamp(&id), id)).collect();
        keyed.sort_by_key(|(stamp, _)| *stamp);
        queue.extend(keyed.into_iter().map(|(_, id)| id));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::runtime::StdRuntime;

    fn id(s: &str) -> ModelId {
        ModelId::new(s).unwrap()
    }

    fn order(lru: &Lru<(), StdRuntime>) -> Vec<String> {
        lru.ordered(|b| b.queue.iter().map(|q| q.as_str().to_owned()).collect())
    }

    #[test]
    fn touches_reorder_only_queued_ids_and_a_requeued_id_starts_fresh() {
        let lru = Lru::new(&StdRuntime::default(), Bookkeeping::default());
        lru.with(|b| ["a", "b", "c"].map(|s| b.push(&id(s))));
        lru.touch("a");
        lru.touch("zzz");
        assert_eq!(order(&lru), ["b", "c", "a"], "a touch moves a queued id; an unknown one is no phantom");
        lru.with(|b| b.forget(&id("b")));
        lru.touch("b");
        assert_eq!(order(&lru), ["c", "a"], "a touch of a forgotten id queues nothing");
        lru.touch("c");
        lru.with(|b| b.push(&id("b")));
        assert_eq!(order(&lru), ["a", "c", "b"], "queued again, b is the most recent");
        lru.with(|b| b.push(&id("a")));
        lru.touch("c");
        assert_eq!(order(&lru), ["b", "a", "c"], "a push moves a queued id like a touch");
    }

    #[test]
    fn the_stamps_of_ids_gone_stay_bounded() {
        let lru = Lru::new(&StdRuntime::default(), Bookkeeping::default());
        for n in 0..200 {
            let (new, gone) = (id(&format!("m{n}")), id(&format!("m{}", n.max(1) - 1)));
            lru.with(|b| {
                b.push(&new);
                if n > 0 {
                    b.forget(&gone);
                }
            });
        }
        let held = lru.with(|b| b.stamped);
        assert!(held <= 2 + PRUNE_SLACK, "{held} stamps kept for a queue of one");
        assert_eq!(order(&lru), ["m199"]);
    }
}
