//! RAII guards for the lifecycle protocol: reserve the current generation, then hold its lock.
//!
//! Every exit path — success, error, timeout, panic — releases the lock first and the
//! reservation second (the other order could retire an entry that is still held), and the
//! reservation's release is the only place where an entry is retired.

use std::fmt;

use super::table::{LifecycleEntry, Table};
use crate::deadline::Deadline;
use crate::error::ManagerError;
use crate::held::Held;
use crate::id::ModelId;
use crate::mutants::Mutant;
use crate::runtime::{Arc, Monitor, Runtime, Signal, StdRuntime, TimedOut};
use crate::telemetry;

/// The table monitor, shared by the manager and every guard it hands out.
pub(crate) type SharedTable<M, R> = Arc<<R as Runtime>::Monitor<Table<M, R>>>;

// ---- Reservations -------------------------------------------------------------------------------

/// A reservation of one lifecycle generation: while it lives, the entry cannot be retired.
pub(crate) struct Reservation<M: Send + Sync + 'static, R: Runtime> {
    table: SharedTable<M, R>,
    id: ModelId,
    entry: Arc<LifecycleEntry<R>>,
    /// This reservation's place in its generation's order.
    ticket: u64,
    /// The stack's change signal, bumped when the lock is released.
    changes: Arc<Signal<R>>,
    leaked: bool,
}

impl<M: Send + Sync + 'static, R: Runtime> Reservation<M, R> {
    /// Reserves the current generation of `id` (creating it if needed).
    pub(crate) fn new(table: &SharedTable<M, R>, id: &ModelId, changes: &Arc<Signal<R>>) -> Self {
        let reserved = table.with(|t| t.reserve(id, changes.runtime()));
        let (entry, ticket, created) = (reserved.entry, reserved.ticket, reserved.created);
        // The handle exists before anything is reported: a panicking subscriber unreserves.
        let reservation = Self {
            table: Arc::clone(table),
            id: id.clone(),
            entry,
            ticket,
            changes: Arc::clone(changes),
            leaked: false,
        };
        // A layer's settle guard reserves ids from its `Drop`, also while its thread unwinds:
        // nothing is reported then (a panicking subscriber would abort the process).
        if !R::panicking() {
            if created {
                tracing::trace!(%id, generation = reservation.entry.generation, "lifecycle entry created");
            }
            tracing::trace!(%id, generation = reservation.entry.generation, ticket, "reserved");
        }
        reservation
    }

    /// Waits (at most `timeout`) for the generation's lock, turning the reservation into a
    /// [`LifecycleGuard`] that carries the caller's `deadline`.
    pub(crate) fn acquire(
        mut self,
        timeout: std::time::Duration,
        deadline: Deadline,
    ) -> Result<LifecycleGuard<M, R>, TimedOut> {
        let rt = self.changes.runtime().clone();
        let (acquired, waited_since) = self.entry.lock.acquire(timeout);
        // Report only once the claim has its handle: the recorder and the subscriber are user
        // code, and a panic of theirs must find the lock owned by a guard that releases it.
        let report_wait = |rt: &R| {
            if let Some(started) = waited_since {
                telemetry::lock_waited(rt.now().saturating_sub(started));
            }
        };
        if rt.mutant(Mutant::REPORT_BEFORE_HANDLE) {
            report_wait(&rt);
        }
        match acquired {
            Ok(_) => {
                let guard = LifecycleGuard { reservation: self, locked: true, quiet: false, deadline };
                if !rt.mutant(Mutant::REPORT_BEFORE_HANDLE) {
                    report_wait(&rt);
                }
                tracing::trace!(id = %guard.id(), generation = guard.generation(), "lifecycle lock acquired");
                Ok(guard)
            }
            Err(TimedOut) => {
                self.leaked = rt.mutant(Mutant::LEAK_RESERVATION_ON_TIMEOUT);
                let (id, generation) = (self.id.clone(), self.entry.generation);
                drop(self);
                if !rt.mutant(Mutant::REPORT_BEFORE_HANDLE) {
                    report_wait(&rt);
                }
                tracing::trace!(%id, generation, "lifecycle lock timed out");
                Err(TimedOut)
            }
        }
    }

    /// Takes the generation's lock only if it is free right now.
    pub(crate) fn try_acquire(self) -> Option<LifecycleGuard<M, R>> {
        self.entry.lock.try_acquire().then(|| {
            let guard =
                LifecycleGuard { reservation: self, locked: true, quiet: false, deadline: Deadline::NONE };
            if !R::panicking() {
                tracing::trace!(id = %guard.id(), generation = guard.generation(), "lifecycle lock taken (try)");
            }
            guard
        })
    }
}

impl<M: Send + Sync + 'static, R: Runtime> Drop for Reservation<M, R> {
    fn drop(&mut self) {
        if self.leaked || (R::panicking() && self.changes.runtime().mutant(Mutant::LEAK_RESERVATION_ON_PANIC))
        {
            return;
        }
        let (retired, displaced) = self.table.with(|t| t.unreserve(&self.id, &self.entry));
        // A retired entry's failure is a loader's error (user code): in an unwind (a panic
        // while the lock was held) it is dropped under a catch.
        if !displaced.is_empty() {
            let guarded = !self.changes.runtime().mutant(Mutant::USER_ERROR_DROPPED_IN_UNWIND);
            drop(Held::<_, R>::new(displaced, guarded));
        }
        if retired && !R::panicking() {
            tracing::trace!(id = %self.id, generation = self.entry.generation, "lifecycle entry retired");
        }
    }
}

