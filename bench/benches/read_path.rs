//! resident's read paths beside the caches people would pick instead, as ratios to
//! `quick_cache::sync::Cache::get` measured in the same round: one thread, two threads on
//! distinct keys (aggregate throughput) and two threads on one key, and each path's one-thread
//! time in uncontended atomic read-modify-writes measured in the same round (what a safe read
//! path is made of: the unit its floor is counted in). Each figure is the median
//! of `RESIDENT_BENCH_ROUNDS` (default 5) interleaved rounds, each started at a one-minute load
//! average of at most `RESIDENT_BENCH_MAX_LOAD` (default 0.5). Also: churn (an evicting add
//! through `FixedSizeCache`), a stampede (32 threads add one cold model whose load takes 20 ms:
//! one load, and each caller's wait beyond it), the overlap of 16 distinct cold loads, and the
//! RSS four peer caches of one 64 MiB model add (one copy of the weights, shared).
//! `cargo bench -p resident-bench` (`just bench`); the table goes into BENCHMARKS.md.

use std::collections::HashMap;
use std::hint::black_box;
use std::num::NonZeroUsize;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

use criterion::Criterion;
use parking_lot::Mutex;
use resident::cache::{CacheGroup, DeviceCache, PutOptions};
use resident::{BoxError, FixedSizeCache, FixedSizeConfig, Loader, ManagerExt, Model, ModelId, ModelManager};
use resident_bench::tiny::{IDS, Tiny, TinyLoader};
use resident_bench::{Rounds, rss_bytes, wait_until_quiet};

/// One read path: `op(key)` does one operation on key `IDS[key]`.
type Op = Box<dyn Fn(usize) + Sync>;

/// How many threads run a path, on which keys.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Threads {
    One,
    TwoDistinct,
    TwoSame,
}

impl Threads {
    const ALL: [Threads; 3] = [Threads::One, Threads::TwoDistinct, Threads::TwoSame];

    fn label(self) -> &'static str {
        match self {
            Threads::One => "1 thread",
            Threads::TwoDistinct => "2 threads, distinct keys",
            Threads::TwoSame => "2 threads, one key",
        }
    }

    /// Runs `iters` operations per thread; returns the wall time per `iters` operations of
    /// the aggregate (two threads doing `iters` each in `w` did `iters` in `w / 2`).
    fn run(self, op: &Op, iters: u64) -> Duration {
        match self {
            Threads::One => {
                let start = Instant::now();
                for _ in 0..iters {
                    op(3);
                }
                start.elapsed()
            }
            Threads::TwoDistinct | Threads::TwoSame => {
                let barrier = Barrier::new(3);
                let keys = if self == Threads::TwoDistinct { [3, 5] } else { [3, 3] };
                std::thread::scope(|scope| {
                    for key in keys {
                        let barrier = &barrier;
                        scope.spawn(move || {
                            barrier.wait();
                            for _ in 0..iters {
                                op(key);
                            }
                        });
                    }
                    barrier.wait();
                    let start = Instant::now();
                    // The scope joins both threads when the closure returns: time that too.
                    start
                })
                .elapsed()
                    / 2
            }
        }
    }
}

struct Path {
    name: &'static str,
    /// The target ratio to quick_cache `get` on one thread, if it sets one.
    target: Option<f64>,
    op: Op,
}

