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
//! - A layer learns of removals below it: after every inner call that can evict (a cold add
//!   through an inner cache), queued ids that are no longer registered are dropped, so I4 holds
//!   at every depth of nesting (SPEC 2.11).
//! - User code (the loader, `unload`, `size_bytes`, a model's `Drop`) may panic anywhere: while
//!   the id's lifecycle lock is held, a settle guard brings its queue entry in line with the
//!   registry on every exit, so a model is either registered and queued, or neither (2.13).
//!
//! # Lock order (I12)
//! `lifecycle lock (the id being added)` → `bookkeeping monitor` → `base monitors`. A thread
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

use std::fmt;

pub use config::{CapacityPolicy, FixedSizeConfig};

use queue::Bookkeeping;
use settle::{Settle, Settling};

use crate::deadline::Deadline;
use crate::error::{InvalidConfig, ManagerError, RegisterError};
use crate::id::ModelId;
use crate::manager::{Added, Eviction, Lease, LifecycleGuard, Manager, ManagerExt, Model, Replaced};
use crate::mutants::Mutant;
use crate::runtime::{Arc, Monitor, Runtime, Signal};

/// What wakes an add waiting for capacity behind another: its own signal, bumped when it
/// becomes first.
type Wake<M> = Arc<Signal<<M as Manager>::Runtime>>;

type Book<M> = <<M as Manager>::Runtime as Runtime>::Monitor<Bookkeeping<Wake<M>>>;

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
}

