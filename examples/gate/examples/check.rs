//! The `resident-sim` command line over the application's own scenarios:
//! `cargo run -p resident-example-gate --example check -- explore` (or `list`, `mutants`,
//! `replay FILE`).

#[path = "../tests/checks/scenarios.rs"]
mod scenarios;

fn main() -> std::process::ExitCode {
    resident_sim::cli::run_as("cargo run -p resident-example-gate --example check --", &scenarios::registry())
}
