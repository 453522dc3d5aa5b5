//! Shared settings of the sim test binaries.
#![allow(dead_code)] // each test binary uses the settings it needs

/// shuttle executions per scenario and scheduler in `cargo test`
/// (`RESIDENT_SIM_ITERATIONS`, default 500; deep runs go through `just sim`).
pub(crate) fn iterations() -> usize {
    std::env::var("RESIDENT_SIM_ITERATIONS").ok().and_then(|v| v.parse().ok()).unwrap_or(500)
}

/// Seed of the shuttle schedulers in `cargo test` (`RESIDENT_SIM_SEED`, default 0x5eed).
pub(crate) fn seed() -> u64 {
    std::env::var("RESIDENT_SIM_SEED").ok().and_then(|v| v.parse().ok()).unwrap_or(0x5eed)
}

/// Whether the loom tests run (`RESIDENT_SIM_LOOM=off` skips them, for mutation testing).
pub(crate) fn loom_enabled() -> bool {
    std::env::var("RESIDENT_SIM_LOOM").as_deref() != Ok("off")
}
