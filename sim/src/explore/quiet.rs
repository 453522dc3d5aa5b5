//! Keeps expected panics quiet: while a driver explores, a failing execution's panic is the
//! driver's result, not something to print. Outside explorations the default hook prints as
//! usual.

use std::cell::Cell;
use std::panic;
use std::sync::Once;

use crate::violation::Violation;

thread_local! {
    static EXPLORING: Cell<bool> = const { Cell::new(false) };
}

fn install() {
    static INSTALL: Once = Once::new();
    INSTALL.call_once(|| {
        crate::trace::install_capture();
        let original = panic::take_hook();
        // shuttle installs its own reporting hook once per process, on its first execution;
        // let it do so now, then take it out again.
        shuttle::check_random(|| {}, 1);
        drop(panic::take_hook());
        // RESIDENT_SIM_LOUD=1 prints every panic, expected or not (for debugging scenarios).
        let loud = std::env::var_os("RESIDENT_SIM_LOUD").is_some();
        crate::unwinding::hook_installed();
        panic::set_hook(Box::new(move |info| {
            crate::unwinding::panic_started();
            if loud || !EXPLORING.with(Cell::get) {
                original(info);
            }
        }));
    });
}

/// Runs one exploration (of `label`: what it explores) with quiet panics and under a watchdog;
/// a panic escaping it becomes a [`Violation`].
pub(super) fn run<T>(label: &str, f: impl FnOnce() -> T) -> Result<T, Violation> {
    install();
    EXPLORING.with(|e| e.set(true));
    let result = super::watchdog::watched(label, || super::catch(f));
    EXPLORING.with(|e| e.set(false));
    result
}
