//! [`Traced`]: a passthrough decorator that emits a `tracing` span for every operation, with
//! all of its arguments (upstream's logger decorator dropped some).

use tracing::Span;

use crate::deadline::Deadline;
use crate::error::{ManagerError, RegisterError};
use crate::held::Held;
use crate::id::ModelId;
use crate::manager::{Added, Lease, LifecycleGuard, Replaced};
use crate::manager::{Eviction, Manager};
use crate::mutants::Mutant;
use crate::runtime::Runtime;

use super::Decorator;

/// Wraps any [`Manager`] and traces every call, then forwards it unchanged.
///
/// A subscriber is user code (SPEC 3.10): a call that panics (its loader, `unload` or a
/// model's `Drop` did) leaves its span once the panic is caught, and the panic goes on after,
/// so a subscriber that panics as the span is exited does not do so in that unwind (which
/// aborts the process).
#[derive(Debug)]
pub struct Traced<M> {
    inner: M,
}

impl<M: Manager> Traced<M> {
    /// Wraps `inner`.
    pub fn new(inner: M) -> Self {
        Self { inner }
    }

    /// The wrapped manager.
    pub fn get_ref(&self) -> &M {
        &self.inner
    }

    /// Unwraps the manager.
    pub fn into_inner(self) -> M {
        self.inner
    }

    /// A call's result, held across its report (user code): a panicking subscriber drops it
    /// under a catch, and the user's error in it with it (not under the
    /// `user-error-dropped-in-unwind` mutant).
    fn held<T>(&self, result: T) -> Held<T, M::Runtime> {
        Held::new(result, !self.inner.runtime().mutant(Mutant::USER_ERROR_DROPPED_IN_UNWIND))
    }

    /// Runs `call` inside `span`, and leaves the span outside any unwind: a panic of `call` is
    /// caught, the span exited and closed (subscriber calls), then the panic goes on. A panic
    /// of the subscriber there goes on once what `call` returned is dropped (a lease, a model:
    /// user code that must not run in that unwind); in an unwind of the caller's own (a layer's
    /// `Drop` calling through this one) it is dropped instead, as one leaving a `Drop` then
    /// aborts the process.
    fn within<T>(&self, span: Span, call: impl FnOnce() -> T) -> T {
        // Nothing to enter or leave: no catch on the hot path without a subscriber.
        if span.is_disabled() {
            return call();
        }
        let entered = span.entered();
        // M-P2u's mutant: tracing's guard exits the span in the unwind.
        if self.inner.runtime().mutant(Mutant::SPAN_EXITED_IN_UNWIND) {
            let _entered = entered;
            return call();
        }
        let returned = <M::Runtime as Runtime>::catch_unwind(call);
        let left = <M::Runtime as Runtime>::catch_unwind(move || drop(entered));
        match (returned, left) {
            (Err(payload), _) => <M::Runtime as Runtime>::resume_caught(payload),
            (Ok(value), Ok(())) => value,
            (Ok(value), Err(_)) if <M::Runtime as Runtime>::panicking() => value,
            (Ok(value), Err(payload)) => {
                drop(value);
                <M::Runtime as Runtime>::resume_caught(payload)
            }
        }
    }
}

impl<M: Manager> Decorator for Traced<M> {
    type Inner = M;

    fn inner(&self) -> &M {
        &self.inner
    }

    fn lock_until(
        &self,
        id: &ModelId,
        deadline: Deadline,
    ) -> Result<LifecycleGuard<M::Model, M::Runtime>, ManagerError> {
        self.within(tracing::debug_span!("lock", %id), || {
            let result = self.inner.lock_until(id, deadline);
            tracing::debug!(ok = result.is_ok(), "lock done");
            result
        })
    }

    /// No span while the thread unwinds: a layer's settle guard tries locks from its `Drop`.
    fn try_lock(&self, id: &ModelId) -> Option<LifecycleGuard<M::Model, M::Runtime>> {
        if <M::Runtime as Runtime>::panicking() {
            return self.inner.try_lock(id);
        }
        self.within(tracing::debug_span!("try_lock", %id), || self.inner.try_lock(id))
    }

    fn add_locked(
        &self,
        guard: &LifecycleGuard<M::Model, M::Runtime>,
        canonical: &ModelId,
    ) -> Result<Added, ManagerError> {
        self.within(tracing::debug_span!("add_model", id = %guard.id(), %canonical), || {
            let result = self.held(self.inner.add_locked(guard, canonical));
            tracing::debug!(result = ?result.get(), "add_model done");
            result.into_inner()
        })
    }

    fn replace_locked(
        &self,
        guard: &LifecycleGuard<M::Model, M::Runtime>,
        canonical: &ModelId,
    ) -> Result<Replaced, ManagerError> {
        self.within(tracing::debug_span!("replace", id = %guard.id(), %canonical), || {
            let result = self.held(self.inner.replace_locked(guard, canonical));
            tracing::debug!(result = ?result.get(), "replace done");
            result.into_inner()
        })
    }

    fn replace_in_place_locked(
        &self,
        guard: &LifecycleGuard<M::Model, M::Runtime>,
        canonical: &ModelId,
    ) -> Result<Replaced, ManagerError> {
        self.within(tracing::debug_span!("replace_in_place", id = %guard.id(), %canonical), || {
            let result = self.held(self.inner.replace_in_place_locked(guard, canonical));
            tracing::debug!(result = ?result.get(), "replace in place done");
            result.into_inner()
        })
    }

    fn remove_locked(&self, guard: &LifecycleGuard<M::Model, M::Runtime>) -> Result<(), ManagerError> {
        self.within(tracing::debug_span!("remove", id = %guard.id()), || {
            let result = self.held(self.inner.remove_locked(guard));
            tracing::debug!(result = ?result.get(), "remove done");
            result.into_inner()
        })
    }

    fn lease_until(&self, id: &str, deadline: Deadline) -> Result<Lease<M::Model, M::Runtime>, ManagerError> {
        self.within(tracing::trace_span!("lease", id), || self.inner.lease_until(id, deadline))
    }

    fn evict_locked(&self, guard: &LifecycleGuard<M::Model, M::Runtime>) -> Result<Eviction, ManagerError> {
        self.within(tracing::debug_span!("evict", id = %guard.id()), || {
            let result = self.held(self.inner.evict_locked(guard));
            tracing::debug!(result = ?result.get(), "evict done");
            result.into_inner()
        })
    }

    fn register_locked(
        &self,
        guard: &LifecycleGuard<M::Model, M::Runtime>,
        model: M::Model,
    ) -> Result<(), RegisterError<M::Model>> {
        self.within(tracing::debug_span!("register", id = %guard.id()), || {
            // Held across the report (user code): a refused model comes back in it.
            let guarded = !self.inner.runtime().mutant(Mutant::REGISTERED_MODEL_DROPPED_IN_UNWIND);
            let result = Held::<_, M::Runtime>::new(self.inner.register_locked(guard, model), guarded);
            tracing::debug!(
                error = result.get().as_ref().err().map(|e| tracing::field::display(&e.error)),
                "register done"
            );
            result.into_inner()
        })
    }

    fn pin_locked(&self, guard: &LifecycleGuard<M::Model, M::Runtime>) -> Result<(), ManagerError> {
        self.within(tracing::debug_span!("pin", id = %guard.id()), || self.inner.pin_locked(guard))
    }

    fn unpin_locked(&self, guard: &LifecycleGuard<M::Model, M::Runtime>) -> Result<(), ManagerError> {
        self.within(tracing::debug_span!("unpin", id = %guard.id()), || self.inner.unpin_locked(guard))
    }
}
