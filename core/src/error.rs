//! Errors, one enum per component.
//!
//! Every error carries the context a caller needs to act on it (the id, how long it waited) and
//! leaves the state of the component unchanged.

use std::fmt;
use std::time::Duration;

use crate::id::{InvalidId, ModelId};
use crate::runtime::Arc;

/// An error returned by user code (a loader or an unload), boxed.
pub type BoxError = Box<dyn std::error::Error + Send + Sync + 'static>;

/// A shareable user error, kept as the `source` of a component error.
#[derive(Clone)]
pub struct SourceError(Arc<dyn std::error::Error + Send + Sync + 'static>);

impl SourceError {
    /// Keeps `error` (a user's own) as the source of a component error, such as a layer's
    /// refusal ([`ManagerError::refused`]).
    /// (A [`BoxError`], as a loader returns: `Box::new(e)` or `e.into()` keeps `e` itself,
    /// so that [`SourceError::downcast_ref`] finds it.)
    pub fn new(error: BoxError) -> Self {
        Self(Arc::from(error))
    }

    /// The user's error, if it is an `E`.
    pub fn downcast_ref<E: std::error::Error + 'static>(&self) -> Option<&E> {
        self.0.downcast_ref::<E>()
    }
}

/// Two source errors are equal when they are the same error (shared, not merely alike).
impl PartialEq for SourceError {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }
}

impl Eq for SourceError {}

impl fmt::Debug for SourceError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&*self.0, f)
    }
}

impl fmt::Display for SourceError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&*self.0, f)
    }
}

impl std::error::Error for SourceError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.0.source()
    }
}

/// User code panicked where the library reports the panic instead of letting it unwind (an
/// `unload` inside [`ManagerExt::shutdown`](crate::ManagerExt::shutdown) or
/// [`ManagerExt::clear`](crate::ManagerExt::clear)): the source of the error that reports it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("user code panicked: {message}")]
pub struct UserPanic {
    /// The panic's message, when its payload was a string.
    pub message: String,
}

impl UserPanic {
    /// The panic whose payload is `payload` (its message when it is a `&str` or a `String`).
    pub(crate) fn from_payload(payload: &(dyn std::any::Any + Send)) -> Self {
        let message = payload
            .downcast_ref::<&str>()
            .map(|s| (*s).to_owned())
            .or_else(|| payload.downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "a non-string payload".to_owned());
        Self { message }
    }
}

