//! Removing many models at once — [`ManagerExt::shutdown`](super::ManagerExt::shutdown)
//! (SPEC 1.13) and [`ManagerExt::clear`](super::ManagerExt::clear), and the [`RemovalReport`]
//! both return — and the base's unload of one model.

use std::cell::Cell;
use std::time::Duration;

use super::Eviction;
use super::contract::Manager;
use super::lease::{self, ModelSlot};
use super::{LifecycleGuard, Loader, Model, ModelManager, Replaced};
use crate::deadline::{CallOptions, Deadline};
use crate::error::{ManagerError, SourceError, UserPanic};
use crate::first_panic::FirstPanic;
use crate::held::Held;
use crate::id::ModelId;
use crate::mutants::Mutant;
use crate::runtime::{Arc, Monitor, Runtime};
use crate::telemetry;

// ---- Removing many ---------------------------------------------------------------------------

/// What a [`ManagerExt::shutdown`](crate::ManagerExt::shutdown) or a
/// [`ManagerExt::clear`](crate::ManagerExt::clear) did, id by id.
#[derive(Debug, Clone, Default)]
#[non_exhaustive]
pub struct RemovalReport {
    /// Unloaded and unregistered, in id order.
    pub removed: Vec<ModelId>,
    /// Still registered, with why: an unload that failed (`Unload`), leases that outlived the
    /// drain or the deadline (`Busy`), a lifecycle lock not had in time (`LockTimeout`). After a
    /// shutdown they refuse new leases, and a later shutdown tries them again; after a clear
    /// they serve on.
    pub failed: Vec<(ModelId, ManagerError)>,
}

impl RemovalReport {
    /// Whether every model was removed.
    pub fn is_complete(&self) -> bool {
        self.failed.is_empty()
    }
}

/// Shuts `manager` down: refuse from now on, then settle every id that was registered or had
/// a caller in its lifecycle, each under its lifecycle lock, through every layer.
pub(super) fn shut_down<M: Manager + ?Sized>(manager: &M, options: CallOptions) -> RemovalReport {
    let deadline = options.deadline(manager.runtime());
    let ids = manager.begin_shutdown();
    let report = remove_each(manager, ids, deadline, false, |guard| manager.remove_locked(guard));
    let (removed, failed) = (report.removed.len(), report.failed.len());
    reported_holding(manager, report, || tracing::info!(unloaded = removed, failed, "shut down"))
}

/// Removes every model registered when it starts, pinned ones included, through every layer.
pub(super) fn clear<M: Manager + ?Sized>(manager: &M, options: CallOptions) -> RemovalReport {
    let deadline = options.deadline(manager.runtime());
    let rt = manager.runtime();
    let stop_at_failure = rt.mutant(Mutant::CLEAR_STOPS_AT_FIRST_FAILURE);
    let evicts = rt.mutant(Mutant::CLEAR_EVICTS);
    let report = remove_each(manager, manager.ids(), deadline, stop_at_failure, |guard| {
        if evicts {
            // The historical bug: an eviction, which skips pinned and leased models silently.
            return match manager.evict_locked(guard)? {
                Eviction::Evicted => Ok(()),
                Eviction::Pinned | Eviction::InUse | Eviction::NotRegistered => {
                    Err(ManagerError::NotFound { id: guard.id().clone() })
                }
            };
        }
        manager.remove_locked(guard)
    });
    let (removed, failed) = (report.removed.len(), report.failed.len());
    reported_holding(manager, report, || tracing::info!(removed, failed, "cleared"))
}

/// `report`, once `report_it` (user code: a subscriber) ran: held across it, so that a panic
/// there drops the errors in it (user code too) under a catch.
fn reported_holding<M: Manager + ?Sized>(
    manager: &M,
    report: RemovalReport,
    report_it: impl FnOnce(),
) -> RemovalReport {
    let guarded = !manager.runtime().mutant(Mutant::USER_ERROR_DROPPED_IN_UNWIND);
    let report = Held::<_, M::Runtime>::new(report, guarded);
    report_it();
    report.into_inner()
}

