//! `resident-sim`: explore the scenario catalogue, check the mutants, replay failures (see
//! [`resident_sim::cli`]).

fn main() -> std::process::ExitCode {
    resident_sim::cli::main()
}
