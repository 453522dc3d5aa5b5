//! A watchdog per exploration: an execution that makes no progress for a long time (a minute by
//! default; `RESIDENT_SIM_STALL_SECS`) ends the process with a diagnostic instead of hanging.
//!
//! shuttle and loom run every checker thread of an execution as a coroutine on one OS thread,
//! and they schedule only what goes through their own primitives (the runtime facade). A
//! blocking primitive from outside — a `std::sync::Mutex`, a `parking_lot` lock, a channel,
//! `thread::sleep` — held by one checker thread while another waits for it blocks that OS
//! thread for good: no checker can report it, and the exploration would hang without a word.
//! A correct execution takes milliseconds; one that takes a minute is that.

use std::cell::RefCell;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

/// The exit status of a process the watchdog ends.
pub const STALLED: i32 = 3;

thread_local! {
    /// The beat of the exploration running on this thread.
    static CURRENT: RefCell<Option<Arc<Beat>>> = const { RefCell::new(None) };
}

/// An execution starts on this thread: a beat for its exploration's watchdog, if any.
pub(crate) fn execution_starts() {
    CURRENT.with(|c| c.borrow().as_ref().map(|beat| beat.execution()));
}

/// Runs the exploration `f` on this thread under a watchdog ([`report_and_exit`] after
/// [`stall_limit`] without an execution starting); `label` says what it explores.
pub(crate) fn watched<T>(label: &str, f: impl FnOnce() -> T) -> T {
    struct Restore(Option<Arc<Beat>>);
    impl Drop for Restore {
        fn drop(&mut self) {
            CURRENT.with(|c| *c.borrow_mut() = self.0.take());
        }
    }
    let dog = Watchdog::start(label.to_owned(), stall_limit(), report_and_exit);
    let _restore = Restore(CURRENT.with(|c| c.borrow_mut().replace(dog.beat())));
    f()
}

/// How long an execution may go without progress: `RESIDENT_SIM_STALL_SECS`, else a minute.
pub(crate) fn stall_limit() -> Duration {
    let secs = std::env::var("RESIDENT_SIM_STALL_SECS").ok().and_then(|s| s.parse().ok());
    Duration::from_secs(secs.unwrap_or(60))
}

/// What an exploration tells its watchdog: one beat per execution started, and its end.
#[derive(Debug, Default)]
pub struct Beat {
    executions: AtomicUsize,
    done: AtomicBool,
}

impl Beat {
    /// An execution starts.
    pub fn execution(&self) {
        self.executions.fetch_add(1, Ordering::Relaxed);
    }
}

/// Watches one exploration until dropped.
pub struct Watchdog {
    beat: Arc<Beat>,
    thread: Option<JoinHandle<()>>,
}

impl Watchdog {
    /// Watches `beat` for `label` (what runs: a scenario and its checker); `stalled` runs if an
    /// execution makes no progress for `limit` (the production action reports and exits).
    pub fn start(
        label: String,
        limit: Duration,
        stalled: impl FnOnce(&str, usize, Duration) + Send + 'static,
    ) -> Self {
        let beat = Arc::new(Beat::default());
        let watched = Arc::clone(&beat);
        let thread = thread::Builder::new()
            .name("resident-sim watchdog".into())
            .spawn(move || watch(&watched, &label, limit, stalled))
            .ok();
        Self { beat, thread }
    }

    /// The beat the exploration reports to.
    pub fn beat(&self) -> Arc<Beat> {
        Arc::clone(&self.beat)
    }
}

impl Drop for Watchdog {
    fn drop(&mut self) {
        self.beat.done.store(true, Ordering::Release);
        if let Some(thread) = self.thread.take() {
            thread.thread().unpark();
            let _ = thread.join();
        }
    }
}

/// The watchdog's loop: wakes at the end of every window (or when told the exploration is
/// done) and acts if no execution started in a whole window.
fn watch(beat: &Beat, label: &str, limit: Duration, stalled: impl FnOnce(&str, usize, Duration)) {
    let (mut seen, mut since) = (beat.executions.load(Ordering::Relaxed), Instant::now());
    while !beat.done.load(Ordering::Acquire) {
        thread::park_timeout(limit.saturating_sub(since.elapsed()));
        let now = beat.executions.load(Ordering::Relaxed);
        if now != seen {
            (seen, since) = (now, Instant::now());
        } else if since.elapsed() >= limit && !beat.done.load(Ordering::Acquire) {
            stalled(label, seen, limit);
            return;
        }
    }
}

/// The production action: says what most likely happened, on stdout and stderr (an explorer
/// may have silenced stderr), and ends the process with [`STALLED`].
pub(crate) fn report_and_exit(label: &str, execution: usize, limit: Duration) {
    let message = format!(
        "resident-sim: {label}: execution {execution} made no progress for {limit:?}. The likely \
         cause: a blocking primitive from outside the runtime facade (a std::sync::Mutex, a \
         parking_lot lock, a channel, thread::sleep) that one checker thread holds while another \
         waits for it. shuttle and loom run every checker thread on one OS thread, so that wait \
         blocks them all and no checker can report it. Use the runtime's own primitives (its \
         monitor, signal and lock) in code the checkers run. (RESIDENT_SIM_STALL_SECS sets the \
         limit.)"
    );
    println!("{message}");
    eprintln!("{message}");
    std::process::exit(STALLED);
}
