//! # resident-sim
//!
//! Deterministic schedule exploration for `resident`. The same `resident` code that ships runs
//! here on model-checking runtimes ([`runtime::ShuttleRuntime`], [`runtime::LoomRuntime`]),
//! through every scenario of the catalogue ([`scenarios::CATALOGUE`]), with the historical
//! bugs switchable back on as mutants. A failing execution yields a replay file
//! ([`replay_file::ReplayFile`]) that reproduces it exactly.

pub mod bypass;
pub mod check;
pub mod cli;
pub mod explore;
mod fairness;
pub mod instrumentation;
pub mod kill;
pub mod latch;
pub mod mutant_set;
pub mod probed;
pub mod registry;
pub mod replay_file;
pub mod runtime;
pub mod scenario;
pub mod scenarios;
pub mod timeline;
pub mod trace;
pub mod unwinding;
pub mod violation;
pub mod world;

/// The shuttle version the stored schedules were recorded with (pinned in Cargo.toml).
pub const SHUTTLE_VERSION: &str = "0.9.10";
