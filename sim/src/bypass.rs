//! The calls users make, as the historical stacks made them: [`Calls`] and the methods of
//! [`Managed`] that scenario threads call.
//!
//! `resident`'s own calls are [`ManagerExt`]'s, implemented once for every stack, so no layer
//! can go around the lock protocol any more. The historical bugs that did — a cache's warm path
//! that answered without the id's lifecycle lock, a rollback that dropped every queue entry of
//! an id, a warm touch after the lock's release, a pin or unpin that updated a cache outside
//! the lock, a clear that went straight to the base or dropped the pins, a pin whose wait
//! ignored the call's deadline, a registration forwarded without admission — live here, over the real stack: each is the body a layer used
//! to override its call with, switched on by the same [`Mutant`] name as ever, and reaching a
//! cache's bookkeeping only through its one hidden door
//! ([`FixedSizeCache::around_the_protocol`]). With no such switch on, every call is exactly
//! [`ManagerExt`]'s.

use resident::mutants::Mutant;
use resident::runtime::Runtime;
use resident::{
    Added, CallOptions, Deadline, FixedSizeCache, LifecycleGuard, Loader, Manager, ManagerError, ManagerExt,
    ModelId, ModelManager, RegisterError, RemovalReport, Traced,
};

use crate::runtime::SimRuntime;
use crate::world::manager::Managed;

/// A stack's user calls with the historical bypasses of its layers (see the module docs).
pub trait Calls: Manager {
    /// [`ManagerExt::add_model_with`], or a layer's historical shortcut around it.
    fn call_add(&self, id: &str, alias: Option<&str>, options: CallOptions) -> Result<Added, ManagerError> {
        self.add_model_with(id, alias, options)
    }

    /// [`ManagerExt::pin_with`], or a layer's historical pin.
    fn call_pin(&self, id: &str, options: CallOptions) -> Result<(), ManagerError> {
        pin_ignoring_deadline(self, id, options)
    }

    /// [`ManagerExt::unpin_with`], or a layer's historical unpin.
    fn call_unpin(&self, id: &str, options: CallOptions) -> Result<(), ManagerError> {
        self.unpin_with(id, options)
    }

    /// [`ManagerExt::clear_with`], or a layer's historical clear.
    fn call_clear(&self, options: CallOptions) -> RemovalReport {
        self.clear_with(options)
    }

    /// [`ManagerExt::register_with`], or a layer's historical registration.
    fn call_register(
        &self,
        id: &str,
        model: Self::Model,
        options: CallOptions,
    ) -> Result<(), RegisterError<Self::Model>> {
        self.register_with(id, model, options)
    }

    /// [`Manager::register_locked`], or a layer's historical shortcut around its admission.
    fn call_register_locked(
        &self,
        guard: &LifecycleGuard<Self::Model, Self::Runtime>,
        model: Self::Model,
    ) -> Result<(), RegisterError<Self::Model>> {
        self.register_locked(guard, model)
    }
}

/// `deadline-skips-pin`: the pin's wait for the lifecycle lock has the configured timeout only.
fn pin_ignoring_deadline<M: Manager + ?Sized>(
    stack: &M,
    id: &str,
    options: CallOptions,
) -> Result<(), ManagerError> {
    if !stack.runtime().mutant(Mutant::DEADLINE_SKIPS_PIN) {
        return stack.pin_with(id, options);
    }
    let id = ModelId::new(id)?;
    // Read as the call reads it, then ignored.
    let _ignored = options.deadline(stack.runtime());
    let guard = stack.lock_until(&id, Deadline::NONE)?;
    stack.pin_locked(&guard)
}

/// The base keeps no pins: its pin never had a historical body.
impl<L: Loader, R: Runtime> Calls for ModelManager<L, R> {
    fn call_pin(&self, id: &str, options: CallOptions) -> Result<(), ManagerError> {
        self.pin_with(id, options)
    }
}

impl<M: Calls> Calls for Traced<M> {}

impl<M: Calls> Calls for FixedSizeCache<M> {
    fn call_add(&self, id: &str, alias: Option<&str>, options: CallOptions) -> Result<Added, ManagerError> {
        let rt = self.runtime();
        let Ok(resolved) = ModelId::new(alias.unwrap_or(id)) else {
            return self.add_model_with(id, alias, options);
        };
        let around = self.around_the_protocol();
        if rt.mutant(Mutant::UNLOCKED_WARM_PATH) && self.get_ref().contains(resolved.as_str()) {
            around.touch(&resolved);
            return Ok(Added::Warm);
        }
        let queued_early = rt.mutant(Mutant::ROLLBACK_REMOVES_ALL);
        if queued_early {
            around.enqueue(&resolved);
        }
        let result = self.add_model_with(id, alias, options);
        // With the switch on, the warm path under the lock left the touch to here.
        if rt.mutant(Mutant::WARM_TOUCH_OUTSIDE_LOCK) && matches!(result, Ok(Added::Warm)) {
            around.touch_appending(&resolved);
        }
        if queued_early && result.is_err() {
            around.dequeue_all(&resolved);
        }
        result
    }

