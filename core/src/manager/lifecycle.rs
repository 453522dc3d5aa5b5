//! RAII guards for the lifecycle protocol: reserve the current generation, then hold its lock.
//!
//! Every exit path — success, error, timeout, panic — releases the lock first and the
//! reservation second (the other order could retire an entry that is still held), and the
//! reservation's release is the only place where an entry is retired.

use super::table::{LifecycleEntry, Table};
use crate::id::ModelId;
use crate::mutants::{Mutant, MutantSet, on};
use crate::runtime::{Arc, Monitor, Runtime, TimedOut, panicking};

/// A reservation of one lifecycle generation: while it lives, the entry cannot be retired.
pub(crate) struct Reservation<'a, M: Send + Sync + 'static, R: Runtime> {
    table: &'a R::Monitor<Table<M, R>>,
    id: ModelId,
    entry: Arc<LifecycleEntry<R>>,
    mutants: MutantSet,
    leaked: bool,
}

impl<'a, M: Send + Sync + 'static, R: Runtime> Reservation<'a, M, R> {
    /// Reserves the current generation of `id` (creating it if needed).
    pub(crate) fn new(
        table: &'a R::Monitor<Table<M, R>>,
        id: &ModelId,
        runtime: &R,
        mutants: MutantSet,
    ) -> Self {
        let entry = table.with(|t| t.reserve(id, runtime));
        tracing::trace!(%id, generation = entry.generation, "reserved");
        Self { table, id: id.clone(), entry, mutants, leaked: false }
    }

    /// Waits for the generation's lock, turning the reservation into a [`Hold`].
    pub(crate) fn acquire(self, timeout: std::time::Duration) -> Result<Hold<'a, M, R>, TimedOut> {
        match self.entry.lock.acquire(timeout) {
            Ok(()) => {
                tracing::trace!(id = %self.id, generation = self.entry.generation, "lifecycle lock acquired");
                Ok(Hold { reservation: self, locked: true })
            }
            Err(TimedOut) => {
                tracing::trace!(id = %self.id, generation = self.entry.generation, "lifecycle lock timed out");
                let mut this = self;
                this.leaked = on(this.mutants, Mutant::LeakReservationOnTimeout);
                Err(TimedOut)
            }
        }
    }
}

impl<M: Send + Sync + 'static, R: Runtime> Drop for Reservation<'_, M, R> {
    fn drop(&mut self) {
        if self.leaked || (panicking() && on(self.mutants, Mutant::LeakReservationOnPanic)) {
            return;
        }
        self.table.with(|t| t.unreserve(&self.id, &self.entry));
    }
}

/// The held lifecycle lock of one generation, with its reservation.
pub(crate) struct Hold<'a, M: Send + Sync + 'static, R: Runtime> {
    reservation: Reservation<'a, M, R>,
    locked: bool,
}

impl<M: Send + Sync + 'static, R: Runtime> Hold<'_, M, R> {
    /// The generation this hold belongs to.
    pub(crate) fn generation(&self) -> u64 {
        self.reservation.entry.generation
    }

    /// Mutant S1b: release the lock, then retire the entry without looking at reservations.
    pub(crate) fn release_then_forget(mut self) {
        self.release_lock();
        let id = self.reservation.id.clone();
        self.reservation.table.with(|t| t.forget(&id));
    }

    fn release_lock(&mut self) {
        if std::mem::take(&mut self.locked) {
            self.reservation.entry.lock.release();
        }
    }
}

impl<M: Send + Sync + 'static, R: Runtime> Drop for Hold<'_, M, R> {
    fn drop(&mut self) {
        // The lock goes first; the reservation (a field) is released after this body.
        self.release_lock();
    }
}