impl<M: Manager> FixedSizeCache<M> {
    /// Wraps `inner`; models it already holds are queued in id order.
    pub fn new(inner: M, config: FixedSizeConfig) -> Result<Self, InvalidConfig> {
        config.validate()?;
        let mut book = Bookkeeping { max_size: config.max_size(), ..Bookkeeping::default() };
        for id in inner.ids() {
            let bytes = inner.lease(id.as_str()).map(|l| l.size_bytes()).unwrap_or(0);
            book.push(&id);
            book.set_size(&id, bytes);
        }
        let book = inner.runtime().monitor(book);
        Ok(Self { inner, config, book })
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

    /// A replace loads the new version beside the old one: refused at once when `max_size` can
    /// never hold both, with the old version's slot taken and every other slot pinned (in this
    /// layer or below). Loads in flight and models in use only make it wait: they end.
    fn check_slot_beside(&self, id: &ModelId) -> Result<(), ManagerError> {
        // A shut-down stack refuses with `ShutDown` first (the admission says so); under the
        // overflow policy the admission overflows instead of waiting.
        let overflows = self.config.policy() == CapacityPolicy::Overflow;
        if self.mutant(Mutant::REPLACE_WAITS_FOR_NO_SLOT) || overflows || self.inner.is_shut_down() {
            return Ok(());
        }
        let (max_size, others) = self.book.with(|b| {
            let others: Vec<ModelId> = b.queue.iter().filter(|q| *q != id).cloned().collect();
            (b.max_size, others)
        });
        // Asked outside the book's monitor: a layer below answers from its own.
        let pinned: Vec<ModelId> = others.into_iter().filter(|q| self.is_pinned(q.as_str())).collect();
        if max_size > pinned.len() + 1 {
            return Ok(());
        }
        Err(ManagerError::NoSlotBeside { id: id.clone(), max_size, pinned })
    }

    /// A replace through this layer, beside the old version or in its place. Nothing
    /// registered: an add. The id keeps its place in the queue and its pin; its size is read
    /// again after, and a version that grew may take the layer past `max_bytes`, as a cold add
    /// may (M-B1).
    fn replace_through(
        &self,
        guard: &LifecycleGuard<M::Model, M::Runtime>,
        canonical: &ModelId,
        in_place: bool,
    ) -> Result<Replaced, ManagerError> {
        let id = guard.id();
        if !self.inner.contains(id.as_str()) {
            return self.add_locked(guard, canonical).map(|_| Replaced::Added);
        }
        let settle = Settle { cache: self, id, way: Settling::Add };
        let replaced = if in_place {
            // Its queue entry holds its slot in the count while the new version loads.
            self.inner.replace_in_place_locked(guard, canonical)?
        } else {
            self.check_slot_beside(id)?;
            let admission = self.admit(id, guard.deadline(), true)?;
            let replaced = self.inner.replace_locked(guard, canonical)?;
            // The new version takes the old one's place: its slot in the count is not needed.
            drop(admission);
            replaced
        };
        let bytes = self.size_of(id);
        self.book.with(|b| b.set_size(id, bytes));
        drop(settle);
        if !self.mutant(Mutant::REPLACE_SKIPS_MAX_BYTES) {
            self.enforce_bytes(id);
        }
        Ok(replaced)
    }

    /// The LRU queue, least recently used first.
    pub fn queue(&self) -> Vec<ModelId> {
        self.book.with(|b| b.queue.iter().cloned().collect())
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

    fn touch(&self, id: &ModelId) {
        if self.mutant(Mutant::NO_QUEUE_DEDUP) {
            self.book.with(|b| b.queue.push_back(id.clone()));
        } else {
            self.book.with(|b| b.touch(id));
        }
    }

    /// The registered model's size (user code: called with no monitor held).
    fn size_of(&self, id: &ModelId) -> u64 {
        self.inner.lease(id.as_str()).map(|l| l.size_bytes()).unwrap_or(0)
    }
}

// ---- The layer's steps --------------------------------------------------------------------------

/// Implemented by its path, so that inside this folder the methods it shares with
/// [`Manager`] need no qualification.
impl<M: Manager> crate::layer::Decorator for FixedSizeCache<M> {
    type Inner = M;

    fn inner(&self) -> &M {
        &self.inner
    }

    fn add_locked(
        &self,
        guard: &LifecycleGuard<M::Model, M::Runtime>,
        canonical: &ModelId,
    ) -> Result<Added, ManagerError> {
        let id = guard.id();
        if self.mutant(Mutant::CANONICAL_WARM_CHECK) && self.inner.contains(canonical.as_str()) {
            self.touch(id);
            return Ok(Added::Warm);
        }
        if self.inner.contains(id.as_str()) {
            let added = self.inner.add_locked(guard, canonical)?;
            if !self.mutant(Mutant::WARM_TOUCH_OUTSIDE_LOCK) {
                self.touch(id);
            }
            return Ok(added);
        }
        self.add_cold(guard, Some(canonical), || self.inner.add_locked(guard, canonical))
    }

    /// Makes room for the new version beside the old one first (the id itself is never a
    /// victim); the id keeps its place in the queue and its pin.
    fn replace_locked(
        &self,
        guard: &LifecycleGuard<M::Model, M::Runtime>,
        canonical: &ModelId,
    ) -> Result<Replaced, ManagerError> {
        self.replace_through(guard, canonical, false)
    }

    /// Needs no slot beside the old version: the id keeps its place in the queue (and in the
    /// count) while its new version loads into the slot the old one left, and its pin. If the
    /// new version fails to load, the id leaves the queue.
    fn replace_in_place_locked(
        &self,
        guard: &LifecycleGuard<M::Model, M::Runtime>,
        canonical: &ModelId,
    ) -> Result<Replaced, ManagerError> {
        self.replace_through(guard, canonical, true)
    }

    fn remove_locked(&self, guard: &LifecycleGuard<M::Model, M::Runtime>) -> Result<(), ManagerError> {
        let id = guard.id();
        if self.mutant(Mutant::QUEUE_REMOVAL_FIRST) {
            self.book.with(|b| b.forget(id));
            return self.inner.remove_locked(guard);
        }
        let settle = (!self.mutant(Mutant::QUEUE_SKIPPED_ON_PANIC)).then_some(Settle {
            cache: self,
            id,
            way: Settling::Remove,
        });
        self.inner.remove_locked(guard)?;
        self.book.with(|b| b.forget(id));
        drop(settle);
        Ok(())
    }

    /// Skips a victim pinned in this layer; otherwise the layers below decide. The queue entry is
    /// settled from the registry on every exit.
    fn evict_locked(&self, guard: &LifecycleGuard<M::Model, M::Runtime>) -> Result<Eviction, ManagerError> {
        self.evict_sized(guard).map(|(outcome, _)| outcome)
    }

    /// Goes through admission like a cold add: counted against `max_size`, evicting or waiting
    /// for room (bounded by the guard's deadline); queued once registered.
    fn register_locked(
        &self,
        guard: &LifecycleGuard<M::Model, M::Runtime>,
        model: M::Model,
    ) -> Result<(), RegisterError<M::Model>> {
        let id = guard.id();
        if self.inner.contains(id.as_str()) {
            // Registered already (and kept so by the lock): the layers below refuse it and
            // hand the model back. Whatever they register anyway is queued (I4).
            let registered = self.inner.register_locked(guard, model);
            if registered.is_ok() {
                self.book.with(|b| b.push(id));
            }
            return registered;
        }
        // Here until the inner call takes it, and back here if that refuses it.
        let mut held = Some(model);
        let added = self.add_cold(guard, None, || {
            let model = held.take().expect("the inner call runs once");
            self.inner.register_locked(guard, model).map(|()| Added::Loaded).map_err(|back| {
                held = Some(back.model);
                back.error
            })
        });
        match (added, held) {
            (Ok(_), _) => Ok(()),
            (Err(error), Some(model)) => Err(RegisterError::new(error, model)),
            (Err(error), None) => unreachable!("every refusal hands the model back: {error}"),
        }
    }

    fn lease_until(&self, id: &str, deadline: Deadline) -> Result<Lease<M::Model, M::Runtime>, ManagerError> {
        if self.mutant(Mutant::TOUCH_UNKNOWN) {
            let resolved = ModelId::new(id)?;
            self.book.with(|b| b.touch_appending(&resolved));
            return self.inner.lease_until(id, deadline);
        }
        let lease = self.inner.lease_until(id, deadline)?;
        self.book.with(|b| b.touch(lease.id()));
        Ok(lease)
    }

    /// Holding the id's lifecycle lock, it also drops a stale queue entry of it (one that a
    /// reconcile left to this lock's holder).
    fn pin_locked(&self, guard: &LifecycleGuard<M::Model, M::Runtime>) -> Result<(), ManagerError> {
        let _settle = Settle { cache: self, id: guard.id(), way: Settling::Remove };
        if !self.mutant(Mutant::PIN_NOT_FORWARDED) {
            self.inner.pin_locked(guard)?;
        }
        self.book.with(|b| b.pinned.insert(guard.id().clone()));
        Ok(())
    }

    /// Pinned here, or in a layer below.
    fn is_pinned(&self, id: &str) -> bool {
        self.book.with(|b| b.pinned.contains(id)) || self.inner.is_pinned(id)
    }

    /// Under the id's lifecycle lock, like the pin it undoes: every layer sees the pin and the
    /// unpin of one id in the same order. Like every holder of that lock, it drops a stale queue
    /// entry of the id.
    fn unpin_locked(&self, guard: &LifecycleGuard<M::Model, M::Runtime>) -> Result<(), ManagerError> {
        let _settle = Settle { cache: self, id: guard.id(), way: Settling::Remove };
        self.inner.unpin_locked(guard)?;
        self.book.with(|b| b.unpin(guard.id()));
        // An add waiting for room must re-plan (a victim it skipped is evictable now): the
        // release of `guard` wakes it, the one notify site of an unpin (W-5).
        Ok(())
    }
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
