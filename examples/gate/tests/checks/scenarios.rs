//! The application's scenarios: its gate and loader under `FixedSizeCache` and the base
//! manager, explored by resident-sim. Shared by `tests/checks` and `examples/check.rs`.

use resident::layer::Decorator;
use resident::{FixedSizeCache, FixedSizeConfig, ManagerConfig, ManagerError, ManagerExt, ModelManager};
use resident_example_gate::{GATE_CHECK_THEN_ACT, GATE_LOST_WAKEUP, Gate, StoreLoader};
use resident_sim::ensure;
use resident_sim::probed::Probed;
use resident_sim::program;
use resident_sim::registry::Registry;
use resident_sim::runtime::{SimRuntime, Time};
use resident_sim::scenario::Scenario;
use resident_sim::world::checks::check_queue;
use resident_sim::world::{World, join};

/// The application's stack on the checker's runtime, over a probed loader.
type Stack<R> = Gate<FixedSizeCache<ModelManager<Probed<StoreLoader, R>, R>>>;

fn stack<R: SimRuntime>(
    rt: &R,
    max_size: usize,
) -> (Stack<R>, std::sync::Arc<resident_sim::probed::Probes<R>>) {
    let loader =
        Probed::new(rt, StoreLoader::new().with_model("a", &[1.0, 2.0]).with_model("b", &[3.0, 4.0]));
    let probes = loader.probes();
    let base =
        ModelManager::with_runtime(loader, ManagerConfig::default(), rt.clone()).expect("valid config");
    let cache = FixedSizeCache::new(base, FixedSizeConfig::new(max_size)).expect("valid config");
    (Gate::new(cache), probes)
}

/// What an add may answer here: done, or refused by the gate.
fn refused_or_done<T: std::fmt::Debug>(what: &str, result: &Result<T, ManagerError>) {
    let refused = matches!(result, Err(ManagerError::Refused { layer: "Gate", .. }));
    ensure!(result.is_ok() || refused, "contract", "{what} gave {result:?}");
}

/// `adders` threads add (and use) models while an operator clears the stack in a maintenance;
/// the last of two or more replaces an alias instead (a replace of an id not registered adds
/// it: through the gate too). After every thread: the probes' quiescence
/// checks (I3, I14) and the cache's queue (I4).
fn maintenance_window<R: SimRuntime>(rt: R, adders: usize) {
    let (gate, probes) = stack(&rt, adders);
    let world = World::of(rt, gate);
    let ids = ["a", "b"];
    let threads: Vec<_> = (0..adders)
        .map(|n| {
            let (id, alias) = (ids[n % 2], (n > 0 && n + 1 == adders).then_some("alias"));
            world.spawn(["T1", "T2", "T3"][n], move |m, _| {
                let added = match alias {
                    None => m.add_model(id, None).map(|_| ()),
                    Some(alias) => m.replace(id, Some(alias)).map(|_| ()),
                };
                refused_or_done("add", &added);
                if added.is_ok() {
                    // Used while it may be evicted or cleared: the call keeps it (L1).
                    let _ = m.infer(alias.unwrap_or(id), |model| model.using(|m| m.score(&[1.0, 1.0])));
                }
            })
        })
        .collect();
    let operator = world.spawn("OP", |m, _| m.maintain(|below| below.clear()));
    let report = join::<R, _>(operator);
    ensure!(report.failed.is_empty(), "contract", "the maintenance's clear failed: {report:?}");
    threads.into_iter().for_each(join::<R, _>);
    ensure!(!world.is_closed(), "contract", "the gate stayed closed after its maintenance");
    probes.check_quiescent(&*world);
    check_queue(world.inner());
}

/// The application's scenarios.
pub(crate) fn all() -> Vec<Scenario> {
    let window = |id, description, adders: usize| {
        Scenario::new(id, description, program!(move |rt| maintenance_window(rt, adders)))
            .time(Time::Off)
            .loom_bound(1)
            .must_kill(GATE_CHECK_THEN_ACT)
            .must_kill(GATE_LOST_WAKEUP)
    };
    vec![
        window("APP-G1", "an add and a lease race a maintenance's clear through the gate", 1),
        window("APP-G2", "an add and a replace of an alias race a maintenance's clear", 2),
    ]
}

/// The application's registry: its scenarios (and so its mutant) for the command line.
pub(crate) fn registry() -> Registry {
    Registry::new().scenarios_from(all())
}
