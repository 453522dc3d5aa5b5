//! The application's stack under shuttle random, shuttle PCT and loom: each scenario passes,
//! its mutant makes it fail, and that failure replays from its file.

mod scenarios;

use resident_sim::check::Checkers;

#[test]
fn the_gate_holds_under_every_checker_and_its_bug_is_caught() {
    for scenario in scenarios::all() {
        let report = Checkers::all().run(&scenario);
        for o in &report.outcomes {
            println!("{} {}: {} executions", scenario.id, o.checker, o.iterations);
        }
        for k in &report.kills {
            println!("{}: {} killed after {} executions", scenario.id, k.mutant, k.iterations);
        }
        let killed: Vec<&str> = report.kills.iter().map(|k| k.mutant).collect();
        let targets: Vec<&str> = scenario.targets.iter().map(|m| m.name()).collect();
        assert_eq!(killed, targets, "{}: every mutant it targets was tried", scenario.id);
    }
}

#[test]
fn the_command_line_knows_the_applications_scenarios_and_mutant() {
    let registry = scenarios::registry();
    assert!(registry.find("APP-G1").is_some());
    let mutant = registry.parse_mutant("gate-check-then-act").expect("known by name, no leak");
    assert_eq!(mutant, resident_example_gate::GATE_CHECK_THEN_ACT);
    let code = resident_sim::cli::run_from(["check", "list"], &registry);
    assert_eq!(code, std::process::ExitCode::SUCCESS);
}
