//! Generated concurrent programs checked for linearizability (SPEC §5, last paragraph): small
//! programs over the manager stack with scripted faults, run under shuttle, their histories
//! checked against a sequential specification.

pub mod linearizability;
pub mod program;
pub mod run;
pub mod stack;
