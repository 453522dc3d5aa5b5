//! [`Sim`]: the `resident` runtime facade over a model checker's own mutex and condition
//! variable, with a logical clock whose deadlines a timer task fires.
//!
//! A wait blocks on the checker's condition variable and wakes only when notified (or, under
//! shuttle, spuriously by a recorded data choice), so a missing notify shows for real: as a
//! deadlock, a step-bound livelock, or, in [`Time::Auto`], as a waiter that its deadline woke
//! with its condition already true.

use std::any::Any;
use std::fmt;
use std::marker::PhantomData;
use std::time::Duration;

use resident::mutants::Mutant;
use resident::runtime::{Arc, LineStep, Runtime, RwLock, SlotStep};

use super::checker::Checker;
use super::clock::{Clock, Time};
use super::monitor::{Held, SimMonitor};
use crate::mutant_set::MutantSet;

/// The runtime of one execution on checker `C`. Create one per execution, inside the checked
/// closure ([`SimRuntime::for_execution`](super::SimRuntime::for_execution)).
pub struct Sim<C: Checker> {
    shared: Arc<Shared<C>>,
}

struct Shared<C: Checker> {
    clock: Clock<C>,
    mutants: MutantSet,
    /// Threads the code under test started ([`Runtime::spawn_background`]), joined before the execution
    /// ends: one that never exits is a deadlock the checker reports. Plain std bookkeeping (no
    /// scheduling point).
    background: std::sync::Mutex<Vec<SimHandle<C, ()>>>,
}

impl<C: Checker> Clone for Sim<C> {
    fn clone(&self) -> Self {
        Self { shared: Arc::clone(&self.shared) }
    }
}

impl<C: Checker> fmt::Debug for Sim<C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Sim")
            .field("checker", &C::NAME)
            .field("time", &self.shared.clock.time)
            .field("mutants", &self.shared.mutants)
            .finish()
    }
}

impl<C: Checker> Sim<C> {
    pub(super) fn new(time: Time, mutants: MutantSet) -> Self {
        let background = std::sync::Mutex::default();
        Self { shared: Arc::new(Shared { clock: Clock::new(time), mutants, background }) }
    }

    pub(super) fn clock(&self) -> &Clock<C> {
        &self.shared.clock
    }

    pub(super) fn spawn_counted<T: Send + 'static>(
        &self,
        name: &str,
        f: impl FnOnce() -> T + Send + 'static,
    ) -> SimHandle<C, T> {
        let (inner, id) = self.spawn_erased(name, Box::new(move || Box::new(f())));
        SimHandle { inner, id, rt: self.clone(), output: PhantomData }
    }

    /// Spawns `body` as a counted checker thread. Every scenario thread goes through this one
    /// closure type: the checkers' spawn machinery (a few kilobytes of code under each) is
    /// compiled once per checker instead of once per thread body of the catalogue.
    fn spawn_erased(&self, name: &str, body: Body) -> (C::Handle<Output>, usize) {
        let id = self.clock().spawned();
        let exit = Exit { rt: self.clone(), id };
        let inner = C::spawn(name, move || {
            let _exit = exit;
            body()
        });
        (inner, id)
    }

    pub(super) fn with_time(&self, body: impl FnOnce()) {
        let timer = (self.clock().time != Time::Off).then(|| {
            let rt = self.clone();
            C::spawn("timer", move || rt.clock().run_timer())
        });
        body();
        self.join_background();
        self.clock().shutdown();
        if let Some(timer) = timer {
            C::join(timer).unwrap_or_else(|payload| crate::unwinding::resume(payload));
        }
    }
}

impl<C: Checker> Sim<C> {
    /// Joins every thread the code under test started so far (and those they start), re-raising
    /// the first panic.
    pub(super) fn join_background(&self) {
        loop {
            let next = self.shared.background.lock().unwrap_or_else(std::sync::PoisonError::into_inner).pop();
            let Some(handle) = next else { return };
            handle.join().unwrap_or_else(|payload| crate::unwinding::resume(payload));
        }
    }
}

/// Ends a scenario thread's accounting when it returns or unwinds.
struct Exit<C: Checker> {
    rt: Sim<C>,
    id: usize,
}

impl<C: Checker> Drop for Exit<C> {
    fn drop(&mut self) {
        self.rt.clock().finished(self.id);
    }
}

/// What a scenario thread returns, before its handle gives it its type back.
type Output = Box<dyn Any + Send>;
/// A scenario thread's body, its output boxed.
type Body = Box<dyn FnOnce() -> Output + Send>;