fn paths() -> Vec<Path> {
    let quick = quick_cache::sync::Cache::<String, Arc<Tiny>>::new(64);
    let moka = moka::sync::Cache::<String, Arc<Tiny>>::new(64);
    let map = Mutex::new(HashMap::<String, Arc<Tiny>>::new());
    let lru = Mutex::new(lru::LruCache::<String, Arc<Tiny>>::new(NonZeroUsize::new(64).expect("64")));
    for id in IDS {
        quick.insert(id.to_owned(), Arc::new(Tiny));
        moka.insert(id.to_owned(), Arc::new(Tiny));
        map.lock().insert(id.to_owned(), Arc::new(Tiny));
        lru.lock().put(id.to_owned(), Arc::new(Tiny));
    }
    // One atomic read-modify-write per operation, each key's word on a cache line of its own: the
    // unit the paths are counted in (a shard lock taken and released is two, an `Arc` cloned and
    // dropped two, a compare-exchange one).
    let words: [Line; 8] = Default::default();
    let manager = ModelManager::new(TinyLoader);
    let lru_manager =
        FixedSizeCache::new(ModelManager::new(TinyLoader), FixedSizeConfig::new(8)).expect("config");
    for id in IDS {
        manager.add_model(id, None).expect("loads");
        lru_manager.add_model(id, None).expect("loads");
    }
    let (manager, lru_manager) = (Arc::new(manager), Arc::new(lru_manager));
    let device = device_cache(None);
    let keep_alive = device_cache(Some(Duration::from_secs(3600)));
    let one_step = device_cache(None);
    let m = Arc::clone(&manager);
    vec![
        Path {
            name: "quick_cache get",
            target: None,
            op: Box::new(move |k| drop(black_box(quick.get(IDS[k])))),
        },
        Path { name: "moka get", target: None, op: Box::new(move |k| drop(black_box(moka.get(IDS[k])))) },
        Path {
            name: "Mutex<HashMap> get+clone",
            target: None,
            op: Box::new(move |k| drop(black_box(map.lock().get(IDS[k]).cloned()))),
        },
        Path {
            name: "strict LRU mutex get+clone",
            target: None,
            op: Box::new(move |k| drop(black_box(lru.lock().get(IDS[k]).cloned()))),
        },
        Path {
            name: RMW,
            target: None,
            op: Box::new(move |k| {
                black_box(words[k].0.fetch_add(1, Ordering::AcqRel));
            }),
        },
        Path {
            name: "ModelManager::infer",
            target: Some(1.0),
            op: Box::new(move |k| {
                black_box(m.infer(IDS[k], |model| model.size_bytes()).expect("registered"));
            }),
        },
        Path {
            name: "ModelManager::lease+drop",
            target: Some(0.7),
            op: Box::new(move |k| drop(black_box(manager.lease(IDS[k]).expect("registered")))),
        },
        Path {
            name: "FixedSizeCache::lease+drop",
            target: Some(0.6),
            op: Box::new(move |k| drop(black_box(lru_manager.lease(IDS[k]).expect("registered")))),
        },
        Path {
            name: "DeviceCache::get+lock+drop",
            target: Some(0.4),
            op: Box::new(move |k| drop(black_box(device.1.get(IDS[k]).expect("resident").lock()))),
        },
        Path {
            name: "DeviceCache::get+lock+drop, keep-alive",
            target: Some(0.4),
            op: Box::new(move |k| drop(black_box(keep_alive.1.get(IDS[k]).expect("resident").lock()))),
        },
        Path {
            name: "DeviceCache::get_locked+drop",
            target: Some(0.4),
            op: Box::new(move |k| drop(black_box(one_step.1.get_locked(IDS[k]).expect("resident")))),
        },
    ]
}

/// A device cache holding every id, with `keep_alive` set, and its group.
fn device_cache(keep_alive: Option<Duration>) -> (Arc<CacheGroup<u64>>, Arc<DeviceCache<u64>>) {
    let group = CacheGroup::<u64>::new(1 << 30).expect("cap");
    let cache = group.cache("cuda:0");
    cache.set_keep_alive(keep_alive);
    for id in IDS {
        drop(cache.put(id, 0, 1 << 20, PutOptions::default()).expect("room"));
    }
    (group, cache)
}

/// A loader whose every load takes `LOAD_TIME` (a model read from disk, simulated: the time is
/// the point, not a synchronisation), counting its loads.
struct Slow {
    loads: AtomicUsize,
}

const LOAD_TIME: Duration = Duration::from_millis(20);

impl Loader for Slow {
    type Model = Tiny;

    fn load(&self, _: &ModelId) -> Result<Tiny, BoxError> {
        self.loads.fetch_add(1, Ordering::Relaxed);
        std::thread::sleep(LOAD_TIME);
        Ok(Tiny)
    }
}