/// Errors of the [`ModelManager`](crate::ModelManager).
#[derive(Debug, Clone, thiserror::Error)]
#[non_exhaustive]
pub enum ManagerError {
    /// The model is not registered under this resolved id.
    #[error("model `{id}` is not registered")]
    NotFound {
        /// The resolved id.
        id: ModelId,
    },
    /// The model is being removed; new leases are refused until the removal ends.
    #[error("model `{id}` is being removed")]
    Removing {
        /// The resolved id.
        id: ModelId,
    },
    /// The per-model lifecycle lock was not acquired in time. Nothing changed.
    #[error("timed out after {waited:?} waiting for the lifecycle lock of `{id}`")]
    LockTimeout {
        /// The resolved id.
        id: ModelId,
        /// The configured wait.
        waited: Duration,
    },
    /// Live leases did not end in time, so the model was not unloaded. Nothing changed.
    #[error("model `{id}` still had {leases} live lease(s) after {waited:?}")]
    Busy {
        /// The resolved id.
        id: ModelId,
        /// Leases still alive when the wait ended.
        leases: usize,
        /// The configured wait.
        waited: Duration,
    },
    /// The loader failed. Nothing was registered.
    #[error("loading `{id}` failed: {source}")]
    Load {
        /// The resolved id.
        id: ModelId,
        /// The loader's error.
        source: SourceError,
    },
    /// Unloading failed. The model stays registered and usable.
    #[error("unloading `{id}` failed; it stays registered: {source}")]
    Unload {
        /// The resolved id.
        id: ModelId,
        /// The model's error.
        source: SourceError,
    },
    /// A lifecycle guard was passed to a manager stack that did not hand it out.
    #[error("the lifecycle guard of `{id}` belongs to another manager")]
    ForeignGuard {
        /// The guard's resolved id.
        id: ModelId,
    },
    /// No model could be evicted to make room within the capacity in time. Nothing changed.
    #[error(
        "no room for `{id}`: {registered} registered and {loading} loading of {max_size}, none evictable after {waited:?}"
    )]
    CapacityExhausted {
        /// The resolved id that needed room.
        id: ModelId,
        /// Registered models at the end of the wait.
        registered: usize,
        /// Cold loads in flight at the end of the wait.
        loading: usize,
        /// The configured capacity.
        max_size: usize,
        /// The configured wait.
        waited: Duration,
    },
    /// The manager is shut down ([`ManagerExt::shutdown`](crate::ManagerExt::shutdown)): it refuses
    /// new adds and leases. Nothing changed.
    #[error("the manager is shut down: `{id}` was refused")]
    ShutDown {
        /// The resolved id of the refused call.
        id: ModelId,
    },
    /// A lowered capacity could not be reached in time: what is still registered (in LRU
    /// order) was pinned, in use or being changed throughout the wait. The new capacity holds
    /// for every later admission.
    #[error(
        "still over max_size {max_size} after {waited:?}: {held:?} registered (pinned, in use or busy) and {loading} loading"
    )]
    OverLimit {
        /// The new capacity.
        max_size: usize,
        /// The registered resolved ids, least recently used first.
        held: Vec<ModelId>,
        /// Cold loads in flight.
        loading: usize,
        /// The bound the wait had.
        waited: Duration,
    },
    /// A [`ManagerExt::replace`](crate::ManagerExt::replace) through a `FixedSizeCache` that can
    /// never hold the new version beside the old one: `max_size` leaves no slot once the old
    /// version and the pinned models are counted (a cache of one, or every other model
    /// pinned). Refused at once; nothing changed, the old version serves on. Unpin a model or
    /// raise `max_size` to replace, or remove and add.
    #[error(
        "replacing `{id}` needs a slot beside its old version: max_size {max_size} holds it and the pinned {pinned:?}"
    )]
    NoSlotBeside {
        /// The resolved id.
        id: ModelId,
        /// The cache's `max_size`.
        max_size: usize,
        /// The other models pinned in the cache (or below it).
        pinned: Vec<ModelId>,
    },
    /// [`ManagerExt::register`](crate::ManagerExt::register) of an id that is already registered:
    /// nothing changed (the model comes back in the [`RegisterError`]).
    #[error("model `{id}` is already registered")]
    AlreadyRegistered {
        /// The resolved id.
        id: ModelId,
    },
    /// A configuration value was refused; nothing changed.
    #[error(transparent)]
    InvalidConfig(#[from] InvalidConfig),
    /// A model id or alias was refused.
    #[error(transparent)]
    InvalidId(#[from] InvalidId),
    /// A layer of the application's own refused the call, with its own reason
    /// ([`ManagerError::refused`]); what it guards below it did not run.
    #[error("`{id}` was refused by {layer}: {source}")]
    Refused {
        /// The resolved id of the refused call.
        id: ModelId,
        /// The layer that refused it (its name, as it gives it).
        layer: &'static str,
        /// Why: the layer's own error.
        source: SourceError,
    },
}

impl ManagerError {
    /// The refusal of a call on `id` by the user layer `layer`, for the reason `why` (the
    /// layer's own error, boxed as a loader's are, kept as the source:
    /// [`SourceError::downcast_ref`] reads it back).
    ///
    /// ```
    /// use resident::{ManagerError, ModelId};
    /// #[derive(Debug, thiserror::Error)]
    /// #[error("maintenance until 02:00")]
    /// struct Maintenance;
    /// let error = ManagerError::refused(ModelId::new("a")?, "Gate", Box::new(Maintenance));
    /// assert_eq!(error.to_string(), "`a` was refused by Gate: maintenance until 02:00");
    /// let ManagerError::Refused { source, .. } = &error else { unreachable!() };
    /// assert!(source.downcast_ref::<Maintenance>().is_some());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn refused(id: ModelId, layer: &'static str, why: BoxError) -> Self {
        Self::Refused { id, layer, source: SourceError::new(why) }
    }
}

/// A [`ManagerExt::register`](crate::ManagerExt::register) that was refused: why, and the model,
/// handed back unregistered (nothing changed). `?` turns it into its [`ManagerError`],
/// dropping the model.
#[derive(thiserror::Error)]
#[error("the model was not registered")]
pub struct RegisterError<M> {
    /// Why it was refused (`AlreadyRegistered`, `ShutDown`, `LockTimeout`, a cache's
    /// `CapacityExhausted`, `InvalidId`, ...).
    #[source]
    pub error: ManagerError,
    /// The model, back with its caller.
    pub model: M,
}

