//! Which checker thread is unwinding a panic.
//!
//! `std::thread::panicking` answers per OS thread, and a model checker runs every checker
//! thread of an execution on one OS thread: while one of them is suspended half-way through an
//! unwind (at a scheduling point inside a `Drop`), every other one would look unwinding too, and
//! the code under test would take its unwinding paths there (skip its reports, leave reconciles
//! to others) where production never does. So each checker thread's panics are counted: one
//! starts at the explorations' panic hook or at [`resume`] (a re-raise runs no hook), and ends
//! at [`catch`] (the runtime facade's [`Runtime::catch_unwind`](resident::runtime::Runtime::catch_unwind),
//! through which `resident` catches user code, and the sim's own catches). A thread is unwinding
//! while the OS thread is and its count is not zero (the OS thread is checked first: a count
//! left by a panic that escaped its thread is never read alone).
//!
//! The answer is the standard library's wherever the count may miss a panic: under loom, which
//! cannot name the running thread safely from a panic hook; before the explorations' hook is
//! installed; and for the rest of an execution in which a panic started where the checker could
//! not name its thread (shuttle's own, or one that tears a task down).

use std::sync::atomic::{AtomicBool, Ordering};

use std::cell::{Cell, RefCell};

/// How a checker names its running thread (see [`crate::runtime::SimRuntime::current_task`]).
type TaskNamer = fn() -> Option<usize>;

thread_local! {
    /// How the running execution's checker names its running thread.
    static TASK: Cell<Option<TaskNamer>> = const { Cell::new(None) };
    /// Panics in flight per checker thread of the running execution.
    static IN_FLIGHT: RefCell<Vec<(usize, usize)>> = const { RefCell::new(Vec::new()) };
    /// A panic of the running execution started where its thread could not be named.
    static UNATTRIBUTED: Cell<bool> = const { Cell::new(false) };
    /// The catches under way, in the order they were entered: the checker thread that entered
    /// each, and its panics in flight then.
    static CATCHES: RefCell<Vec<(usize, usize)>> = const { RefCell::new(Vec::new()) };
}

/// Whether the explorations' panic hook, which starts the counts, is installed.
static HOOKED: AtomicBool = AtomicBool::new(false);

/// The explorations' panic hook is installed: panics are counted from now on.
pub(crate) fn hook_installed() {
    HOOKED.store(true, Ordering::SeqCst);
}

/// Starts an execution whose checker names its threads with `task`.
pub(crate) fn begin_execution(task: TaskNamer) {
    TASK.with(|t| t.set(Some(task)));
    IN_FLIGHT.with(|in_flight| in_flight.borrow_mut().clear());
    UNATTRIBUTED.with(|u| u.set(false));
    CATCHES.with(|catches| catches.borrow_mut().clear());
}

/// The running checker thread, if it can be named.
fn running() -> Option<usize> {
    TASK.try_with(Cell::get).ok().flatten().and_then(|task| task())
}

/// The panics in flight of checker thread `id`.
fn in_flight(id: usize) -> usize {
    IN_FLIGHT.with(|in_flight| in_flight.borrow().iter().find(|(task, _)| *task == id).map_or(0, |(_, n)| *n))
}

/// Adds `delta` to the running checker thread's panics in flight. Called from the panic hook
/// too: never panics (a panic there aborts).
fn count(delta: isize) {
    let Some(task) = TASK.try_with(Cell::get).ok().flatten() else { return };
    let Some(id) = task() else {
        if delta > 0 {
            let _ = UNATTRIBUTED.try_with(|u| u.set(true));
        }
        return;
    };
    let _ = IN_FLIGHT.try_with(|in_flight| {
        let Ok(mut in_flight) = in_flight.try_borrow_mut() else { return };
        match in_flight.iter_mut().find(|(task, _)| *task == id) {
            Some((_, n)) => *n = n.saturating_add_signed(delta),
            None => in_flight.push((id, 0usize.saturating_add_signed(delta))),
        }
    });
}

/// The running checker thread starts a panic (the explorations' panic hook).
pub(crate) fn panic_started() {
    count(1);
}

/// Lets `payload` (a panic caught from another checker thread, or from user code) go on
/// unwinding in the running checker thread.
pub fn resume(payload: Box<dyn std::any::Any + Send>) -> ! {
    count(1);
    std::panic::resume_unwind(payload)
}

/// Runs `f`, catching a panic that leaves it: the running checker thread is done unwinding it.
pub fn catch<T>(f: impl FnOnce() -> T) -> std::thread::Result<T> {
    let entered = running().map(|id| (id, in_flight(id)));
    if let Some(entered) = entered {
        CATCHES.with(|catches| catches.borrow_mut().push(entered));
    }
    let caught = std::panic::catch_unwind(std::panic::AssertUnwindSafe(f));
    if let Some((id, _)) = entered {
        CATCHES.with(|catches| {
            let mut catches = catches.borrow_mut();
            if let Some(at) = catches.iter().rposition(|(task, _)| *task == id) {
                catches.remove(at);
            }
        });
    }
    if caught.is_err() {
        count(-1);
    }
    caught
}

/// Whether a panic starting here would leave a `Drop` while the running checker thread
/// unwinds, which aborts the process: it unwinds, and no catch it entered since that unwind
/// began encloses this point (one entered during the unwind, as `resident` runs user code in
/// its unwinding paths, catches the panic there). `false` where the thread cannot be named
/// (no verdict: under loom).
pub fn panic_would_abort() -> bool {
    abort_verdict().unwrap_or(false)
}

/// [`panic_would_abort`], `None` where the running checker thread cannot be named (under
/// loom) while the OS thread unwinds: no verdict.
pub fn abort_verdict() -> Option<bool> {
    if !panicking() {
        return Some(false);
    }
    let id = running()?;
    let unwinding = in_flight(id);
    let innermost =
        CATCHES.with(|catches| catches.borrow().iter().rev().find(|(task, _)| *task == id).copied());
    Some(!innermost.is_some_and(|(_, entered)| entered >= unwinding && unwinding > 0))
}

/// Whether the running checker thread is unwinding a panic (see the module docs).
pub fn panicking() -> bool {
    if !std::thread::panicking() {
        return false;
    }
    if !HOOKED.load(Ordering::SeqCst) || UNATTRIBUTED.with(Cell::get) {
        return true;
    }
    let Some(task) = TASK.with(Cell::get) else { return true };
    match task() {
        Some(id) => {
            IN_FLIGHT.with(|in_flight| in_flight.borrow().iter().any(|&(task, n)| task == id && n > 0))
        }
        None => true,
    }
}