/// Removes `ids` one by one with `remove`, each under its lifecycle lock (taken by
/// `deadline`), through every layer; an id found unregistered is skipped. `stop_at_failure` is
/// the mutant of upstream's `clear`, which gives up at the first failure.
///
/// User code (an `unload`, a model's `Drop`) that panics fails its own id only: the panic is
/// caught once the id's lock is released and reported as that id's `Unload` error (its source a
/// [`UserPanic`]), and every later id is still attempted (M-P3). The layers' own guards have
/// settled their bookkeeping during the unwind, as for a panic reaching a caller of `remove`.
/// The reports of each id (user code too: a subscriber) run under a catch as well: a panicking
/// one reaches the caller once every id is settled (M-P3r), with no user error dropped in its
/// unwind.
fn remove_each<M: Manager + ?Sized>(
    manager: &M,
    ids: Vec<ModelId>,
    deadline: Deadline,
    stop_at_failure: bool,
    remove: impl Fn(&LifecycleGuard<M::Model, M::Runtime>) -> Result<(), ManagerError>,
) -> RemovalReport {
    let mut report = RemovalReport::default();
    let mut reports = Reports::new(manager.runtime());
    for id in ids {
        match settle_one(manager, &id, deadline, &remove, &mut reports) {
            Ok(true) => report.removed.push(id),
            Ok(false) => {}
            Err(error) => {
                reports.run(&|| tracing::warn!(%id, %error, "still registered"));
                report.failed.push((id, error));
                if stop_at_failure {
                    break;
                }
            }
        }
    }
    // Held across the resumed panic: its errors (user code) are dropped under a catch there.
    let report = Held::<_, M::Runtime>::new(report, true);
    reports.finish();
    report.into_inner()
}

/// Removes `id` with `remove` under its lifecycle lock (see [`remove_each`]): whether it was
/// registered, or the error (a panic of user code caught as an `Unload` error).
fn settle_one<M: Manager + ?Sized>(
    manager: &M,
    id: &ModelId,
    deadline: Deadline,
    remove: &impl Fn(&LifecycleGuard<M::Model, M::Runtime>) -> Result<(), ManagerError>,
    reports: &mut Reports<'_, M::Runtime>,
) -> Result<bool, ManagerError> {
    // Whether the removal began under the id's lock: a panic before that (a report of the
    // lock wait, user code too) removed nothing, whatever the registry says right then (a
    // load of the id may be under way, to register it after this call).
    let began = Cell::new(false);
    // An id that is not registered goes through the removal too: a layer's stale entry of
    // it (one a reconcile left to this lock's holder) is settled there.
    let settle = || {
        manager.lock_until(id, deadline).and_then(|guard| {
            began.set(true);
            match remove(&guard) {
                Ok(()) => Ok(true),
                Err(ManagerError::NotFound { .. }) => Ok(false),
                Err(error) => Err(error),
            }
        })
    };
    if manager.runtime().mutant(Mutant::REMOVAL_ABANDONED_ON_PANIC) {
        return settle();
    }
    <M::Runtime as Runtime>::catch_unwind(settle).unwrap_or_else(|payload| {
        // A model's `Drop` runs once it is unregistered: then it was removed, and the
        // panic is only reported.
        let panic = UserPanic::from_payload(payload.as_ref());
        let began = began.get() || manager.runtime().mutant(Mutant::PANIC_BEFORE_REMOVAL_COUNTED);
        if began && !manager.contains(id.as_str()) {
            reports.run(&|| tracing::warn!(%id, %panic, "removed; its model's Drop panicked"));
            return Ok(true);
        }
        Err(ManagerError::Unload { id: id.clone(), source: SourceError::new(Box::new(panic)) })
    })
}

/// The reports of a removal's ids (user code: a subscriber): each runs under a catch, and the
/// first that panicked goes on once every id is settled (M-P3r).
struct Reports<'a, R: Runtime> {
    runtime: &'a R,
    first: FirstPanic<R>,
}

