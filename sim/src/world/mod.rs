//! [`World`]: what every scenario runs in, for either half of the sim — the execution's runtime
//! and the half under test: a manager stack with the probe of its scripted loader
//! ([`ManagerWorld`](crate::world::manager::ManagerWorld)), or the peer caches of one group with
//! their scripted weights ([`CacheWorld`](crate::world::cache::CacheWorld)). The production
//! composition holds a cache world and one manager stack per device.

pub mod cache;
pub mod checks;
pub mod composition;
pub mod mailbox;
pub mod manager;

use std::ops::Deref;

use resident::runtime::Arc;

use crate::runtime::SimRuntime;
use crate::trace;
use crate::violation::InjectedPanic;

/// A scenario's world: the runtime, and the half of the sim under test (reached through
/// `Deref`, so `world.manager`, `world.probe`, `world.group` and `world.caches` read as fields).
pub struct World<R: SimRuntime, S> {
    /// The execution's runtime.
    pub rt: R,
    half: Arc<S>,
}

impl<R: SimRuntime, S: Send + Sync + 'static> World<R, S> {
    /// A world of `half` on `rt`.
    pub fn of(rt: R, half: S) -> Self {
        Self { rt, half: Arc::new(half) }
    }

    /// Spawns a named scenario thread that gets the half under test.
    pub fn spawn<T, F>(&self, name: &'static str, f: F) -> R::Handle<T>
    where
        T: Send + 'static,
        F: FnOnce(&S, &'static str) -> T + Send + 'static,
    {
        let half = Arc::clone(&self.half);
        self.rt.spawn(name, move || f(&half, name))
    }
}

impl<R: SimRuntime, S> Deref for World<R, S> {
    type Target = S;

    fn deref(&self) -> &S {
        &self.half
    }
}

/// Panics with [`InjectedPanic`] unless the thread is already unwinding, where the sim's own
/// panic would abort the process: then production's would abort it too (a `Drop` panicking in
/// an unwind), an `abort` violation, unless a catch entered during that unwind encloses it.
/// Where the checker cannot tell (under loom), `unknown_aborts` says which way to err.
pub(crate) fn inject_panic(what: &str, unknown_aborts: bool) {
    if !crate::unwinding::panicking() {
        std::panic::panic_any(InjectedPanic);
    }
    if crate::unwinding::abort_verdict().unwrap_or(unknown_aborts) {
        crate::violation::Violation::record(
            "abort",
            format!("{what}, which panics, ran while its thread unwinds"),
        );
    }
}

/// Joins a thread spawned on the execution's runtime and returns its result; a panic in it
/// goes on unwinding in the joining thread (the execution fails with it).
pub fn join<R: SimRuntime, T: Send + 'static>(handle: R::Handle<T>) -> T {
    R::join(handle).unwrap_or_else(|payload| crate::unwinding::resume(payload))
}

/// Runs `f`, records its outcome in the trace under `thread`, and returns it.
pub fn traced<T: std::fmt::Debug>(thread: &str, op: &str, f: impl FnOnce() -> T) -> T {
    // `f` is called at one place: each scenario operation's body is compiled once.
    let capture = trace::capturing();
    if capture {
        trace::record(thread, format!("{op} ..."));
    }
    let out = f();
    if capture {
        trace::record(thread, format!("{op} -> {out:?}"));
    }
    out
}
