//! The LRU order without a lock per lease (SPEC 2.3): a lease's touch raises the id's stamp,
//! and eviction derives the order from the stamps.

use resident::{ManagerError, ManagerExt};

use super::layers::{OneDeep, cache, finish};
use crate::ensure;
use crate::runtime::SimRuntime;
use crate::world::join;
use crate::world::manager::ManagerWorld;
use crate::world::traced;

/// M-L4, the stamps' kernel: A, B and C are queued in that order under `max_size` 3; T1 leases
/// B, then A; T2 adds N (evicting the least recently used idle model, in the order it derives
/// from the stamps while the leases touch them); the main thread leases A. Whatever the main
/// thread's touch races (it may draw its stamp before T1's and store it after), T1's touch of A
/// came after its touch of B, so A is the more recent of the two while both are queued; and the
/// queue holds exactly the registered ids.
pub(super) fn stamps<R: SimRuntime>(rt: R) {
    let builder = ManagerWorld::builder(rt).model("A", &[], &[]).model("B", &[], &[]).model("C", &[], &[]);
    let world = cache::<R, OneDeep>(builder.model("N", &[], &[]), 3, &["A", "B", "C"], &[]);
    let t1 = world.spawn("T1", |m, t| {
        let b = traced(t, "lease(B)", || m.lease("B").map(drop));
        [b, traced(t, "lease(A)", || m.lease("A").map(drop))]
    });
    let t2 = world.spawn("T2", |m, t| traced(t, "add(N)", || m.add_model("N", None)));
    let main_lease = world.manager.lease("A").map(drop);
    let t1_leases = join::<R, _>(t1);
    let added = join::<R, _>(t2);
    for lease in t1_leases.iter().chain([&main_lease]) {
        ensure!(
            matches!(lease, Ok(()) | Err(ManagerError::NotFound { .. })),
            "contract",
            "a lease gave {lease:?}"
        );
    }
    ensure!(added.is_ok(), "contract", "add(N) with an idle model to evict gave {added:?}");
    let queue = world.manager.queue();
    let at = |id: &str| queue.iter().position(|q| q.as_str() == id);
    if let (Some(a), Some(b)) = (at("A"), at("B")) {
        ensure!(b < a, "2.3", "lease(B) then lease(A) on one thread left A less recent than B: {queue:?}");
    }
    finish(&world);
}