/// `threads` callers add the ids `id(n)` at once on a fresh manager whose loads take
/// `LOAD_TIME`; returns the loads run, each caller's time from the start, and the wall time.
fn cold_adds(threads: usize, id: impl Fn(usize) -> String + Sync) -> (usize, Vec<Duration>, Duration) {
    let manager = ModelManager::new(Slow { loads: AtomicUsize::new(0) });
    let barrier = Barrier::new(threads + 1);
    let (times, wall) = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..threads)
            .map(|n| {
                let (manager, barrier, id) = (&manager, &barrier, &id);
                scope.spawn(move || {
                    barrier.wait();
                    let start = Instant::now();
                    manager.add_model(&id(n), None).expect("loads");
                    start.elapsed()
                })
            })
            .collect();
        barrier.wait();
        let start = Instant::now();
        let times: Vec<Duration> = handles.into_iter().map(|h| h.join().expect("no panic")).collect();
        (times, start.elapsed())
    });
    (manager.loader().loads.load(Ordering::Relaxed), times, wall)
}

/// The RSS growth of four peer caches of one group holding one 64 MiB model (the first puts
/// the weights, the three others adopt them), in copies of the weights.
fn shared_weights() -> Option<f64> {
    const BYTES: usize = 64 << 20;
    let before = rss_bytes()?;
    let group = CacheGroup::<Vec<u8>>::new(1 << 31).expect("cap");
    let first = group.cache("cuda:0");
    // Touched, so that the pages are resident.
    let weights = vec![1u8; BYTES];
    let held = first.put("big", weights, BYTES as u64, PutOptions::default()).expect("room").into_loaded();
    let peers: Vec<_> = (1..4).map(|d| group.cache(&format!("cuda:{d}"))).collect();
    let adopted: Vec<_> = peers
        .iter()
        .map(|peer| peer.adopt("big").expect("adopts").expect("the canonical is alive").into_loaded())
        .collect();
    let after = rss_bytes()?;
    drop((adopted, held));
    Some(after.saturating_sub(before) as f64 / BYTES as f64)
}

/// The `q` quantile (0..=1) of `times`, nearest rank.
fn quantile(times: &mut [Duration], q: f64) -> Duration {
    times.sort();
    let rank = ((q * times.len() as f64).ceil() as usize).clamp(1, times.len());
    times[rank - 1]
}

fn env<T: std::str::FromStr>(name: &str, default: T) -> T {
    std::env::var(name).ok().and_then(|v| v.parse().ok()).unwrap_or(default)
}

fn main() {
    let rounds: usize = env("RESIDENT_BENCH_ROUNDS", 5);
    let max_load: f64 = env("RESIDENT_BENCH_MAX_LOAD", 0.5);
    let mut criterion = Criterion::default()
        .warm_up_time(Duration::from_millis(300))
        .measurement_time(Duration::from_secs(1))
        .configure_from_args();
    let paths = paths();
    let mut results = Rounds::default();
    for round in 1..=rounds {
        let (load, waited) = wait_until_quiet(max_load, Duration::from_secs(600));
        let load = load.map_or_else(|| "unknown".to_owned(), |l| format!("{l:.2}"));
        let note = if waited { " (after waiting)" } else { "" };
        println!("== round {round} of {rounds}: load average {load}{note}");
        for threads in Threads::ALL {
            for path in &paths {
                let case = format!("{} / {}", path.name, threads.label());
                let mut spent = (Duration::ZERO, 0u64);
                criterion.bench_function(&case, |b| {
                    b.iter_custom(|iters| {
                        let took = threads.run(&path.op, iters);
                        spent = (spent.0 + took, spent.1 + iters);
                        took
                    })
                });
                record(&mut results, &case, spent);
            }
        }
        let churn =
            format!("churn: FixedSizeCache max 4 over 8 ids, evicting add / {}", Threads::One.label());
        let cache =
            FixedSizeCache::new(ModelManager::new(TinyLoader), FixedSizeConfig::new(4)).expect("config");
        let mut next = 0;
        let mut spent = (Duration::ZERO, 0u64);
        criterion.bench_function(&churn, |b| {
            b.iter_custom(|iters| {
                let start = Instant::now();
                for _ in 0..iters {
                    next = (next + 1) % IDS.len();
                    black_box(cache.add_model(IDS[next], None).expect("evicts"));
                }
                let took = start.elapsed();
                spent = (spent.0 + took, spent.1 + iters);
                took
            })
        });
        record(&mut results, &churn, spent);
        let (loads, mut times, _) = cold_adds(32, |_| "m/stampede".to_owned());
        let p99 = quantile(&mut times, 0.99).saturating_sub(LOAD_TIME);
        println!("stampede: 32 callers, {loads} load(s), p99 completion - load time {p99:?}");
        assert_eq!(loads, 1, "a stampede on one cold model runs one load");
        results.record(STAMPEDE, p99.as_nanos() as f64);
        let (loads, _, wall) = cold_adds(16, |n| format!("m/cold/{n}"));
        println!("overlap: 16 distinct cold models, {loads} loads, {wall:?} wall");
        results.record(OVERLAP, wall.as_nanos() as f64);
        if let Some(copies) = shared_weights() {
            println!("shared weights: 4 peers of one 64 MiB model, RSS grew by {copies:.2} copies");
            results.record(SHARED, copies);
        }
    }
    report(&paths, &results, rounds);
}

