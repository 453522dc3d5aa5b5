//! The churn figure alone, for a profiler: evicting adds into a `FixedSizeCache` of 4 over 8 ids,
//! round robin. `cargo run --release -p resident-bench --example churn [adds] [runs]` prints the
//! best run's nanoseconds per add; under `valgrind --tool=callgrind` (one run of few adds) it
//! counts instructions, which a busy machine does not change.

use std::hint::black_box;
use std::time::Instant;

use resident::{BoxError, FixedSizeCache, FixedSizeConfig, Loader, ManagerExt, Model, ModelId, ModelManager};

struct Tiny;

impl Model for Tiny {
    fn size_bytes(&self) -> u64 {
        1
    }
}

struct TinyLoader;

impl Loader for TinyLoader {
    type Model = Tiny;

    fn load(&self, _: &ModelId) -> Result<Tiny, BoxError> {
        Ok(Tiny)
    }
}

const IDS: [&str; 8] = ["m/0", "m/1", "m/2", "m/3", "m/4", "m/5", "m/6", "m/7"];

fn main() {
    let mut args = std::env::args().skip(1).map(|a| a.parse::<u64>());
    let adds = args.next().and_then(Result::ok).unwrap_or(300_000);
    let runs = args.next().and_then(Result::ok).unwrap_or(7);
    let cache = FixedSizeCache::new(ModelManager::new(TinyLoader), FixedSizeConfig::new(4)).expect("config");
    let mut best = f64::INFINITY;
    for _ in 0..runs {
        let start = Instant::now();
        for i in 0..adds {
            let id = IDS[(i % IDS.len() as u64) as usize];
            black_box(cache.add_model(id, None).expect("evicts"));
        }
        best = best.min(start.elapsed().as_nanos() as f64 / adds as f64);
    }
    println!("churn: {best:.0} ns per evicting add (best of {runs} runs of {adds})");
}
