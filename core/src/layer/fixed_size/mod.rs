//! [`FixedSizeCache`]: an LRU decorator that keeps at most `max_size` models (registered plus
//! loading) in the manager it wraps, and optionally at most `max_bytes`.
//!
//! # Guarantees
//! - After every completed add or remove, success or failure, the queue holds exactly the
//!   registered ids, each once (I4). Ids are queued only after their load succeeded and dropped
//!   only after their removal succeeded, so a failure leaves the queue exactly as it was (I5),
//!   and a failed eviction keeps the failed victim and every skipped pin in place, while
//!   completed evictions stay done (I6, I10).
//! - The warm/cold decision and every queue update of an add happen under the resolved id's
//!   lifecycle lock, reached through the inner stack (I7, I9, I13).
//! - Eviction takes least-recently-used ids that are neither pinned nor in use, only as many as
//!   needed; capacity counts cold loads in flight, so `max_size` holds under simultaneous cold
//!   loads of different ids.
//! - Eviction is atomic with respect to pins and leases: it holds the victim's lifecycle lock
//!   from its last pin check to the unload (and `pin` takes that lock), and the base closes the
//!   victim without waiting, only if no lease is live (SPEC 2.10).
//! - No starvation under overload (SPEC 2.14). Adds that wait for capacity stand in line and
//!   are served in arrival order: while one waits, a later add does not take the room that
//!   appears. The first in line designates the least recently used victim that only leases
//!   keep ([`Manager::designate`]): its last lease closes it for eviction in the same step as
//!   its count reaches zero, so a stream of overlapping leases cannot take it back between the
//!   lease's end and the waiter's next plan (the race that starved waiters until their
//!   deadline). Leases that started before that close finish normally and nothing waits for
//!   them; one that starts after it waits for the eviction's outcome, as after any eviction's
//!   close (SPEC 2.10). The designation is given up (the victim reopens) when the waiter is
//!   served otherwise, runs out of time, finds the victim pinned or locked, or finds it
//!   evictable already while it still needs another. Only the first in line waits for the
//!   stack to change; each add behind it waits on a signal of its own for its turn (the first
//!   leaving the line wakes only the next), so a lease's end wakes one waiter, and a line of n
//!   costs n wake-ups, not n². A warm add changes nothing a waiter could use: its lock's
//!   release wakes no one, unless a waiter found the model locked and skipped it for that.
//! - A lease touches its id without the bookkeeping monitor: each queued id has a stamp, which
//!   the touch raises to a fresh value drawn from the cache's clock, and the LRU order is
//!   derived from the stamps where an eviction plan or [`FixedSizeCache::queue`] reads it. A
//!   touch that returned before the read counts; one still in flight may or may not, and two
//!   reads around the same touch in flight may place it differently (its place among other
//!   touches is when it drew its stamp, what a read sees is when it stored it); a touch of an
//!   unqueued id changes nothing.
//! - A layer learns of removals below it: after every inner call that can evict (a cold add
//!   through an inner cache), queued ids that are no longer registered are dropped, so I4 holds
//!   at every depth of nesting (SPEC 2.11).
//! - User code (the loader, `unload`, `size_bytes`, a model's `Drop`) may panic anywhere: while
//!   the id's lifecycle lock is held, a settle guard brings its queue entry in line with the
//!   registry on every exit, so a model is either registered and queued, or neither (2.13).
//!
//! # Lock order (I12)
//! `lifecycle lock (the id being added)` → `bookkeeping monitor` → `stamp shard lock`, and
//! `bookkeeping monitor` → `base monitors`. A lease's touch takes only a stamp shard's read lock,
//! after the inner lease returned. A thread
//! holding a lifecycle lock takes a victim's lifecycle lock only with `try_lock` (a busy victim
//! is skipped), and the bookkeeping monitor is never held while waiting for any lifecycle lock,
//! loading or unloading.

mod admission;
mod bugs;
mod config;
mod eviction;
mod plans;
mod queue;
mod resize;
mod settle;
mod stamps;
mod steps;

use std::fmt;

pub use config::{CapacityPolicy, FixedSizeConfig};

use queue::Bookkeeping;
use settle::{Settle, Settling};
use stamps::Lru;

use crate::deadline::CallOptions;
use crate::error::InvalidConfig;
use crate::id::ModelId;
use crate::manager::{Manager, ManagerExt, Model};
use crate::mutants::Mutant;
use crate::runtime::{Arc, Runtime, Signal};

/// What wakes an add waiting for capacity behind another: its own signal, bumped when it
/// becomes first.
type Wake<M> = Arc<Signal<<M as Manager>::Runtime>>;

type Book<M> = Lru<Wake<M>, <M as Manager>::Runtime>;

// ---- The face -----------------------------------------------------------------------------------

