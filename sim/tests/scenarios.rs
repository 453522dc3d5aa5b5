//! Every catalogue scenario passes with all mutants off: shuttle random, shuttle PCT, and loom
//! (under the scenario's preemption bound, exhaustive up to `support::loom_executions`) where
//! the scenario fits loom. Scenarios that do not fit loom pass the loom test vacuously and say
//! so.

mod support;

use resident_sim::explore::{Checker, Plan, explore};
use resident_sim::scenarios::{self, CATALOGUE};
use resident_sim::{instrumentation, trace};

fn passes(id: &str, checker: Checker) {
    passes_scenario(scenarios::find(id).expect("catalogue id"), checker);
}

fn passes_scenario(scenario: &'static resident_sim::scenarios::Scenario, checker: Checker) {
    let id = scenario.id;
    let plan =
        Plan::new(support::iterations(), support::seed()).with_loom_executions(support::loom_executions());
    instrumentation::reset_armed();
    let outcome = explore(scenario, checker, plan);
    if let Some(failure) = &outcome.failure {
        panic!(
            "{id} under {checker} failed at execution {}: {}\n{}",
            failure.iteration,
            failure.violation,
            trace::render(&failure.trace)
        );
    }
    assert!(outcome.iterations > 0, "{id} under {checker} ran no execution");
    let vacuous = instrumentation::armed_never_fired();
    assert!(vacuous.is_empty(), "{id} under {checker}: the faults armed at {vacuous:?} never fired");
    println!("{id} {checker}: {} executions in {:?}", outcome.iterations, outcome.elapsed);
}

// One module per scenario, its three checkers side by side: the test threads then take a loom
// exploration and a shuttle one together (tests run in name order), instead of two loom ones
// whose stack mappings and unmappings contend in one address space (slower than one thread).
macro_rules! scenario_tests {
    ($($name:ident => $id:literal,)*) => {
        $(mod $name {
            #[test]
            fn shuttle_random() {
                super::passes($id, super::Checker::Random)
            }

            #[test]
            fn shuttle_pct() {
                super::passes($id, super::Checker::Pct)
            }

            #[test]
            fn loom() {
                if !super::support::loom_enabled() {
                    println!("loom off (RESIDENT_SIM_LOOM=off)");
                } else if super::scenarios::find($id).expect("catalogue id").loom.is_some() {
                    super::passes($id, super::Checker::Loom)
                } else {
                    println!("{} does not fit loom; shuttle covers it", $id);
                }
            }
        })*
        #[test]
        fn every_catalogue_entry_has_a_test() {
            let tested = [$($id),*];
            for s in CATALOGUE.iter() {
                assert!(tested.contains(&s.id), "{} has no test in scenarios.rs", s.id);
            }
        }
    };
}