    fn call_pin(&self, id: &str, options: CallOptions) -> Result<(), ManagerError> {
        if self.runtime().mutant(Mutant::PIN_UNORDERED) {
            let resolved = ModelId::new(id)?;
            self.get_ref().call_pin(id, options)?;
            self.around_the_protocol().pin(&resolved);
            return Ok(());
        }
        pin_ignoring_deadline(self, id, options)
    }

    fn call_unpin(&self, id: &str, options: CallOptions) -> Result<(), ManagerError> {
        if self.runtime().mutant(Mutant::UNPIN_UNORDERED) {
            let resolved = ModelId::new(id)?;
            self.get_ref().call_unpin(id, options)?;
            self.around_the_protocol().unpin(&resolved);
            self.changes().bump();
            return Ok(());
        }
        self.unpin_with(id, options)
    }

    /// With `register-unadmitted`, the registration's step through each layer is
    /// [`Calls::call_register_locked`].
    fn call_register(
        &self,
        id: &str,
        model: Self::Model,
        options: CallOptions,
    ) -> Result<(), RegisterError<Self::Model>> {
        if !self.runtime().mutant(Mutant::REGISTER_UNADMITTED) {
            return self.register_with(id, model, options);
        }
        let locked = ModelId::new(id)
            .map_err(ManagerError::from)
            .and_then(|id| self.lock_until(&id, options.deadline(self.runtime())));
        match locked {
            Ok(guard) => self.call_register_locked(&guard, model),
            Err(error) => Err(RegisterError { error, model }),
        }
    }

    /// `register-unadmitted` (S-RG1): the cache forwards the registration without admission
    /// (`max_size` does not hold) and queues what got registered.
    fn call_register_locked(
        &self,
        guard: &LifecycleGuard<Self::Model, Self::Runtime>,
        model: Self::Model,
    ) -> Result<(), RegisterError<Self::Model>> {
        if !self.runtime().mutant(Mutant::REGISTER_UNADMITTED) {
            return self.register_locked(guard, model);
        }
        let registered = self.get_ref().call_register_locked(guard, model);
        if registered.is_ok() {
            self.around_the_protocol().push(guard.id());
        }
        registered
    }

    fn call_clear(&self, options: CallOptions) -> RemovalReport {
        if self.runtime().mutant(Mutant::CLEAR_BYPASSES_LAYERS) {
            return self.get_ref().call_clear(options);
        }
        let report = self.clear_with(options);
        if self.runtime().mutant(Mutant::CLEAR_DROPS_PINS) {
            self.around_the_protocol().drop_pins();
        }
        report
    }
}

/// What a scenario thread calls: the stack's [`Calls`] under [`ManagerExt`]'s names (every
/// other call reaches the stack through `Deref`).
impl<R: SimRuntime, S: Calls> Managed<R, S> {
    /// [`ManagerExt::add_model`].
    pub fn add_model(&self, id: &str, alias: Option<&str>) -> Result<Added, ManagerError> {
        self.manager.call_add(id, alias, CallOptions::new())
    }

    /// [`ManagerExt::add_model_with`].
    pub fn add_model_with(
        &self,
        id: &str,
        alias: Option<&str>,
        options: CallOptions,
    ) -> Result<Added, ManagerError> {
        self.manager.call_add(id, alias, options)
    }

    /// [`ManagerExt::pin`].
    pub fn pin(&self, id: &str) -> Result<(), ManagerError> {
        self.manager.call_pin(id, CallOptions::new())
    }

    /// [`ManagerExt::pin_with`].
    pub fn pin_with(&self, id: &str, options: CallOptions) -> Result<(), ManagerError> {
        self.manager.call_pin(id, options)
    }

    /// [`ManagerExt::unpin`].
    pub fn unpin(&self, id: &str) -> Result<(), ManagerError> {
        self.manager.call_unpin(id, CallOptions::new())
    }

    /// [`ManagerExt::unpin_with`].
    pub fn unpin_with(&self, id: &str, options: CallOptions) -> Result<(), ManagerError> {
        self.manager.call_unpin(id, options)
    }

    /// [`ManagerExt::clear`].
    pub fn clear(&self) -> RemovalReport {
        self.manager.call_clear(CallOptions::new())
    }

    /// [`ManagerExt::clear_with`].
    pub fn clear_with(&self, options: CallOptions) -> RemovalReport {
        self.manager.call_clear(options)
    }

    /// [`ManagerExt::register`].
    pub fn register(&self, id: &str, model: S::Model) -> Result<(), RegisterError<S::Model>> {
        self.manager.call_register(id, model, CallOptions::new())
    }

    /// [`ManagerExt::register_with`].
    pub fn register_with(
        &self,
        id: &str,
        model: S::Model,
        options: CallOptions,
    ) -> Result<(), RegisterError<S::Model>> {
        self.manager.call_register(id, model, options)
    }
}
