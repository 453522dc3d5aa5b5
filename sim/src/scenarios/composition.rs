//! The production composition (SPEC §5, `X-*`): `FixedSizeCache<ModelManager<cache loader>>`
//! per device over one cache group, device budgets on. Every scenario ends with the devices'
//! models removed, then the group's accounting (A1) and drain checks.

use std::time::Duration;

use resident::{Added, Manager};

use super::layers::join;
use crate::composition::Composition;
use crate::ensure;
use crate::runtime::SimRuntime;
use crate::world::traced;

/// Removes every model of every device, then the cache group's end-of-run checks.
fn finish<R: SimRuntime>(c: &Composition<R>) {
    for device in &c.devices {
        for id in device.ids() {
            let removed = device.remove(id.as_str());
            ensure!(removed.is_ok(), "contract", "remove({id}) at the end gave {removed:?}");
        }
        crate::world::check_queue(device);
    }
    super::cache::finish(&c.world);
}

/// two devices cold-load one key at once: each device loads it once (I1 per device), the
/// group reads its file once (get_or_put is single-flight per key), and one canonical backs both.
pub(super) fn cold_loads_on_two_devices<R: SimRuntime>(rt: R) {
    let c = Composition::new(rt, &["m"], 40, 100, 100, 2, 2);
    ensure!(c.world.group.load_wait() == Duration::from_secs(1), "contract", "the load wait did not take");
    let handles = [("T1", 0), ("T2", 1)]
        .map(|(name, d)| c.spawn(name, d, |m, t| traced(t, "add(m)", || m.add_model("m", None))));
    for handle in handles {
        let added = join::<R, _>(handle);
        ensure!(matches!(added, Ok(Added::Loaded)), "contract", "add(m) gave {added:?}");
    }
    let reads = c.files.reads("m");
    ensure!(reads == 1, "X-1", "m's file was read {reads} times for two devices");
    let in_use = c.world.group.budget().in_use();
    ensure!(in_use == 40, "A1", "{in_use} bytes counted for one 40-byte canonical shared by two devices");
    super::wakeups::no_deadline_passed(&c.world.rt);
    finish(&c);
}