scenario_tests! {
    m_s1 => "M-S1",
    m_p2r => "M-P2r",
    m_p2s => "M-P2s",
    m_p2t => "M-P2t",
    m_p2v => "M-P2v",
    m_p2w => "M-P2w",
    m_p2x => "M-P2x",
    m_p2u => "M-P2u",
    m_p3 => "M-P3",
    m_p3r => "M-P3r",
    m_p4 => "M-P4",
    c_p5 => "C-P5",
    m_b1 => "M-B1",
    m_b2 => "M-B2",
    m_b2b => "M-B2b",
    s_r2 => "S-R2",
    s_r2i => "S-R2i",
    m_pn1 => "M-PN1",
    m_pn2 => "M-PN2",
    m_pn2r => "M-PN2r",
    s_z2 => "S-Z2",
    s_z2b => "S-Z2b",
    w_20 => "W-20",
    w_21 => "W-21",
    w_22 => "W-22",
    w_23 => "W-23",
    w_23p => "W-23p",
    s_f2 => "S-F2",
    s_f1d => "S-F1d",
    s_f1u => "S-F1u",
    c_b4 => "C-B4",
    c_b4m => "C-B4m",
    c_d6 => "C-D6",
    x_5 => "X-5",
    x_5p => "X-5p",
    x_6 => "X-6",
    x_7 => "X-7",
    s_d2 => "S-D2",
    s_d2p => "S-D2p",
    s_z3 => "S-Z3",
    s_g3 => "S-G3",
    s_z4 => "S-Z4",
    s_o1 => "S-O1",
    s_o1b => "S-O1b",
    s_o1c => "S-O1c",
    s_o1d => "S-O1d",
    s_o1e => "S-O1e",
    s_o1f => "S-O1f",
    s_o1g => "S-O1g",
    s_o1h => "S-O1h",
    s_o1i => "S-O1i",
    s_o1j => "S-O1j",
    s_o1r => "S-O1r",
    s_o1s => "S-O1s",
    c_p6 => "C-P6",
    c_p7 => "C-P7",
    c_p7n => "C-P7n",
    c_p8 => "C-P8",
    c_p6c => "C-P6c",
    c_p6r => "C-P6r",
    c_p6s => "C-P6s",
    c_p6t => "C-P6t",
    c_p6w => "C-P6w",
    c_p6x => "C-P6x",
    c_p6v => "C-P6v",
    c_p6m => "C-P6m",
    c_p6z => "C-P6z",
    m_s1b => "M-S1b",
    m_s2 => "M-S2",
    m_s2t => "M-S2t",
    m_s2p => "M-S2p",
    m_l1 => "M-L1",
    m_l3 => "M-L3",
    m_l4 => "M-L4",
    m_s3 => "M-S3",
    m_s4 => "M-S4",
    m_s5 => "M-S5",
    m_s6 => "M-S6",
    m_s6b => "M-S6b",
    m_s6c => "M-S6c",
    m_s7 => "M-S7",
    m_s8 => "M-S8",
    m_s9 => "M-S9",
    m_s10 => "M-S10",
    m_s11 => "M-S11",
    m_s12 => "M-S12",
    m_s13 => "M-S13",
    m_l2 => "M-L2",
    c_r1 => "C-R1",
    c_r2 => "C-R2",
    c_r3 => "C-R3",
    c_r4 => "C-R4",
    c_r5 => "C-R5",
    c_r6 => "C-R6",
    c_r7 => "C-R7",
    c_r8 => "C-R8",
    c_r9 => "C-R9",
    c_r12 => "C-R12",
    c_r13 => "C-R13",
    c_r14 => "C-R14",
    c_r5l => "C-R5l",
    c_r5c => "C-R5c",
    c_r5s => "C-R5s",
    c_r18 => "C-R18",
    c_r19 => "C-R19",
    c_r21 => "C-R21",
    c_r22 => "C-R22",
    c_r23 => "C-R23",
    c_r26 => "C-R26",
    c_k1 => "C-K1",
    c_r27 => "C-R27",
    c_r28 => "C-R28",
    m_e1 => "M-E1",
    m_e2 => "M-E2",
    m_e3 => "M-E3",
    m_e4 => "M-E4",
    m_p1 => "M-P1",
    m_p2 => "M-P2",
    c_p1 => "C-P1",
    c_p2 => "C-P2",
    c_p3 => "C-P3",
    c_p3w => "C-P3w",
    c_p4 => "C-P4",
    c_l1 => "C-L1",
    c_d1 => "C-D1",
    c_d2 => "C-D2",
    c_d3 => "C-D3",
    c_d4 => "C-D4",
    c_d5 => "C-D5",
    w_1 => "W-1",
    w_2 => "W-2",
    w_2u => "W-2u",
    w_3 => "W-3",
    w_3w => "W-3w",
    w_4 => "W-4",
    w_5 => "W-5",
    w_6 => "W-6",
    w_7 => "W-7",
    w_8 => "W-8",
    w_9 => "W-9",
    w_10 => "W-10",
    w_10w => "W-10w",
    c_b1 => "C-B1",
    c_b2 => "C-B2",
    c_b3 => "C-B3",
    w_11 => "W-11",
    w_11l => "W-11l",
    w_12x => "W-12x",
    w_12 => "W-12",
    w_12p => "W-12p",
    w_13 => "W-13",
    w_14 => "W-14",
    w_15 => "W-15",
    x_1 => "X-1",
    x_2 => "X-2",
    x_3 => "X-3",
    x_4 => "X-4",
    m_e5 => "M-E5",
    m_e6 => "M-E6",
    m_e7 => "M-E7",
    m_e7r => "M-E7r",
    m_c5o => "M-C5o",
    m_c6s => "M-C6s",
    m_e7w => "M-E7w",
    w_16 => "W-16",
    s_f1 => "S-F1",
    s_f1n => "S-F1n",
    s_d1 => "S-D1",
    s_d1l => "S-D1l",
    s_d1c => "S-D1c",
    s_r1 => "S-R1",
    m_r3n => "M-R3n",
    s_g1 => "S-G1",
    s_g1l => "S-G1l",
    s_g1r => "S-G1r",
    s_g2 => "S-G2",
    s_z1 => "S-Z1",
    w_17 => "W-17",
    s_z1c => "S-Z1c",
    w_18 => "W-18",
    s_z1d => "S-Z1d",
    s_z1p => "S-Z1p",
    s_z1r => "S-Z1r",
    w_19 => "W-19",
    s_d1v => "S-D1v",
    s_cl1 => "S-CL1",
    s_rg1 => "S-RG1",
}

/// The cache scenarios on a one-deep stack pass exactly like the three-deep catalogue stack.
#[test]
fn one_deep_stacks_pass_the_same_scenarios() {
    for scenario in resident_sim::scenarios::ONE_DEEP.iter() {
        let base_id = scenario.id.trim_end_matches("/1");
        assert!(scenarios::find(base_id).is_some(), "{} mirrors no catalogue entry", scenario.id);
        for checker in [Checker::Random, Checker::Pct] {
            let outcome = explore(scenario, checker, Plan::new(support::iterations(), support::seed()));
            if let Some(failure) = &outcome.failure {
                panic!(
                    "{} under {checker}: {}\n{}",
                    scenario.id,
                    failure.violation,
                    trace::render(&failure.trace)
                );
            }
        }
    }
}