/// Records a case's time per operation in this round, if it ran (a filter on the command line
/// may leave it out).
fn record(results: &mut Rounds, case: &str, (time, ops): (Duration, u64)) {
    if ops > 0 {
        results.record(case, time.as_nanos() as f64 / ops as f64);
    }
}

/// The baseline of one uncontended atomic read-modify-write.
const RMW: &str = "one atomic RMW (fetch_add)";

/// An atomic word on a cache line of its own.
#[derive(Default)]
#[repr(align(128))]
struct Line(std::sync::atomic::AtomicU64);

const STAMPEDE: &str = "stampede: p99 completion - load time";
const OVERLAP: &str = "overlap: 16 distinct cold loads, wall";
const SHARED: &str = "shared weights: RSS growth in copies";

fn report(paths: &[Path], results: &Rounds, rounds: usize) {
    let base = format!("quick_cache get / {}", Threads::One.label());
    println!(
        "\nRatios to `quick_cache get` on one thread, same round (higher is faster); median of {rounds} rounds:"
    );
    println!(
        "| path | 1 thread | in RMWs | target | met | 2 threads, distinct keys (aggregate) | scaling | 2 threads, one key |"
    );
    println!("|---|---|---|---|---|---|---|---|");
    let rmw = results.median_ns(&format!("{RMW} / {}", Threads::One.label()));
    for path in paths {
        let case = |t: Threads| format!("{} / {}", path.name, t.label());
        let one = results.ratio(&case(Threads::One), &base);
        let distinct = results.ratio(&case(Threads::TwoDistinct), &base);
        let same = results.ratio(&case(Threads::TwoSame), &base);
        let scaling = results.ratio(&case(Threads::TwoDistinct), &case(Threads::One));
        let (target, met) = match path.target {
            Some(t) => (format!("≥ {t}×"), if one >= t && scaling >= 1.5 { "met" } else { "missed" }),
            None => ("baseline".to_owned(), ""),
        };
        let ns = results.median_ns(&case(Threads::One));
        println!(
            "| {} | {one:.2} ({ns:.0} ns) | {:.1} | {target} | {met} | {distinct:.2} | {scaling:.2}× | {same:.2} |",
            path.name,
            ns / rmw
        );
    }
    let churn = format!("churn: FixedSizeCache max 4 over 8 ids, evicting add / {}", Threads::One.label());
    let ns = results.median_ns(&churn);
    let met = if ns.is_nan() {
        "not measured"
    } else if ns <= 1000.0 {
        "met"
    } else {
        "missed"
    };
    println!(
        "\nChurn (FixedSizeCache max 4 over 8 ids, round-robin add_model): {ns:.0} ns per evicting add (target ≤ 1 µs: {met})"
    );
    let p99 = results.median_ns(STAMPEDE) / 1e6;
    let met = if p99 <= 2.0 { "met" } else { "missed" };
    println!(
        "Stampede (32 callers, one cold model, 20 ms load, one load): p99 completion - load time {p99:.2} ms (target ≤ 2 ms: {met})"
    );
    let wall = results.median_ns(OVERLAP) / 1e6;
    println!(
        "Overlap (16 distinct cold models, 20 ms loads): {wall:.1} ms wall ({:.2}× one load)",
        wall / 20.0
    );
    let copies = results.median_ns(SHARED);
    let met = if copies <= 1.1 { "met" } else { "missed" };
    println!(
        "Shared weights (4 peers of one 64 MiB model): RSS grew by {copies:.2} copies (target ≤ 1.1: {met})"
    );
}
