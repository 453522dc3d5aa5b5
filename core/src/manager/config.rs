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
        Ok(())
    }
}

impl Default for ManagerConfig {
    fn default() -> Self {
        Self { lock_timeout: Duration::from_secs(60), lease_drain_timeout: Duration::from_secs(30) }
    }
}
