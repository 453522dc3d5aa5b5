//! Per-call deadlines (SPEC 1.10): one bound on every wait inside a call.
//!
//! Each wait of this crate has a configured timeout of its own (the lifecycle lock, a lease
//! drain, room in a cache, room in a budget, another device's load). A request with a budget of
//! its own passes [`CallOptions`] to the options form of a call (`add_model_with`,
//! `remove_with`, `lease_with`, `infer_with`, `get_or_put_with`); the call turns it into a
//! [`Deadline`] on the runtime's clock when it starts, and every wait inside it then waits at
//! most the tighter of its configured timeout and the time left. A wait that runs out returns
//! the error of that wait ([`ManagerError::LockTimeout`](crate::ManagerError::LockTimeout),
//! [`Busy`](crate::ManagerError::Busy),
//! [`CapacityExhausted`](crate::ManagerError::CapacityExhausted),
//! [`CacheError::NoRoom`](crate::CacheError::NoRoom), …), whose `waited` is the bound it had,
//! and leaves everything as it was: reservations, claims and slots are released by the guards
//! that hold them.

use std::time::Duration;

use crate::mutants::Mutant;
use crate::runtime::Runtime;

/// Options of one call: how long, in total, its waits may take.
///
/// ```
/// use std::time::Duration;
/// use resident::{BoxError, CallOptions, Loader, Manager, ManagerExt, Model, ModelId, ModelManager};
/// # struct M; impl Model for M { fn size_bytes(&self) -> u64 { 1 } }
/// # struct L; impl Loader for L { type Model = M; fn load(&self, _: &ModelId) -> Result<M, BoxError> { Ok(M) } }
/// let manager = ModelManager::new(L);
/// let within = CallOptions::new().with_timeout(Duration::from_millis(200));
/// manager.add_model_with("detector", None, within)?;
/// let bytes = manager.infer_with("detector", within, |m| m.size_bytes())?;
/// assert_eq!(bytes, 1);
/// manager.remove_with("detector", within)?;
/// # Ok::<(), resident::ManagerError>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct CallOptions {
    timeout: Option<Duration>,
}

impl CallOptions {
    /// No bound of the call's own: each wait has its configured timeout.
    pub const fn new() -> Self {
        Self { timeout: None }
    }

    /// Bounds the call's waits, together, to `timeout` from the call's start. Zero: never
    /// wait (a wait that cannot end at once fails at once). A time too long to represent is
    /// no bound of the call's own.
    pub const fn with_timeout(mut self, timeout: Duration) -> Self {
        self.timeout = Some(timeout);
        self
    }

    /// The call's own bound, if any.
    pub const fn timeout(&self) -> Option<Duration> {
        self.timeout
    }

    /// The deadline of a call that starts now on `runtime`'s clock.
    pub fn deadline<R: Runtime>(&self, runtime: &R) -> Deadline {
        self.timeout.map_or(Deadline::NONE, |timeout| Deadline::after(runtime, timeout))
    }
}

/// The point on a runtime's clock by which a call must be done waiting; what a call passes
/// down to the waits inside it (through a [`LifecycleGuard`](crate::LifecycleGuard), to a
/// [`Loader`](crate::Loader), to a cache).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Deadline {
    at: Option<Duration>,
}

impl Deadline {
    /// No deadline: every wait has its configured timeout.
    pub const NONE: Self = Self { at: None };

    /// `timeout` from now on `runtime`'s clock (no deadline if that is too far to represent).
    pub fn after<R: Runtime>(runtime: &R, timeout: Duration) -> Self {
        Self { at: runtime.now().checked_add(timeout) }
    }

    /// The deadline on the runtime's clock, if any.
    pub const fn at(&self) -> Option<Duration> {
        self.at
    }

    /// The bound of a wait configured to last at most `configured` that starts now: the tighter
    /// of it and the time left (zero once the deadline has passed). `site` names the wait for
    /// its mutant, which ignores the deadline there.
    pub(crate) fn bound<R: Runtime>(&self, runtime: &R, configured: Duration, site: Mutant) -> Duration {
        match self.at {
            Some(at) if !runtime.mutant(site) => configured.min(at.saturating_sub(runtime.now())),
            _ => configured,
        }
    }
}