impl<M> RegisterError<M> {
    pub(crate) fn new(error: impl Into<ManagerError>, model: M) -> Self {
        Self { error: error.into(), model }
    }
}

impl<M> fmt::Debug for RegisterError<M> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RegisterError").field("error", &self.error).finish_non_exhaustive()
    }
}

impl<M> From<RegisterError<M>> for ManagerError {
    fn from(refused: RegisterError<M>) -> Self {
        refused.error
    }
}

/// A configuration value was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid configuration: `{field}` {reason}")]
pub struct InvalidConfig {
    /// The refused field.
    pub field: &'static str,
    /// Why it was refused.
    pub reason: &'static str,
}

/// Errors of the shared-weight cache ([`DeviceCache`](crate::cache::DeviceCache)).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum CacheError {
    /// The model is larger than the whole budget; refused before admission.
    #[error("`{key}` needs {bytes} bytes; the whole budget is {cap}")]
    TooLarge {
        /// The key.
        key: String,
        /// The model's bytes.
        bytes: u64,
        /// The budget's cap.
        cap: u64,
    },
    /// The device copies of locked records (and moves in flight) leave no room for this one on
    /// the device, and none was made within the cache's move wait.
    #[error("no device room for `{key}`: needs {needed} bytes, {used} of {budget} held by locked copies")]
    DeviceFull {
        /// The key.
        key: String,
        /// Device bytes the copy needs.
        needed: u64,
        /// The cache's device budget.
        budget: u64,
        /// Device bytes in use that could not be offloaded.
        used: u64,
    },
    /// Moving the weights to the device failed; the record stays resident on the CPU.
    #[error("moving `{key}` to the device failed: {source}")]
    DeviceMove {
        /// The key.
        key: String,
        /// The mover's error ([`DeviceWeights::to_device`](crate::cache::DeviceWeights::to_device)'s own).
        #[source]
        source: SourceError,
    },
    /// A lowered RAM cap could not be reached in time: records in use (locked, held or being
    /// admitted) and reservations of loads kept the bytes over it. The new cap holds for every
    /// later reservation.
    #[error("still {in_use} bytes in use and {reserved} reserved, over the new cap {cap}, after {waited:?}")]
    OverCap {
        /// The new cap.
        cap: u64,
        /// Bytes in use when it gave up.
        in_use: u64,
        /// Bytes reserved when it gave up.
        reserved: u64,
        /// The bound the wait had.
        waited: Duration,
    },
    /// A lowered device budget could not be reached in time: the copies of locked records (and
    /// moves in flight) kept the device bytes over it. The new budget holds for every later
    /// placement, and each unlock lets a placement offload the copy it needs room from.
    #[error(
        "device `{device}`: still {used} device bytes counted, over the new budget {budget}, after {waited:?}; locked: {locked:?}"
    )]
    DeviceOverBudget {
        /// The cache's device.
        device: String,
        /// The new device budget.
        budget: u64,
        /// Device bytes counted when it gave up: live copies and moves in flight, including
        /// copies no slot holds (used through a detached record, or offloaded and being
        /// dropped).
        used: u64,
        /// The keys whose copies were locked or moving then.
        locked: Vec<String>,
        /// The bound the wait had.
        waited: Duration,
    },
    /// A configuration value was refused; nothing changed.
    #[error(transparent)]
    InvalidConfig(#[from] InvalidConfig),
    /// The cache was shut down: a prefetch (an admission nobody retrieves) is refused, and so
    /// is every [`DeviceCache::get_or_put`](crate::cache::DeviceCache::get_or_put) once its
    /// group was shut down, and any load or `put` that would wait for RAM room then.
    #[error("the cache is shut down; `{key}` refused")]
    ShutDown {
        /// The key.
        key: String,
    },
    /// Another thread's move of this record to the device did not finish in time. Nothing
    /// changed; the record stays resident on the CPU.
    #[error("timed out after {waited:?} waiting for another move of `{key}` to the device")]
    DeviceMoveTimeout {
        /// The key.
        key: String,
        /// The cache's move wait.
        waited: Duration,
    },
    /// A cache key was refused (keys follow the model-id rules; a `:sub` suffix names a
    /// submodel).
    #[error("invalid cache key: {source}")]
    InvalidKey {
        /// Why the key was refused.
        #[from]
        source: InvalidId,
    },
    /// A byte count would overflow the budget's or the device's sums; refused with nothing
    /// changed.
    #[error("`{key}`: {bytes} more bytes would overflow the {what}")]
    SizeOverflow {
        /// The key.
        key: String,
        /// The bytes that were to be added.
        bytes: u64,
        /// Which sum would overflow (`RAM budget`, `device budget`).
        what: &'static str,
    },
    /// The load of [`DeviceCache::get_or_put`](crate::cache::DeviceCache::get_or_put) failed;
    /// nothing was admitted.
    #[error("loading `{key}` failed: {source}")]
    Load {
        /// The key.
        key: String,
        /// The loader's error.
        #[source]
        source: SourceError,
    },
    /// The hard RAM budget had no room for a load within its room wait: nothing evictable was
    /// left and nothing was released in time. Nothing was loaded or admitted.
    #[error(
        "no room for `{key}`: needs {needed} bytes; {in_use} in use and {reserved} reserved of {cap} after {waited:?}; held by: {holders}"
    )]
    NoRoom {
        /// The key.
        key: String,
        /// The bytes the load needed.
        needed: u64,
        /// The budget's cap.
        cap: u64,
        /// Bytes in use when it gave up.
        in_use: u64,
        /// Bytes reserved by other loads when it gave up.
        reserved: u64,
        /// The budget's room wait.
        waited: Duration,
        /// The records no eviction could take (key, bytes, locked/held/admitting, device).
        holders: String,
    },
    /// A load whose size nobody declared: a hard budget cannot reserve room for it. Nothing was
    /// loaded.
    #[error("`{key}` declares no size; the hard RAM budget cannot reserve room for it")]
    SizeUnknown {
        /// The key.
        key: String,
    },
    /// The source of `key` changed under the load again and again: every version read was
    /// outdated by the time it was admitted. Nothing stays admitted; a later load tries again.
    #[error("the source of `{key}` changed under {rounds} loads in a row")]
    SourceChanged {
        /// The key.
        key: String,
        /// How many versions were read.
        rounds: usize,
    },
    /// Another device's load of the same key did not end within the group's load wait.
    #[error("timed out after {waited:?} waiting for another load of `{key}`")]
    LoadWaitTimeout {
        /// The key.
        key: String,
        /// The configured wait.
        waited: Duration,
    },
}

