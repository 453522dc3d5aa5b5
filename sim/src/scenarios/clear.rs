//! `clear` (`S-CL1`): every model registered when it starts is removed through every layer —
//! pinned ones too, their pins kept — and what could not go is reported, while an add and a
//! lease race it.

use std::collections::BTreeSet;

use resident::{Manager, ManagerExt, ModelId};

use super::layers::{Depth, cache, finish};
use crate::ensure;
use crate::runtime::SimRuntime;
use crate::world::join;
use crate::world::manager::{ManagerWorld, Step};
use crate::world::traced;

/// S-CL1: A (pinned), B (whose unloads fail twice) and D fill a cache of three. T1 clears it,
/// T2 adds C (evicting one of them, or waiting), T3 leases A. Afterwards nothing registered
/// went unreported but C (added while the clear ran), B is reported, A's pin stays, and the
/// queue holds exactly the registered ids.
pub(super) fn clear_races_an_add_and_a_lease<R: SimRuntime, D: Depth>(rt: R) {
    let builder = ManagerWorld::builder(rt)
        .model("A", &[], &[])
        .model("B", &[], &[Step::Fail, Step::Fail])
        .model("C", &[], &[])
        .model("D", &[], &[]);
    let world = cache::<R, D>(builder, 3, &["A", "B", "D"], &["A", "B", "D"]);
    world.manager.pin("A").expect("setup pin");
    let t1 = world.spawn("T1", |m, t| traced(t, "clear()", || m.clear()));
    let t2 = world.spawn("T2", |m, t| traced(t, "add(C)", || m.add_model("C", None)));
    let t3 = world.spawn("T3", |m, t| traced(t, "lease(A)", || m.lease("A").map(|lease| lease.serve(t))));
    let report = join::<R, _>(t1);
    let _ = join::<R, _>(t2);
    let _ = join::<R, _>(t3);
    let failed: BTreeSet<ModelId> = report.failed.iter().map(|(id, _)| id.clone()).collect();
    let unreported: Vec<ModelId> =
        world.manager.ids().into_iter().filter(|id| !failed.contains(id) && id.as_str() != "C").collect();
    ensure!(
        unreported.is_empty(),
        "S-CL1",
        "{unreported:?} still registered after a clear that reported {report:?}"
    );
    ensure!(
        failed.iter().any(|id| id.as_str() == "B"),
        "S-CL1",
        "B's unload fails on every try, yet the clear reported {report:?}"
    );
    ensure!(world.manager.is_pinned("A"), "S-CL1", "the clear lifted A's pin");
    finish(&world);
}
