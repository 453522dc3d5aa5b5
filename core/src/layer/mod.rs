//! The decorators: [`Manager`](crate::Manager)s that wrap another one.
//!
//! Decorators wrap any `Manager` (tower style: `FixedSizeCache<M: Manager>`, `get_ref`,
//! `into_inner`) and nest to any depth. Per-model lifecycle state lives only in the innermost
//! base: [`Manager::lock`](crate::Manager::lock) always reaches it, and a decorator makes its
//! final decisions (warm or cold, bookkeeping) while holding the
//! [`LifecycleGuard`](crate::LifecycleGuard) it got there, through the `*_locked` methods.
//! Existence checks outside a guard are hints only, and the hint methods run under a layer's
//! bookkeeping lock (see [`Manager`](crate::Manager)).

/// Expands, inside a decorator's `impl Manager`, the read-only methods that go straight to
/// `self.inner`: a decorator's bookkeeping never changes what the base reports.
macro_rules! forward_reads {
    () => {
        fn runtime(&self) -> &Self::Runtime {
            self.inner.runtime()
        }

        fn changes(&self) -> &$crate::runtime::Signal<Self::Runtime> {
            self.inner.changes()
        }

        fn contains(&self, id: &str) -> bool {
            self.inner.contains(id)
        }

        fn in_use(&self, id: &str) -> bool {
            self.inner.in_use(id)
        }

        fn is_locked(&self, id: &str) -> bool {
            self.inner.is_locked(id)
        }

        fn designate(&self, id: &str) -> Option<$crate::Designation<Self::Runtime>> {
            self.inner.designate(id)
        }

        fn ids(&self) -> Vec<$crate::ModelId> {
            self.inner.ids()
        }

        fn len(&self) -> usize {
            self.inner.len()
        }

        fn snapshot(&self) -> $crate::Snapshot {
            self.inner.snapshot()
        }

        fn is_shut_down(&self) -> bool {
            self.inner.is_shut_down()
        }

        fn begin_shutdown(&self) -> Vec<$crate::ModelId> {
            self.inner.begin_shutdown()
        }
    };
}

mod decorator;
mod fixed_size;
mod traced;

pub use decorator::Decorator;
pub use fixed_size::{CapacityPolicy, FixedSizeCache, FixedSizeConfig};
pub use traced::Traced;