impl<'a, R: Runtime> Reports<'a, R> {
    fn new(runtime: &'a R) -> Self {
        Self { runtime, first: FirstPanic::new() }
    }

    /// Runs `report`, keeping its panic (the historical bug `removal-report-uncaught` lets it
    /// unwind out of the removal at once).
    fn run(&mut self, report: &dyn Fn()) {
        if self.runtime.mutant(Mutant::REMOVAL_REPORT_UNCAUGHT) {
            return report();
        }
        self.first.run(report);
    }

    /// Resumes the first report's panic, if one panicked.
    fn finish(self) {
        self.first.resume_on(self.runtime);
    }
}

// ---- Unloading one ------------------------------------------------------------------------------

impl<L: Loader, R: Runtime> ModelManager<L, R> {
    /// The refusal of a model loaded for `id` that a shutdown overtook (`Table::register`):
    /// a shutdown unloads every model the manager loaded (SPEC 1.13), this one too, under the
    /// caller's lifecycle lock and outside every monitor, before it is dropped. An unload error
    /// is reported and dropped with it (nothing is registered to keep); a panic goes to the
    /// caller, and the slot, dropped in its unwind, drops the model under a catch.
    pub(super) fn refused_late(&self, id: &ModelId, slot: Arc<ModelSlot<L::Model, R>>) -> ManagerError {
        let unloaded = if self.runtime.mutant(Mutant::REFUSED_LOAD_NOT_UNLOADED) {
            Ok(())
        } else {
            slot.model().unload()
        };
        let unloaded = match unloaded {
            Ok(()) => true,
            Err(error) => {
                let error = ManagerError::Unload { id: id.clone(), source: SourceError::new(error) };
                // Held across the report (user code): a panicking one drops it under a catch.
                let error = Held::<_, R>::new(error, self.guards_user_errors());
                tracing::warn!(%id, error = %error.get(), "loaded, but shut down meanwhile: its unload failed");
                drop(error.into_inner());
                false
            }
        };
        drop(slot);
        tracing::debug!(%id, unloaded, "loaded, but shut down meanwhile: dropped");
        telemetry::refused(ManagerError::ShutDown { id: id.clone() })
    }

    /// Unloads the model of a closed slot and unregisters it. The registry's reference is
    /// dropped outside the table monitor; the model itself is dropped by the caller's `slot`,
    /// under the lifecycle lock only (its `Drop` is user code), unless a lease ending on another
    /// thread holds the last reference a moment longer (then that lease drops it).
    pub(super) fn unload(
        &self,
        guard: &LifecycleGuard<L::Model, R>,
        slot: &Arc<ModelSlot<L::Model, R>>,
        closed: Option<lease::Closed<'_, L::Model, R>>,
    ) -> Result<(), ManagerError> {
        let id = guard.id();
        tracing::debug!(%id, generation = guard.generation(), "remove: unloading");
        if let Err(error) = slot.model().unload() {
            let error = ManagerError::Unload { id: id.clone(), source: SourceError::new(error) };
            // Held across the report (user code): a panicking one drops it under a catch.
            let error = Held::<_, R>::new(error, self.guards_user_errors());
            tracing::debug!(%id, error = %error.get(), "remove: unload failed");
            return Err(error.into_inner());
        }
        if let Some(closed) = closed {
            closed.commit();
        }
        let removed = self.table.with(|t| {
            let removed = t.registry.remove(&self.runtime, id);
            if self.runtime.mutant(Mutant::RETIRE_WHILE_HELD) {
                t.forget(id);
            }
            removed
        });
        drop(removed);
        Ok(())
    }

