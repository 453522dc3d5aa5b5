//! Panicking user code in the manager stack (SPEC 2.13): `size_bytes` after a successful load,
//! and a model's `Drop` after a successful remove. A model is either registered and queued, or
//! neither, whatever panics.

use resident::Manager;

use super::layers::{Depth, cache, finish, join};
use crate::ensure;
use crate::manager_world::ManagerWorld;
use crate::runtime::SimRuntime;
use crate::violation::catching;
use crate::world::traced;

/// M-P1: X loads, then its `size_bytes` panics inside the cache's add, while Y is added.
pub(super) fn size_panics_after_load<R: SimRuntime, D: Depth>(rt: R) {
    let builder = ManagerWorld::builder(rt).model("X", &[], &[]).model("Y", &[], &[]).size_panics("X");
    let world = cache::<R, D>(builder, 4, &[], &[]);
    let tx = world.spawn("T1", |m, t| traced(t, "add(X)", || catching(|| m.add_model("X", None))));
    let ty = world.spawn("T2", |m, t| traced(t, "add(Y)", || m.add_model("Y", None)));
    let x = join::<R, _>(tx);
    let y = join::<R, _>(ty);
    ensure!(x.is_none(), "contract", "add(X) did not panic: {x:?}");
    ensure!(y.is_ok(), "contract", "add(Y) gave {y:?}");
    ensure!(world.manager.contains("X"), "contract", "X loaded but is not registered");
    finish(&world);
}

/// M-P2: X is removed and its `Drop` panics after the unload succeeded, while Y is leased.
pub(super) fn drop_panics_after_remove<R: SimRuntime, D: Depth>(rt: R) {
    let builder = ManagerWorld::builder(rt).model("X", &[], &[]).model("Y", &[], &[]).drop_panics("X");
    let world = cache::<R, D>(builder, 4, &["X", "Y"], &[]);
    let tx = world.spawn("T1", |m, t| traced(t, "remove(X)", || catching(|| m.remove("X"))));
    let ty = world.spawn("T2", |m, t| traced(t, "lease(Y)", || m.lease("Y").map(drop)));
    let x = join::<R, _>(tx);
    let y = join::<R, _>(ty);
    ensure!(x.is_none(), "contract", "remove(X) did not panic: {x:?}");
    ensure!(y.is_ok(), "contract", "lease(Y) gave {y:?}");
    ensure!(!world.manager.contains("X"), "contract", "X stayed registered after its unload");
    finish(&world);
}
