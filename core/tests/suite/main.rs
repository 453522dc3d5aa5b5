//! resident's integration tests over the public API, one module per subject, linked into one
//! test binary (each binary links the crate and its dependencies: one link, not eighteen).
//! The tests that measure the process's heap with a global allocator (`burn_budget.rs`,
//! `hard_budget_heap.rs`) keep binaries of their own, and the burn models' tests share
//! `burn/` (the ndarray backend is monomorphised once for them).

mod api;
mod call_deadlines;
mod device_placement;
mod events;
mod facade_boundary;
mod fixed_size_cache;
mod hard_budget;
mod house;
mod keep_alive_timer;
mod manager;
mod manual_clock;
mod metrics;
mod module_graph;
mod mutant_sites;
mod overload;
mod replace;
mod review_defects;
mod shared_cache;
mod shared_failure;
mod shutdown;
mod source;