/// Join handle of a scenario thread.
pub struct SimHandle<C: Checker, T: Send + 'static> {
    inner: C::Handle<Output>,
    id: usize,
    rt: Sim<C>,
    output: PhantomData<fn() -> T>,
}

impl<C: Checker, T: Send + 'static> SimHandle<C, T> {
    pub(super) fn join(self) -> std::thread::Result<T> {
        self.rt.clock().joining(self.id);
        C::join(self.inner).map(|output| match output.downcast::<T>() {
            Ok(output) => *output,
            Err(_) => unreachable!("a scenario thread returns its body's output"),
        })
    }
}

impl<C: Checker> Runtime for Sim<C> {
    type Monitor<T: Send + 'static> = SimMonitor<C, T>;

    fn monitor<T: Send + 'static>(&self, value: T) -> SimMonitor<C, T> {
        SimMonitor::new(self, value)
    }

    type RwLock<T: Send + Sync + 'static> = SimRwLock<C, T>;

    fn rw_lock<T: Send + Sync + 'static>(&self, value: T) -> SimRwLock<C, T> {
        SimRwLock { lock: C::rw_lock(value), rt: self.clone() }
    }

    type Atomic = C::Word;

    fn atomic(&self, value: u64) -> C::Word {
        C::word(value)
    }

    fn fence(&self) {
        C::fence();
    }

    fn panicking() -> bool {
        crate::unwinding::panicking()
    }

    fn catch_unwind<T>(f: impl FnOnce() -> T) -> std::thread::Result<T> {
        crate::unwinding::catch(f)
    }

    fn resume_caught(payload: Box<dyn std::any::Any + Send>) -> ! {
        crate::unwinding::resume(payload)
    }

    fn now(&self) -> Duration {
        Duration::from_nanos(self.clock().now())
    }

    fn spawn_background(&self, name: &str, f: Box<dyn FnOnce() + Send + 'static>) -> std::io::Result<()> {
        let handle = self.spawn_counted(name, f);
        self.shared.background.lock().unwrap_or_else(std::sync::PoisonError::into_inner).push(handle);
        Ok(())
    }

    fn mutant(&self, mutant: Mutant) -> bool {
        self.shared.mutants.contains(mutant)
    }

    fn schedule_point(&self) {
        C::yield_now();
    }

    fn check(&self, name: &'static str, holds: impl FnOnce() -> bool) {
        if !holds() {
            let message = format!("the application's own check {name} failed");
            // Fails the execution here, where the trace shows it, unless the thread unwinds
            // already (a check in a `Drop`): then it is recorded for the execution's end.
            if crate::unwinding::panicking() {
                crate::violation::Violation::record(name, message);
            } else {
                crate::violation::Violation::raise(name, message);
            }
        }
    }

    fn defect(&self, what: &'static str) {
        crate::violation::Violation::record("defect", what.to_owned());
    }

    fn observe(&self, slot: usize, step: SlotStep) {
        crate::fairness::observe(slot, step);
    }

    fn observe_line(&self, line: usize, step: LineStep) {
        crate::fairness::observe_line(line, step);
    }

    fn resume_unwind(&self, payload: Box<dyn std::any::Any + Send>) {
        if !crate::unwinding::panicking() {
            crate::unwinding::resume(payload);
        }
        // Production aborts here (a panic leaving a `Drop` that runs during an unwind): the
        // checker reports it instead, and the unwind in progress goes on.
        crate::violation::Violation::record(
            "abort",
            "a panic of user code escapes a Drop that runs while its thread unwinds".to_owned(),
        );
    }
}

/// [`RwLock`] of the [`Sim`] runtime: the checker's own; a thread inside counts as holding a
/// monitor (user code must never run there).
pub struct SimRwLock<C: Checker, T: Send + Sync + 'static> {
    lock: C::RwLock<T>,
    rt: Sim<C>,
}

impl<C: Checker, T: Send + Sync + 'static> RwLock<T> for SimRwLock<C, T> {
    fn read<U>(&self, f: impl FnOnce(&T) -> U) -> U {
        C::read(&self.lock, |value| {
            self.rt.clock().touch();
            let _held = Held::<C>::enter();
            f(value)
        })
    }

    fn write<U>(&self, f: impl FnOnce(&mut T) -> U) -> U {
        C::write(&self.lock, |value| {
            self.rt.clock().touch();
            let _held = Held::<C>::enter();
            f(value)
        })
    }
}
