//! Generated concurrent programs (SPEC §5, last paragraph): small programs over the manager
//! stack with scripted faults, run under shuttle, their histories checked against a sequential
//! specification; and small programs over the shared-weight cache, checked for every accounting
//! and residency invariant.

pub mod cache_program;
pub mod cache_run;
pub mod cache_spec;
pub mod freshness;
pub mod generated;
pub mod history;
pub mod linearizability;
pub mod program;
pub mod run;
pub mod stack;
