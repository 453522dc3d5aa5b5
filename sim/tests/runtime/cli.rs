//! The explorer's command line: seeds, durations and the documented forms.

use std::time::Duration;

use resident_sim::cli::{check_args, parse_duration, parse_seed};

#[test]
fn seeds_read_in_hex_or_decimal_and_durations_in_units() {
    assert_eq!(parse_seed("0x5eed"), Ok(0x5eed));
    assert_eq!(parse_seed("0X5EED"), Ok(0x5eed));
    assert_eq!(parse_seed("24301"), Ok(24301));
    assert!(parse_seed("5eed").is_err());
    assert!(parse_seed("0x").is_err());
    assert_eq!(parse_duration("1m30s"), Ok(Duration::from_secs(90)));
    assert!(parse_duration("soon").is_err());
}

#[test]
fn the_command_line_parses_its_documented_forms() {
    let parse = |line: &str| check_args(line.split_whitespace());
    for line in [
        "resident-sim explore",
        "resident-sim explore --scenario M-S1 --scheduler pct --iterations 10000 --seed 0x5eed",
        "resident-sim explore --time 60s --json out.json --jobs 2",
        "resident-sim --verbose explore --mutant retire-while-held",
        "resident-sim mutants --json --scenario M-S1 --mutant retire-while-held --budget 100",
        "resident-sim replay fixtures/failures/x.json",
        "resident-sim replay fixtures/failures/x.json --svg out.svg",
        "resident-sim list",
    ] {
        assert_eq!(parse(line), Ok(()), "{line}");
    }
    assert!(parse("resident-sim explore --seed 0xzz").is_err());
    assert!(parse("resident-sim explore --time forever").is_err());
}

#[test]
fn mutants_json_is_all_of_standard_output() {
    // Standard output is a pipe here: without `--json`, a plain line per finished pair goes there.
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_resident-sim"))
        .args(["mutants", "--json", "--scenario", "M-S1", "--mutant", "retire-while-held", "--budget", "100"])
        .output()
        .expect("the explorer runs");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let kills: serde_json::Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stdout)));
    assert_eq!(kills[0]["mutant"], "retire-while-held");
    assert_eq!(kills[0]["killed"], true);
}
