//! Shared settings of the sim test binaries.
#![allow(dead_code)] // each test binary uses the settings it needs

/// shuttle executions per scenario and scheduler in `cargo test`
/// (`RESIDENT_SIM_ITERATIONS`, default 500; deep runs go through `just sim`).
pub(crate) fn iterations() -> usize {
    std::env::var("RESIDENT_SIM_ITERATIONS").ok().and_then(|v| v.parse().ok()).unwrap_or(500)
}

/// loom executions per scenario in `cargo test` (`RESIDENT_SIM_LOOM_EXECUTIONS`, default
/// 2,000; `0` or `all`: exhaustive). Most scenarios finish inside it; the 26 whose state space
/// is larger (M-S2t's waits that may time out anywhere: 65,771 executions) stop there, always
/// at the same ones. `resident-sim explore` (README's main job, and CI's explore step) searches
/// them whole.
pub(crate) fn loom_executions() -> Option<usize> {
    match std::env::var("RESIDENT_SIM_LOOM_EXECUTIONS").ok().as_deref() {
        Some("0" | "all") => None,
        Some(n) => n.parse().ok().or(Some(2_000)),
        None => Some(2_000),
    }
}

/// Seed of the shuttle schedulers in `cargo test` (`RESIDENT_SIM_SEED`, default 0x5eed).
pub(crate) fn seed() -> u64 {
    std::env::var("RESIDENT_SIM_SEED").ok().and_then(|v| v.parse().ok()).unwrap_or(0x5eed)
}

/// Whether the loom tests run (`RESIDENT_SIM_LOOM=off` skips them, for mutation testing).
pub(crate) fn loom_enabled() -> bool {
    std::env::var("RESIDENT_SIM_LOOM").as_deref() != Ok("off")
}
