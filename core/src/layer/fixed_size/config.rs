//! Configuration of a [`FixedSizeCache`](super::FixedSizeCache).

use std::time::Duration;

use crate::error::InvalidConfig;

/// What a cold add does when the cache is full and nothing can be evicted in time.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum CapacityPolicy {
    /// Fail with [`ManagerError::CapacityExhausted`](crate::ManagerError::CapacityExhausted).
    #[default]
    Strict,
    /// Load anyway, past `max_size`, with a warning (upstream's behaviour).
    Overflow,
}

/// Capacity of a [`FixedSizeCache`](super::FixedSizeCache).
///
/// ```
/// use resident::FixedSizeConfig;
/// assert!(FixedSizeConfig::new(8).validate().is_ok());
/// assert!(FixedSizeConfig::new(0).validate().is_err());
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FixedSizeConfig {
    max_size: usize,
    max_bytes: Option<u64>,
    capacity_wait: Duration,
    policy: CapacityPolicy,
}

impl FixedSizeConfig {
    /// At most `max_size` models, registered plus loading; wait 5 s for room; strict.
    pub fn new(max_size: usize) -> Self {
        Self {
            max_size,
            max_bytes: None,
            capacity_wait: Duration::from_secs(5),
            policy: CapacityPolicy::Strict,
        }
    }

    /// Also keep the registered models' bytes ([`Model::size_bytes`](crate::Model::size_bytes))
    /// within `max_bytes`, evicting after a load that goes over.
    ///
    /// A *soft* limit, by design: the size is known only once the model is built, so a load may
    /// overshoot `max_bytes` until the eviction after it (or until leases end, if every other
    /// model is in use). For a hard limit on the memory the models take, load them through a
    /// [`CacheGroup`](crate::cache::CacheGroup): its RAM budget reserves each load's declared
    /// peak ([`Loader::declared_bytes`](crate::Loader::declared_bytes)) before the load runs
    /// and never exceeds its cap. Both compose: this bound on the models a manager keeps, the
    /// group's on their bytes.
    pub fn with_max_bytes(mut self, max_bytes: u64) -> Self {
        self.max_bytes = Some(max_bytes);
        self
    }

    /// How long a cold add waits for a model to become evictable (a lease to end). A wait too
    /// long to represent as a deadline (`Duration::MAX`, say) is unbounded; zero is refused.
    pub fn with_capacity_wait(mut self, wait: Duration) -> Self {
        self.capacity_wait = wait;
        self
    }

    /// What to do when the wait runs out.
    pub fn with_policy(mut self, policy: CapacityPolicy) -> Self {
        self.policy = policy;
        self
    }

    /// The capacity in models.
    pub fn max_size(&self) -> usize {
        self.max_size
    }

    /// The byte budget, if any.
    pub fn max_bytes(&self) -> Option<u64> {
        self.max_bytes
    }

    /// The wait for room.
    pub fn capacity_wait(&self) -> Duration {
        self.capacity_wait
    }

    /// The policy when the wait runs out.
    pub fn policy(&self) -> CapacityPolicy {
        self.policy
    }

    /// Refuses a zero capacity, a zero byte budget and a zero wait.
    pub fn validate(&self) -> Result<(), InvalidConfig> {
        if self.max_size == 0 {
            return Err(InvalidConfig { field: "max_size", reason: "must be at least 1" });
        }
        if self.max_bytes == Some(0) {
            return Err(InvalidConfig { field: "max_bytes", reason: "must be greater than zero" });
        }
        if self.capacity_wait.is_zero() {
            return Err(InvalidConfig { field: "capacity_wait", reason: "must be greater than zero" });
        }
        Ok(())
    }
}
