//! The keep-alive timer on the production runtime (SPEC 3.8): an idle record is evicted with no
//! call from anyone, and the timer thread exits — it never outlives its group, and a shutdown
//! of the last cache with a keep-alive ends it while the group lives. The runtime here is the
//! production one with its background threads recorded, so the test joins the very thread the
//! group started. The interleavings (a release, a keep-alive set or the group's drop racing
//! the timer's sleep) are explored by the sim's `C-B3`, `W-11` and `W-12`.

use std::sync::mpsc;
use std::thread::JoinHandle;
use std::time::Duration;

use parking_lot::Mutex;
use resident::cache::{CacheGroup, PutOptions};
use resident::runtime::{Arc, Runtime, StdRuntime};

/// Generous bound on waits that end in a few milliseconds: it only turns a hang into a failure.
const HANG: Duration = Duration::from_secs(30);

/// A started thread: its name and its handle.
type Started = (String, JoinHandle<()>);

/// [`StdRuntime`], keeping the handles of the threads it starts.
#[derive(Debug, Clone, Default)]
struct Recording {
    inner: StdRuntime,
    threads: Arc<Mutex<Vec<Started>>>,
}

impl Runtime for Recording {
    type RwLock<T: Send + Sync + 'static> = <StdRuntime as Runtime>::RwLock<T>;

    fn rw_lock<T: Send + Sync + 'static>(&self, value: T) -> Self::RwLock<T> {
        self.inner.rw_lock(value)
    }

    type Atomic = <StdRuntime as Runtime>::Atomic;

    fn atomic(&self, value: u64) -> Self::Atomic {
        self.inner.atomic(value)
    }

    type Monitor<T: Send + 'static> = <StdRuntime as Runtime>::Monitor<T>;

    fn monitor<T: Send + 'static>(&self, value: T) -> Self::Monitor<T> {
        self.inner.monitor(value)
    }

    fn now(&self) -> Duration {
        self.inner.now()
    }

    fn spawn_background(&self, name: &str, f: Box<dyn FnOnce() + Send + 'static>) -> std::io::Result<()> {
        let handle = std::thread::Builder::new().name(name.to_owned()).spawn(f)?;
        self.threads.lock().push((name.to_owned(), handle));
        Ok(())
    }
}

impl Recording {
    /// Names of the threads started so far.
    fn started(&self) -> Vec<String> {
        self.threads.lock().iter().map(|(name, _)| name.clone()).collect()
    }

    /// Joins every thread started so far, failing if one does not end within [`HANG`].
    fn join_all(&self) {
        let threads = std::mem::take(&mut *self.threads.lock());
        let (done, ended) = mpsc::channel();
        std::thread::spawn(move || {
            for (_, handle) in threads {
                handle.join().expect("the timer thread panicked");
            }
            let _ = done.send(());
        });
        ended.recv_timeout(HANG).expect("a background thread did not exit");
    }
}

type Group = Arc<CacheGroup<Vec<u8>, Recording>>;

fn group(runtime: &Recording) -> Group {
    CacheGroup::with_runtime(1000, runtime.clone()).expect("valid cap")
}

#[test]
fn an_idle_record_expires_with_no_call_and_the_timer_ends_with_its_group() {
    let runtime = Recording::default();
    let group = group(&runtime);
    let gpu = group.cache("cuda:0");
    let (evicted, eviction) = mpsc::channel();
    gpu.on_evict(move |key, bytes| {
        let _ = evicted.send((key.to_owned(), bytes));
    });
    assert!(runtime.started().is_empty(), "no timer before a keep-alive");
    assert!(gpu.set_keep_alive(Some(Duration::from_millis(20))));
    assert_eq!(runtime.started(), ["resident-keep-alive"], "one timer thread per group");
    assert!(group.keep_alive_timer_running());

    drop(gpu.put("m", vec![0; 100], 100, PutOptions::default()).expect("room").into_loaded().lock());
    // Nobody calls the cache: the timer evicts the idle record.
    assert_eq!(eviction.recv_timeout(HANG).expect("expired by the timer"), ("m".to_owned(), 100));
    assert!(gpu.keys().is_empty());
    assert_eq!(group.budget().in_use(), 0);

    // A second keep-alive in the group starts no second thread.
    let cpu = group.cache("cpu");
    assert!(cpu.set_keep_alive(Some(Duration::from_secs(3600))));
    assert_eq!(runtime.started().len(), 1);

    drop((gpu, cpu, group));
    runtime.join_all();
}

#[test]
fn shutting_down_the_last_cache_with_a_keep_alive_ends_the_timer_while_the_group_lives() {
    let runtime = Recording::default();
    let group = group(&runtime);
    let (gpu, cpu) = (group.cache("cuda:0"), group.cache("cpu"));
    assert!(gpu.set_keep_alive(Some(Duration::from_secs(3600))));
    let held = gpu.put("m", vec![0; 100], 100, PutOptions::default()).expect("room").into_loaded();
    gpu.shutdown();
    assert!(!gpu.set_keep_alive(Some(Duration::from_secs(1))), "never re-armed after shutdown");
    runtime.join_all();
    assert!(!group.keep_alive_timer_running());
    drop(held);

    // The next keep-alive starts a new timer.
    assert!(cpu.set_keep_alive(Some(Duration::from_secs(3600))));
    assert!(group.keep_alive_timer_running());
    assert!(cpu.set_keep_alive(None));
    runtime.join_all();
    assert!(!group.keep_alive_timer_running(), "no keep-alive left: the timer exits");

    // A cache dropped without shutdown takes its keep-alive with it.
    assert!(cpu.set_keep_alive(Some(Duration::from_secs(3600))));
    drop(cpu);
    runtime.join_all();
    assert!(!group.keep_alive_timer_running(), "the dropped cache's keep-alive kept no timer");
}

/// The production runtime's background threads run (the keep-alive timer is one).
#[test]
fn the_production_runtime_starts_background_threads() {
    let (tx, rx) = mpsc::channel();
    StdRuntime::new()
        .spawn_background(
            "resident-test",
            Box::new(move || tx.send(std::thread::current().name().map(str::to_owned)).unwrap()),
        )
        .expect("a thread starts");
    let name = rx.recv_timeout(HANG).expect("the background thread ran");
    assert_eq!(name.as_deref(), Some("resident-test"));
}
