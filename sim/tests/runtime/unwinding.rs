//! Reports armed to panic while a checker thread unwinds: production aborts where the panic
//! would leave a `Drop` during the unwind, and goes on where a catch entered during the unwind
//! encloses it (as `resident` runs user code in its unwinding paths). The checker tells the
//! two apart.

use std::marker::PhantomData;

use resident_sim::explore::{Checker, Plan, explore};
use resident_sim::program;
use resident_sim::runtime::SimRuntime;
use resident_sim::scenario::Scenario;
use resident_sim::violation::InjectedPanic;
use resident_sim::{instrumentation, unwinding};

use super::support;

/// Reports, from its `Drop`, an event armed to panic: inside a catch of its own if `caught`.
struct ReportsOnDrop<R: SimRuntime> {
    caught: bool,
    runtime: PhantomData<R>,
}

impl<R: SimRuntime> Drop for ReportsOnDrop<R> {
    fn drop(&mut self) {
        let report = || tracing::info!(target: "resident::test", "armed report");
        if self.caught {
            let _ = R::catch_unwind(report);
        } else {
            report();
        }
    }
}

/// A panic unwinds through a value that reports as it is dropped.
fn report_in_an_unwind<R: SimRuntime>(_rt: R, caught: bool) {
    instrumentation::panic_at(&["armed report"]);
    let _ = unwinding::catch(|| {
        let _reports = ReportsOnDrop::<R> { caught, runtime: PhantomData };
        std::panic::panic_any(InjectedPanic);
    });
    instrumentation::disarm();
}

/// One thread, no scheduling choice: shuttle's random scheduler runs it (PCT refuses a program
/// without concurrency).
#[test]
fn an_armed_report_in_an_unwind_aborts_unless_caught_there() {
    let plan = || Plan::new(5, support::seed());
    let bare = Scenario::new("bare", "a report in an unwind", program!(|rt| report_in_an_unwind(rt, false)));
    let failure = explore(&bare, Checker::Random, plan()).failure;
    assert_eq!(failure.map(|f| f.violation.invariant).as_deref(), Some("abort"));
    let caught =
        Scenario::new("caught", "a report caught in an unwind", program!(|rt| report_in_an_unwind(rt, true)));
    let failure = explore(&caught, Checker::Random, plan()).failure;
    assert!(failure.is_none(), "{:?}", failure.map(|f| f.violation));
}