    /// Drops the caller's reference to a slot it unloaded (the model's last once it is
    /// unregistered, but for a lease still ending on another thread: its `Drop`, user code,
    /// runs here under the lifecycle lock only, or with that lease's end), then
    /// reports a successful unload. In that order, a panicking subscriber unwinds with no model
    /// left to drop: a `Drop` that panics in an unwind aborts the process
    /// ([`telemetry::after_dropping`]).
    pub(super) fn unloaded(
        &self,
        id: &ModelId,
        slot: Arc<ModelSlot<L::Model, R>>,
        unloaded: Result<(), ManagerError>,
    ) -> Result<(), ManagerError> {
        let report = || {
            if unloaded.is_ok() {
                tracing::debug!(%id, "remove: unloaded");
            }
        };
        if self.runtime.mutant(Mutant::UNLOADED_REPORTED_FIRST) {
            report();
            drop(slot);
        } else {
            telemetry::after_dropping::<R, _>(slot, report);
        }
        unloaded
    }

    /// Settles the old version a replace switched the registry away from: drains its leases
    /// (at most `drain`), unloads it and drops its reference to it (the last but for a lease
    /// still ending on another thread: the model's `Drop`, user code, runs under the lifecycle
    /// lock only); only then reports, `loaded` last. A panicking subscriber or recorder then
    /// unwinds with no model left to drop.
    pub(super) fn settle_replaced(
        &self,
        id: &ModelId,
        old: Arc<ModelSlot<L::Model, R>>,
        drain: Duration,
        loaded: impl FnOnce(),
    ) -> Replaced {
        // Once drained, this is the old version's last reference but for a lease still ending
        // on another thread: if its `unload` (user code) panics, the slot lets go of the model
        // under a catch in that unwind. The outcome is held across the reports (user code): an
        // unload's error in it is user code too.
        let outcome = Held::<_, R>::new(self.retired(id, &old, drain), self.guards_user_errors());
        let report = || {
            match outcome.get() {
                Replaced::Detached(ManagerError::Busy { leases, .. }) => {
                    tracing::warn!(%id, leases, "replace: the old version's leases outlived the drain; detached");
                }
                Replaced::Detached(error) => {
                    tracing::warn!(%id, %error, "replace: the old version's unload failed; dropped");
                }
                _ => tracing::debug!(%id, "replace: old version unloaded"),
            }
            loaded();
        };
        if self.runtime.mutant(Mutant::REPLACED_REPORTED_FIRST) {
            report();
            drop(old);
        } else {
            telemetry::after_dropping::<R, _>(old, report);
        }
        outcome.into_inner()
    }

    /// Retires the old version of a replace: drains its leases (at most `drain`), then unloads
    /// it; how that went.
    fn retired(&self, id: &ModelId, old: &ModelSlot<L::Model, R>, drain: Duration) -> Replaced {
        match old.retire(drain) {
            Err(leases) => Replaced::Detached(ManagerError::Busy { id: id.clone(), leases, waited: drain }),
            Ok(()) => match old.model().unload() {
                Ok(()) => Replaced::Unloaded,
                Err(error) => Replaced::Detached(ManagerError::Unload {
                    id: id.clone(),
                    source: SourceError::new(error),
                }),
            },
        }
    }

    /// Whether the user errors held across reports are dropped under a catch in an unwind (not
    /// under the `user-error-dropped-in-unwind` mutant).
    pub(super) fn guards_user_errors(&self) -> bool {
        !self.runtime.mutant(Mutant::USER_ERROR_DROPPED_IN_UNWIND)
    }
}

// Historical bugs: the bodies of the manager's switches (see `crate::mutants`).
impl<L: Loader, R: Runtime> ModelManager<L, R> {
    /// M-E2 (`evict-drains-leases`): an eviction closes its victim with remove's blocking
    /// drain, refusing leases (`Removing`, then `Busy`) on a model it then keeps.
    pub(super) fn evict_draining_leases(
        &self,
        guard: &LifecycleGuard<L::Model, R>,
    ) -> Result<Eviction, ManagerError> {
        match self.remove_locked(guard) {
            Ok(()) => Ok(Eviction::Evicted),
            Err(ManagerError::Busy { .. }) => Ok(Eviction::InUse),
            Err(ManagerError::NotFound { .. }) => Ok(Eviction::NotRegistered),
            Err(error) => Err(error),
        }
    }
}
