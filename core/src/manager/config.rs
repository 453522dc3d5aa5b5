//! Manager configuration, validated when the manager is built.

use std::time::Duration;

use crate::error::InvalidConfig;

/// Timeouts of a [`ModelManager`](crate::ModelManager).
///
/// As everywhere in this crate, a timeout too long to represent as a deadline
/// (`Duration::MAX`, say) means "wait without bound"; no call ever overflows on it. A zero
/// timeout is refused.
///
/// ```
/// use std::time::Duration;
/// use resident::ManagerConfig;
/// let config = ManagerConfig::default().with_lock_timeout(Duration::from_secs(5));
/// assert!(config.validate().is_ok());
/// assert!(config.with_lease_drain_timeout(Duration::ZERO).validate().is_err());
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ManagerConfig {
    lock_timeout: Duration,
    lease_drain_timeout: Duration,
    failure_cache: Option<Duration>,
}

impl ManagerConfig {
    /// Longest wait for a model's lifecycle lock (default 60 s, as upstream).
    pub fn lock_timeout(&self) -> Duration {
        self.lock_timeout
    }

    /// Longest wait, during `remove`, for live leases to end (default 30 s).
    pub fn lease_drain_timeout(&self) -> Duration {
        self.lease_drain_timeout
    }

    /// How long a failed load is remembered for new callers (default: not at all).
    ///
    /// Callers that were waiting for a load share its failure whatever this is (SPEC 1.9).
    /// With a time set, a caller that arrives later still gets the same error without loading,
    /// until that time has passed on the runtime's clock since the failure (or a load of the id
    /// succeeded): a short negative cache that keeps a stampede on a broken model file from
    /// reading it again and again. A time too long to represent means until the manager is
    /// dropped.
    pub fn failure_cache(&self) -> Option<Duration> {
        self.failure_cache
    }

    /// Sets [`ManagerConfig::failure_cache`]; zero is refused (leave it unset instead).
    ///
    /// ```
    /// use std::time::Duration;
    /// use resident::{BoxError, Loader, Manager, ManagerExt, ManagerConfig, ManagerError, Model, ModelId, ModelManager};
    /// # struct M; impl Model for M { fn size_bytes(&self) -> u64 { 1 } }
    /// struct Corrupt;
    /// impl Loader for Corrupt {
    ///     type Model = M;
    ///     fn load(&self, id: &ModelId) -> Result<M, BoxError> { Err(format!("{id}: bad header").into()) }
    /// }
    /// let config = ManagerConfig::default().with_failure_cache(Duration::from_secs(30));
    /// let manager = ModelManager::with_config(Corrupt, config)?;
    /// let first = manager.add_model("m", None).unwrap_err();
    /// let again = manager.add_model("m", None).unwrap_err(); // answered without loading
    /// match (first, again) {
    ///     (ManagerError::Load { source: a, .. }, ManagerError::Load { source: b, .. }) => assert!(a == b, "one error, shared"),
    ///     other => panic!("{other:?}"),
    /// }
    /// assert!(config.with_failure_cache(Duration::ZERO).validate().is_err());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn with_failure_cache(mut self, time: Duration) -> Self {
        self.failure_cache = Some(time);
        self
    }

    /// Sets [`ManagerConfig::lock_timeout`].
    pub fn with_lock_timeout(mut self, timeout: Duration) -> Self {
        self.lock_timeout = timeout;
        self
    }

    /// Sets [`ManagerConfig::lease_drain_timeout`].
    pub fn with_lease_drain_timeout(mut self, timeout: Duration) -> Self {
        self.lease_drain_timeout = timeout;
        self
    }

    /// Refuses zero timeouts: they would make every contended call fail.
    pub fn validate(&self) -> Result<(), InvalidConfig> {
        if self.lock_timeout.is_zero() {
            return Err(InvalidConfig { field: "lock_timeout", reason: "must be greater than zero" });
        }
        if self.lease_drain_timeout.is_zero() {
            return Err(InvalidConfig { field: "lease_drain_timeout", reason: "must be greater than zero" });
        }
        if self.failure_cache.is_some_and(|t| t.is_zero()) {
            return Err(InvalidConfig {
                field: "failure_cache",
                reason: "must be greater than zero (leave it unset for no negative cache)",
            });
        }
        Ok(())
    }
}

impl Default for ManagerConfig {
    fn default() -> Self {
        Self {
            lock_timeout: Duration::from_secs(60),
            lease_drain_timeout: Duration::from_secs(30),
            failure_cache: None,
        }
    }
}
