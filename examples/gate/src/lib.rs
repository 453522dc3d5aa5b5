//! # An application's own stack, checked with resident-sim
//!
//! What an application built on `resident` typically adds, and checks the way `resident`
//! checks itself:
//! - [`StoreLoader`]: a loader of its own (models from an in-memory store of weights);
//! - [`Gate`]: a decorator of its own, a maintenance gate: adds are refused while an operator
//!   maintains the stack, and a maintenance waits for the adds already past the gate;
//! - [`GATE_CHECK_THEN_ACT`] and [`GATE_LOST_WAKEUP`]: the bugs it once had, switchable back
//!   on for the checkers.
//!
//! `tests/checks/` explores it under shuttle random, shuttle PCT and loom with
//! `resident_sim::check::Checkers`; `examples/check.rs` is the same scenarios behind the
//! `resident-sim` command line (`cargo run -p resident-example-gate --example check -- explore`).

#![forbid(unsafe_code)]

mod gate;
mod store;

pub use gate::{GATE_CHECK_THEN_ACT, GATE_LOST_WAKEUP, Gate, Maintenance};
pub use store::{StoreLoader, StoredModel, UnknownModel};
