//! The decorators: [`Manager`](crate::Manager)s that wrap another one.
//!
//! Decorators wrap any `Manager` (tower style: `FixedSizeCache<M: Manager>`, `get_ref`,
//! `into_inner`) and nest to any depth. Each is a [`Decorator`]: it overrides only the steps it
//! changes, and everything else forwards to the layer below (the one forwarding mechanism).
//! Per-model lifecycle state lives only in the innermost
//! base: [`Manager::lock_until`](crate::Manager::lock_until) always reaches it, and a decorator
//! makes its
//! final decisions (warm or cold, bookkeeping) while holding the
//! [`LifecycleGuard`](crate::LifecycleGuard) it got there, through the `*_locked` methods.
//! Existence checks outside a guard are hints only, and the hint methods run under a layer's
//! bookkeeping lock (see [`Manager`](crate::Manager)).

mod decorator;
mod fixed_size;
mod traced;

pub use decorator::Decorator;
pub use fixed_size::{CapacityPolicy, FixedSizeCache, FixedSizeConfig};
pub use traced::Traced;