impl CacheError {
    /// Whether this error is the expiry of a bounded wait (for room, for another device's
    /// load, for device room or another move), not a failure of the load itself. A manager
    /// never shares such an error with the other callers of a load, nor remembers it
    /// (SPEC 1.9): the wait was the caller's.
    ///
    /// A copy larger than the whole device budget is `DeviceFull` at once and for good: not an
    /// expiry, so it is shared like any failure of the load.
    pub fn is_wait_expiry(&self) -> bool {
        match self {
            CacheError::NoRoom { .. }
            | CacheError::LoadWaitTimeout { .. }
            | CacheError::DeviceMoveTimeout { .. } => true,
            CacheError::DeviceFull { needed, budget, .. } => needed <= budget,
            _ => false,
        }
    }
}

impl ManagerError {
    /// Whether this error is the expiry of a bounded wait (a lifecycle lock, a lease drain,
    /// capacity), not a failure of a load or an unload.
    pub fn is_wait_expiry(&self) -> bool {
        matches!(
            self,
            ManagerError::LockTimeout { .. }
                | ManagerError::Busy { .. }
                | ManagerError::CapacityExhausted { .. }
        )
    }
}

/// Whether `error`, or any error in its source chain, is the expiry of a bounded wait of
/// this crate ([`CacheError::is_wait_expiry`], [`ManagerError::is_wait_expiry`]).
pub(crate) fn is_wait_expiry(error: &(dyn std::error::Error + 'static)) -> bool {
    let mut next = Some(error);
    while let Some(error) = next {
        let expired = error.downcast_ref::<CacheError>().is_some_and(CacheError::is_wait_expiry)
            || error.downcast_ref::<ManagerError>().is_some_and(ManagerError::is_wait_expiry)
            || error.downcast_ref::<SourceError>().is_some_and(|e| is_wait_expiry(&*e.0));
        if expired {
            return true;
        }
        next = error.source();
    }
    false
}