// ---- The guard ----------------------------------------------------------------------------------

/// The held lifecycle lock of one resolved id (one generation of it), with its reservation.
///
/// Obtained from [`ManagerExt::lock`](crate::ManagerExt::lock); while it lives no other caller can
/// add or remove that id, and the generation cannot be retired. Dropping it releases both.
pub struct LifecycleGuard<M: Send + Sync + 'static, R: Runtime = StdRuntime> {
    reservation: Reservation<M, R>,
    locked: bool,
    /// Its holder changed nothing a waiter could use ([`LifecycleGuard::changed_nothing`]).
    quiet: bool,
    deadline: Deadline,
}

impl<M: Send + Sync + 'static, R: Runtime> LifecycleGuard<M, R> {
    /// The resolved id this guard locks.
    pub fn id(&self) -> &ModelId {
        &self.reservation.id
    }

    /// The deadline of the call that took this guard ([`Deadline::NONE`] for a
    /// [`try_lock`](crate::Manager::try_lock)): every wait made under it ends by then.
    pub fn deadline(&self) -> Deadline {
        self.deadline
    }

    /// The generation this guard belongs to.
    pub fn generation(&self) -> u64 {
        self.reservation.entry.generation
    }

    /// The error this caller receives instead of loading `canonical` (SPEC 1.9): the error of
    /// a load of `canonical` under this generation that failed after this caller reserved it
    /// (it waited for that load), or else one that the negative cache
    /// ([`ManagerConfig::with_failure_cache`](crate::ManagerConfig::with_failure_cache)) still
    /// remembers. `None`: load afresh.
    ///
    /// The base's [`add_locked`](crate::Manager::add_locked) returns it by itself; a decorator
    /// that does work before a cold load (a cache making room) asks first, so that callers of a
    /// failed load do not evict for nothing.
    pub fn shared_failure(&self, canonical: &ModelId) -> Option<ManagerError> {
        let runtime = self.reservation.changes.runtime();
        if runtime.mutant(Mutant::FAILURE_NOT_SHARED) {
            return None;
        }
        let (id, entry, ticket) = (&self.reservation.id, &self.reservation.entry, self.reservation.ticket);
        self.reservation.table.with(|t| t.shared_failure(id, entry, ticket, canonical, || runtime.now()))
    }

    /// Records that loading `canonical` under this guard failed with `error`, for the callers
    /// waiting behind it (and, with `negative`, new callers for that long).
    pub(crate) fn record_failure(
        &self,
        canonical: &ModelId,
        error: &ManagerError,
        negative: Option<std::time::Duration>,
    ) {
        let (id, entry) = (&self.reservation.id, &self.reservation.entry);
        let now = self.reservation.changes.runtime().now();
        let inside = self.reservation.changes.runtime().mutant(Mutant::FAILURE_DROPPED_IN_MONITOR);
        let displaced = self.reservation.table.with(|t| {
            let displaced = t.record_failure(id, entry, canonical, error, negative, now);
            // The historical bug drops the errors it displaced (user code) under the monitor.
            (!inside).then_some(displaced)
        });
        drop(displaced);
    }

    /// Whether this guard was handed out by the manager that owns `table`.
    pub(crate) fn belongs_to(&self, table: &SharedTable<M, R>) -> bool {
        Arc::ptr_eq(&self.reservation.table, table)
    }

    /// Says that its holder changed nothing that a waiter could use (a warm add): its release
    /// tells the stack only if a layer found the lock held meanwhile ([`Manager::is_locked`]),
    /// having skipped the model as a victim for it. A warm add per request would otherwise
    /// wake every add waiting for capacity, each to find what it found before.
    ///
    /// [`Manager::is_locked`]: crate::Manager::is_locked
    pub(crate) fn changed_nothing(&mut self) {
        self.quiet = true;
    }

    /// Releases the lock and tells the stack: an add, remove or eviction under it is complete,
    /// which may make room for an add waiting in a layer; so is the model's lock, which may
    /// make it a victim for one that skipped it.
    fn release_lock(&mut self) {
        if std::mem::take(&mut self.locked) {
            let wanted = self.reservation.entry.lock.release();
            if !self.quiet {
                self.reservation.changes.bump_at(Mutant::LOST_WAKEUP_GUARD_RELEASE);
            } else if wanted {
                self.reservation.changes.bump_at(Mutant::LOST_WAKEUP_QUIET_RELEASE_WANTED);
            }
        }
    }
}

impl<M: Send + Sync + 'static, R: Runtime> Drop for LifecycleGuard<M, R> {
    fn drop(&mut self) {
        // The lock goes first; the reservation (a field) is released after this body.
        self.release_lock();
        if self.reservation.changes.runtime().mutant(Mutant::RETIRE_AFTER_RELEASE) {
            self.retire_after_release();
        }
    }
}

impl<M: Send + Sync + 'static, R: Runtime> fmt::Debug for LifecycleGuard<M, R> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LifecycleGuard")
            .field("id", self.id())
            .field("generation", &self.generation())
            .finish()
    }
}

// Historical bugs: the bodies of the switches above (see `crate::mutants`).
impl<M: Send + Sync + 'static, R: Runtime> LifecycleGuard<M, R> {
    /// S1b (`retire-after-release`), the naive fix of S1: once released, an unregistered id's
    /// entry is retired without looking at the reservations other callers hold.
    fn retire_after_release(&self) {
        let id = &self.reservation.id;
        self.reservation.table.with(|t| {
            if !t.registry.contains_key(id) {
                t.forget(id);
            }
        });
    }
}
