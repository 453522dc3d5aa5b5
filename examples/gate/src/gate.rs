//! [`Gate`]: a maintenance gate over any manager stack.

use resident::layer::Decorator;
use resident::mutants::Mutant;
use resident::runtime::{Monitor, Runtime, TimedLock};
use resident::{Added, LifecycleGuard, Manager, ManagerError, ModelId, RegisterError, Replaced};

/// The gate's historical bug: an add checked that the gate was open, then counted itself as
/// in flight in a second step, so a maintenance that started between the two found no add to
/// wait for and ran beside the add's load.
pub const GATE_CHECK_THEN_ACT: Mutant = Mutant::named("gate-check-then-act");

/// The gate's lost wake-up: the last add out of the gate did not wake the maintenance waiting
/// for it, which then waited for good.
pub const GATE_LOST_WAKEUP: Mutant = Mutant::named("lost-wakeup-gate-drained");

/// Why the gate refused an add: a maintenance is running (the source of
/// [`ManagerError::Refused`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("closed for maintenance")]
pub struct Maintenance;

/// Refuses adds (and replaces and registers: whatever may load or register a model) while an
/// operator maintains the stack below ([`Gate::maintain`]), which first waits for the adds
/// already past the gate. Every other call goes straight through.
pub struct Gate<M: Manager> {
    inner: M,
    state: <M::Runtime as Runtime>::Monitor<State>,
    /// One maintenance at a time, held across the maintenance's calls to the stack below.
    maintenance: TimedLock<M::Runtime>,
}

#[derive(Debug, Default)]
struct State {
    /// A maintenance is waiting or running: adds are refused.
    closed: bool,
    /// Adds past the gate that have not returned yet.
    adds: usize,
    /// The maintenance's work is running.
    maintaining: bool,
}

impl<M: Manager> Gate<M> {
    /// An open gate over `inner`.
    pub fn new(inner: M) -> Self {
        let runtime = inner.runtime();
        Self { state: runtime.monitor(State::default()), maintenance: TimedLock::new(runtime), inner }
    }

    /// Closes the gate, waits until every add past it has returned, runs `work` on the stack
    /// below, and opens the gate again (also if `work` panics). Maintenances run one at a time.
    pub fn maintain<T>(&self, work: impl FnOnce(&M) -> T) -> T {
        let _one_at_a_time = self.maintenance.lock();
        self.state.with(|s| s.closed = true);
        let drained = self.state.wait_until(None, |s| (s.adds == 0).then(|| s.maintaining = true));
        drained.expect("an unbounded wait never times out");
        let _reopen = Reopen(&self.state);
        work(&self.inner)
    }

    /// Whether a maintenance is waiting or running.
    pub fn is_closed(&self) -> bool {
        self.state.with(|s| s.closed)
    }

    /// Counts an add in flight if the gate is open; `false` if it is closed.
    fn enter(&self) -> bool {
        let runtime = self.inner.runtime();
        if runtime.mutant(GATE_CHECK_THEN_ACT) {
            let open = !self.state.with(|s| s.closed);
            runtime.schedule_point();
            if open {
                self.state.with(|s| s.adds += 1);
            }
            return open;
        }
        self.state.with(|s| {
            let open = !s.closed;
            s.adds += usize::from(open);
            open
        })
    }
}

/// An add leaves the gate: the last one out wakes the maintenance waiting for it.
struct Leave<'a, M: Manager> {
    gate: &'a Gate<M>,
}

impl<M: Manager> Drop for Leave<'_, M> {
    fn drop(&mut self) {
        let drained = self.gate.state.with(|s| {
            s.adds -= 1;
            s.closed && s.adds == 0
        });
        if drained && !self.gate.inner.runtime().mutant(GATE_LOST_WAKEUP) {
            self.gate.state.notify_all();
        }
    }
}

/// The maintenance ends: the gate opens.
struct Reopen<'a, T: Monitor<State>>(&'a T);

impl<T: Monitor<State>> Drop for Reopen<'_, T> {
    fn drop(&mut self) {
        // Nobody waits for the gate to open (a closed gate refuses at once): no notify.
        self.0.with(|s| {
            s.maintaining = false;
            s.closed = false;
        });
    }
}

impl<M: Manager> Gate<M> {
    /// Lets a step below that may load or register a model through, if the gate is open: it
    /// counts as an add in flight (which a maintenance waits for) until the returned guard
    /// drops. Refused at once if the gate is closed.
    fn pass(&self, id: &ModelId) -> Result<Leave<'_, M>, ManagerError> {
        if !self.enter() {
            return Err(ManagerError::refused(id.clone(), "Gate", Box::new(Maintenance)));
        }
        // The gate's own invariant, checked by the model checkers (free in production): no
        // add is past the gate while a maintenance's work runs.
        self.inner.runtime().check("MAINT", || !self.state.with(|s| s.maintaining));
        Ok(Leave { gate: self })
    }
}

/// Every step that can load or register a model goes through the gate: an add, both kinds of
/// replace (a replace of an id not registered adds it) and a register. Removals, leases and
/// everything else go straight through.
impl<M: Manager> Decorator for Gate<M> {
    type Inner = M;

    fn inner(&self) -> &M {
        &self.inner
    }

    fn add_locked(
        &self,
        guard: &LifecycleGuard<M::Model, M::Runtime>,
        canonical: &ModelId,
    ) -> Result<Added, ManagerError> {
        let _in = self.pass(guard.id())?;
        self.inner.add_locked(guard, canonical)
    }

    fn replace_locked(
        &self,
        guard: &LifecycleGuard<M::Model, M::Runtime>,
        canonical: &ModelId,
    ) -> Result<Replaced, ManagerError> {
        let _in = self.pass(guard.id())?;
        self.inner.replace_locked(guard, canonical)
    }

    fn replace_in_place_locked(
        &self,
        guard: &LifecycleGuard<M::Model, M::Runtime>,
        canonical: &ModelId,
    ) -> Result<Replaced, ManagerError> {
        let _in = self.pass(guard.id())?;
        self.inner.replace_in_place_locked(guard, canonical)
    }

    fn register_locked(
        &self,
        guard: &LifecycleGuard<M::Model, M::Runtime>,
        model: M::Model,
    ) -> Result<(), RegisterError<M::Model>> {
        let _in = match self.pass(guard.id()) {
            Ok(passed) => passed,
            Err(error) => return Err(RegisterError { error, model }),
        };
        self.inner.register_locked(guard, model)
    }
}
