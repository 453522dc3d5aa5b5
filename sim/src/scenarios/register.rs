//! `register` of a model built elsewhere (`S-RG1`): it goes through the cache's admission, and
//! of a register and a load of the same id exactly one registers its model.

use resident::{Added, ManagerError, ManagerExt};

use super::layers::{Depth, cache, finish};
use crate::ensure;
use crate::runtime::SimRuntime;
use crate::world::join;
use crate::world::manager::ManagerWorld;
use crate::world::traced;

/// S-RG1: A and B fill a cache of two. T1 adds C (loading it), T2 registers a C built
/// elsewhere, T3 leases A. Exactly one of T1 and T2 registers its C: the other finds it
/// registered (a warm add, or the model handed back); no model is dropped without its unload
/// but the one handed back, and the cache still holds at most two.
pub(super) fn register_races_an_add_and_a_lease<R: SimRuntime, D: Depth>(rt: R) {
    let builder = ManagerWorld::builder(rt).model("A", &[], &[]).model("B", &[], &[]).model("C", &[], &[]);
    let world = cache::<R, D>(builder, 2, &["A", "B"], &["A", "B"]);
    let prebuilt = world.probe.prebuilt("C");
    let t1 = world.spawn("T1", |m, t| traced(t, "add(C)", || m.add_model("C", None)));
    let t2 = world.spawn("T2", move |m, t| {
        // A refused model is dropped here, by its caller.
        traced(t, "register(C)", || m.register("C", prebuilt).map_err(|refused| refused.error))
    });
    let t3 = world.spawn("T3", |m, t| traced(t, "lease(A)", || m.lease("A").map(|lease| lease.serve(t))));
    let added = join::<R, _>(t1);
    let registered = join::<R, _>(t2);
    let _ = join::<R, _>(t3);
    let one_won = matches!(
        (&added, &registered),
        (Ok(Added::Loaded), Err(ManagerError::AlreadyRegistered { .. })) | (Ok(Added::Warm), Ok(()))
    );
    ensure!(one_won, "S-RG1", "add(C) gave {added:?} and register(C) gave {registered:?}: not exactly one");
    let handed_back = usize::from(registered.is_err());
    let dropped = world.probe.id("C").dropped();
    ensure!(
        dropped == handed_back,
        "I14",
        "{dropped} model(s) of C dropped without their unload; only {handed_back} was handed back"
    );
    let held = world.manager.len();
    ensure!(held <= 2, "capacity", "{held} models registered in a cache of two");
    finish(&world);
}
