//! The paths every inference request takes: a lease on the base manager, a lease through the
//! LRU cache (which also touches the queue), a warm `add_model`, and `get` + `lock` on the
//! shared-weight cache. Results are written up in BENCHMARKS.md.

use std::hint::black_box;

use criterion::{Criterion, criterion_group, criterion_main};
use resident::cache::{CacheGroup, PutOptions};
use resident::{FixedSizeCache, FixedSizeConfig, ManagerExt, ModelManager};
use resident_bench::tiny::{IDS, TinyLoader};

fn manager(c: &mut Criterion) {
    let m = ModelManager::new(TinyLoader);
    for id in IDS {
        m.add_model(id, None).unwrap();
    }
    c.bench_function("manager/lease+drop", |b| {
        b.iter(|| drop(black_box(m.lease(black_box("m/3")).unwrap())))
    });
    c.bench_function("manager/add_model warm", |b| b.iter(|| m.add_model(black_box("m/3"), None).unwrap()));
}

fn fixed_size(c: &mut Criterion) {
    let cache = FixedSizeCache::new(ModelManager::new(TinyLoader), FixedSizeConfig::new(8)).unwrap();
    for id in IDS {
        cache.add_model(id, None).unwrap();
    }
    let mut i = 0;
    c.bench_function("fixed_size/lease+touch (8 queued)", |b| {
        b.iter(|| {
            i = (i + 1) % IDS.len();
            drop(black_box(cache.lease(IDS[i]).unwrap()))
        })
    });
    c.bench_function("fixed_size/add_model warm", |b| {
        b.iter(|| cache.add_model(black_box("m/3"), None).unwrap())
    });
}

fn shared_cache(c: &mut Criterion) {
    let group = CacheGroup::<u64>::new(1 << 30).unwrap();
    let gpu = group.cache("cuda:0");
    for id in IDS {
        drop(gpu.put(id, 0, 1 << 20, PutOptions::default()).unwrap());
    }
    c.bench_function("cache/get+lock+drop", |b| {
        b.iter(|| drop(black_box(gpu.get(black_box("m/3")).unwrap().lock())))
    });
}

criterion_group!(benches, manager, fixed_size, shared_cache);
criterion_main!(benches);