/// An LRU cache over any [`Manager`]: evicts least-recently-used models to stay within
/// `max_size` models (and `max_bytes`, if set).
///
/// ```
/// use resident::{BoxError, FixedSizeCache, FixedSizeConfig, Loader, Manager, ManagerExt, Model, ModelId, ModelManager};
/// # struct M; impl Model for M { fn size_bytes(&self) -> u64 { 1 } }
/// # struct L; impl Loader for L { type Model = M; fn load(&self, _: &ModelId) -> Result<M, BoxError> { Ok(M) } }
/// let cache = FixedSizeCache::new(ModelManager::new(L), FixedSizeConfig::new(2))?;
/// cache.add_model("a", None)?;
/// cache.add_model("b", None)?;
/// cache.lease("a")?;             // a is now the most recently used
/// cache.add_model("c", None)?;   // evicts b
/// assert_eq!(cache.queue(), ["a", "c"].map(|s| ModelId::new(s).unwrap()));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct FixedSizeCache<M: Manager> {
    inner: M,
    config: FixedSizeConfig,
    book: Book<M>,
    /// The stack's count of removals ([`Manager::removals`]) when the queue was last found to
    /// hold no id removed below (see `reconcile_below`).
    reconciled_at: <M::Runtime as Runtime>::Atomic,
    /// Pins lifted through this layer ([`Manager::unpins`] adds the stack's below).
    unpins: <M::Runtime as Runtime>::Atomic,
}

impl<M: Manager> FixedSizeCache<M> {
    /// Wraps `inner`; models it already holds are queued in id order.
    pub fn new(inner: M, config: FixedSizeConfig) -> Result<Self, InvalidConfig> {
        config.validate()?;
        // Read before the ids: a removal after this read is looked for at the first reconcile.
        let reconciled_at = inner.runtime().atomic(inner.removals().unwrap_or(0));
        let mut book = Bookkeeping { max_size: config.max_size(), ..Bookkeeping::default() };
        for id in inner.ids() {
            let bytes = size_below(&inner, &id);
            book.push(&id);
            book.set_size(&id, bytes);
        }
        let book = Lru::new(inner.runtime(), book);
        let unpins = inner.runtime().atomic(0);
        Ok(Self { inner, config, book, reconciled_at, unpins })
    }

    /// The wrapped manager.
    pub fn get_ref(&self) -> &M {
        &self.inner
    }

    /// Unwraps the manager.
    pub fn into_inner(self) -> M {
        self.inner
    }

    /// The capacity configuration.
    pub fn config(&self) -> &FixedSizeConfig {
        &self.config
    }

    /// The capacity now: [`FixedSizeConfig::max_size`] until [`FixedSizeCache::set_max_size`]
    /// changes it.
    pub fn max_size(&self) -> usize {
        self.book.with(|b| b.max_size)
    }

    /// The LRU queue, least recently used first (a lease running meanwhile may or may not
    /// count as a touch). A model removed below this cache behind its back (through
    /// [`FixedSizeCache::get_ref`]) leaves it when the cache next looks below: at its next cold
    /// add, replace or resize; one registered so joins it at its next add.
    pub fn queue(&self) -> Vec<ModelId> {
        self.book.ordered(|b| b.queue.iter().cloned().collect())
    }

    /// The pinned ids, in order.
    pub fn pinned(&self) -> Vec<ModelId> {
        self.book.with(|b| b.pinned.iter().cloned().collect())
    }

    /// Adds waiting for capacity right now, in line (a hint: SPEC 2.14 serves them in arrival
    /// order).
    pub fn waiting(&self) -> usize {
        self.book.with(|b| b.waiters.len())
    }

    /// Cold loads in flight.
    pub fn loading(&self) -> usize {
        self.book.with(|b| b.loading)
    }

    /// Whether the historical bug `mutant` is on (never, on the production runtime).
    fn mutant(&self, mutant: Mutant) -> bool {
        self.inner.runtime().mutant(mutant)
    }

    /// Queues `id`, registered below and found warm under its lifecycle lock, if this layer
    /// never queued it: it was registered behind its back (through [`FixedSizeCache::get_ref`]),
    /// and from now on the queue holds it as it holds every registered id (I4), so that it
    /// counts against `max_size` and can be evicted. Queued first, then sized (user code,
    /// outside the monitor: a panic there leaves it queued, as a cold add's does).
    fn adopt(&self, id: &ModelId) {
        let unqueued = self.book.with(|b| {
            let unqueued = !b.queue.contains(id);
            if unqueued {
                b.push(id);
            }
            unqueued
        });
        if !unqueued {
            return;
        }
        let bytes = size_below(&self.inner, id);
        self.book.with(|b| b.set_size(id, bytes));
    }

    /// Moves `id` to the MRU end if it is queued: a store into its stamp, no monitor.
    fn touch(&self, id: &ModelId) {
        if self.mutant(Mutant::NO_QUEUE_DEDUP) {
            self.book.with(|b| b.enqueue_again(id));
        } else {
            self.book.touch(id.as_str());
        }
    }

    /// The registered model's size (user code: called with no monitor held).
    fn size_of(&self, id: &ModelId) -> u64 {
        if self.mutant(Mutant::SIZE_READ_TOUCHES_BELOW) {
            return self.inner.lease(id.as_str()).map(|l| l.size_bytes()).unwrap_or(0);
        }
        size_below(&self.inner, id)
    }
}

/// The size of the model `inner` has registered under `id` (0 if none), read through a look
/// that is no use of it ([`Manager::peek_until`]): a cache over another never moves the inner
/// one's LRU order by reading a size.
fn size_below<M: Manager>(inner: &M, id: &ModelId) -> u64 {
    let deadline = CallOptions::new().deadline(inner.runtime());
    inner.peek_until(id.as_str(), deadline).map(|l| l.size_bytes()).unwrap_or(0)
}

impl<M: Manager> fmt::Debug for FixedSizeCache<M> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("FixedSizeCache")
            .field("config", &self.config)
            .field("queue", &self.queue())
            .field("pinned", &self.pinned())
            .finish_non_exhaustive()
    }
}
