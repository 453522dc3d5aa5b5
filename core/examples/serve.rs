//! A serving loop on burn models: one `FixedSizeCache<ModelManager>` per device, both devices'
//! caches in one `CacheGroup` (one weight store, one hard RAM budget), client threads sending
//! inference requests over a skewed mix of more models than a device keeps.
//!
//! `cargo run --release --example serve [-- --clients N --requests N --devices a,b --lock-all --overflow --sweep --loads-at-once N]`
//! (`--help` lists them)
//! runs on ndarray (devices `cpu:0,cpu:1`); with `--features cuda` the device copies are CUDA
//! tensors (devices `cuda:0,cuda:0` by default: two caches on one GPU).
//!
//! The heap is measured by a counting global allocator, not by the budget's own counter: the
//! example prints the peak heap above the baseline taken before serving next to the RAM cap,
//! and exits non-zero if it, or the budget's high-water mark, goes over (the peak may exceed
//! the cap by [`slack`]: what the example allocates besides model weights). `--lock-all` adds
//! every model to one device and keeps them all, so that the budget must refuse the ones that
//! do not fit: it prints the refusal. `--overflow` turns the budget's overflow policy on (the
//! soft budget of before), for comparison.

use std::alloc::System;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use peakmem_alloc::{INSTRUMENTED_SYSTEM, PeakMemAlloc, PeakMemAllocTrait};
use resident::burn::zoo::MlpSpec;
use resident::burn::{BurnWeights, Cpu, SharedLoader, SharedWeights, load_peak, save};
use resident::cache::CacheGroup;
use resident::runtime::Arc;
use resident::{
    BoxError, CacheError, CallOptions, FixedSizeCache, FixedSizeConfig, Loader, ManagerError, ManagerExt,
    ModelId, ModelManager,
};

#[global_allocator]
static HEAP: &PeakMemAlloc<System> = &INSTRUMENTED_SYSTEM;

#[cfg(feature = "cuda")]
type Target = resident::burn::Gpu;
#[cfg(not(feature = "cuda"))]
type Target = Cpu;
#[cfg(feature = "cuda")]
const DEVICES: &str = "cuda:0,cuda:0";
#[cfg(not(feature = "cuda"))]
const DEVICES: &str = "cpu:0,cpu:1";

const MODELS: usize = 8;
const PER_DEVICE: usize = 2;
const SPEC: MlpSpec = MlpSpec { d_in: 64, hidden: 1024, d_out: 10 };
/// How long a load waits for room before the budget refuses it.
const ROOM_WAIT: Duration = Duration::from_millis(200);

/// Counts the loads a device's manager asks for.
struct Counting<L> {
    inner: L,
    loads: AtomicU64,
}

impl<L: Loader> Loader for Counting<L> {
    type Model = L::Model;

    fn load(&self, id: &ModelId) -> Result<L::Model, BoxError> {
        self.load_until(id, resident::Deadline::NONE)
    }

    fn load_until(&self, id: &ModelId, deadline: resident::Deadline) -> Result<L::Model, BoxError> {
        self.loads.fetch_add(1, Ordering::Relaxed);
        self.inner.load_until(id, deadline)
    }

    fn reload_until(&self, id: &ModelId, deadline: resident::Deadline) -> Result<L::Model, BoxError> {
        self.loads.fetch_add(1, Ordering::Relaxed);
        self.inner.reload_until(id, deadline)
    }

    // A wrapper forwards the registration too: a loader inside it may key on it.
    fn load_as(
        &self,
        registered: &ModelId,
        id: &ModelId,
        deadline: resident::Deadline,
    ) -> Result<L::Model, BoxError> {
        self.loads.fetch_add(1, Ordering::Relaxed);
        self.inner.load_as(registered, id, deadline)
    }

    fn reload_as(
        &self,
        registered: &ModelId,
        id: &ModelId,
        deadline: resident::Deadline,
    ) -> Result<L::Model, BoxError> {
        self.loads.fetch_add(1, Ordering::Relaxed);
        self.inner.reload_as(registered, id, deadline)
    }

    fn declared_bytes(&self, id: &ModelId) -> Result<Option<u64>, BoxError> {
        self.inner.declared_bytes(id)
    }
}

type Device = FixedSizeCache<ModelManager<Counting<SharedLoader<MlpSpec, Target>>>>;

/// Serves burn models from client threads through one `FixedSizeCache` per device over one
/// hard RAM budget, and checks the heap against the budget.
#[derive(clap::Parser)]
struct Options {
    /// Client threads sending requests.
    #[arg(long, default_value_t = 4, value_parser = clap::value_parser!(u64).range(1..))]
    clients: u64,
    /// Requests in all.
    #[arg(long, default_value_t = 20_000)]
    requests: usize,
    /// Devices, comma-separated (one cache each).
    #[arg(long, default_value = DEVICES, value_delimiter = ',', num_args = 1..)]
    devices: Vec<String>,
    /// Add every model to one device and keep them all: the budget must refuse the ones that do
    /// not fit.
    #[arg(long)]
    lock_all: bool,
    /// Turn the budget's overflow policy on (the soft budget of before), for comparison.
    #[arg(long)]
    overflow: bool,
    /// Run the workload with 2, 4, 8 and 16 clients in turn (`--requests` each) and print a
    /// row per run: throughput, p50, p99 and loads refused for room.
    #[arg(long, conflicts_with = "lock_all")]
    sweep: bool,
    /// How many loads' peaks the RAM cap leaves room for beside the models the devices keep.
    /// With one (the default), the loads run one at a time: the budget's line serializes them.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u64).range(1..))]
    loads_at_once: u64,
}

/// What one run measured.
struct Row {
    clients: usize,
    requests: usize,
    throughput: f64,
    p50: Duration,
    p99: Duration,
    refusals: u64,
}

/// Writes the model set: `MODELS` MLPs, weights from seeds 1..=MODELS.
fn write_models(dir: &Path) -> Result<u64, BoxError> {
    let mut bytes = 0;
    for seed in 1..=MODELS as u64 {
        let module = SPEC.generate::<Cpu>(seed, &Default::default());
        bytes = resident::burn::param_bytes(&module);
        save(&module, &dir.join(format!("m{seed}.safetensors")))?;
    }
    Ok(bytes)
}

/// A splitmix64 stream: the clients' request mix, the same on every run.
struct Draw(u64);

impl Draw {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Model `k` with probability proportional to 1 / (k + 1).
    fn model(&mut self) -> String {
        let weights: Vec<f64> = (0..MODELS).map(|k| 1.0 / (k + 1) as f64).collect();
        let mut point = (self.next() >> 11) as f64 / (1u64 << 53) as f64 * weights.iter().sum::<f64>();
        let k = weights.iter().position(|w| {
            point -= w;
            point < 0.0
        });
        format!("m{}", k.unwrap_or(MODELS - 1) + 1)
    }
}

/// Whether a load was refused because the RAM budget had no room in time.
fn no_room(error: &ManagerError) -> bool {
    matches!(error, ManagerError::Load { source, .. }
        if matches!(source.downcast_ref::<CacheError>(), Some(CacheError::NoRoom { .. })))
}

/// Whether an add was refused for room: by the RAM budget, or by the device's model count
/// (its in-flight loads waited for RAM past the count's wait).
fn refused(error: &ManagerError) -> bool {
    no_room(error) || matches!(error, ManagerError::CapacityExhausted { .. })
}

/// One request: make sure the model is resident, then run it (again if an eviction won the
/// race). A load the budget refused is retried, as a client would after a 503; `refusals`
/// counts them.
fn request(device: &Device, id: &str, input: &[f32], refusals: &AtomicU64) -> Result<usize, BoxError> {
    for _ in 0..50 {
        match device.add_model(id, None) {
            Ok(_) => {}
            Err(e) if refused(&e) => {
                refusals.fetch_add(1, Ordering::Relaxed);
                continue;
            }
            Err(e) => return Err(e.into()),
        }
        match device.infer(id, |model| model.infer(input)) {
            Ok(output) => return Ok(output?.len()),
            Err(ManagerError::NotFound { .. }) => continue,
            Err(e) => return Err(e.into()),
        }
    }
    Err(format!("{id} could not run in fifty tries").into())
}

/// What the example allocates at once besides the budgeted weights, at most: per client, one
/// inference — ndarray copies a layer's weight matrix into standard layout and the matrix
/// multiply packs it, about twice the layers' weights (measured: one more client adds about
/// 546 KB at peak for 303 KB of weight matrices) — plus its activations; and once, 64 KiB for
/// the file names, errors and maps of the caches and managers. None of it is model weights,
/// so none of it is the budget's to count.
fn slack(clients: usize) -> u64 {
    let weights = 4 * (SPEC.d_in * SPEC.hidden + SPEC.hidden * SPEC.d_out) as u64;
    let activations = 4 * 4 * (SPEC.d_in + SPEC.hidden + SPEC.d_out) as u64;
    clients as u64 * (2 * weights + activations) + 64 * 1024
}

/// The heap a single load of `path` allocates at once, measured by the allocator, against what
/// the loader reserves for it.
fn measure_load(arch: &Arc<MlpSpec>, path: &Path) -> Result<(u64, u64), BoxError> {
    HEAP.reset_peak_memory();
    let weights = BurnWeights::<MlpSpec, Target>::load(Arc::clone(arch), path)?;
    let measured = HEAP.get_peak_memory() as u64;
    let declared = weights.stats().bytes;
    drop(weights);
    // The largest tensor of the MLP: its first layer's weight.
    let largest = 4 * (SPEC.d_in * SPEC.hidden).max(SPEC.hidden * SPEC.d_out) as u64;
    Ok((measured, load_peak(declared, largest, std::fs::metadata(path)?.len())))
}

/// `--lock-all`: adds every model to one device and keeps them all, until the budget refuses.
fn lock_all(device: &Device, group: &Group) -> Result<(), BoxError> {
    let mut refused = None;
    for k in 1..=MODELS {
        let id = format!("m{k}");
        match device.add_model(&id, None) {
            Ok(_) => println!(
                "locked       {id}: {} of {} bytes in use",
                group.budget().in_use(),
                group.budget().cap()
            ),
            Err(e) if no_room(&e) => {
                println!("refused      {id}: {e}");
                refused.get_or_insert(e);
            }
            Err(e) => return Err(e.into()),
        }
    }
    refused.map(drop).ok_or_else(|| "the budget never refused a model with every model locked".into())
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    sorted[((sorted.len() - 1) as f64 * p).round() as usize]
}

type Group = CacheGroup<SharedWeights<MlpSpec, Target>>;

fn main() -> Result<(), BoxError> {
    let options = <Options as clap::Parser>::parse();
    if !options.sweep {
        return serve(&options, options.clients as usize).map(drop);
    }
    let mut rows = Vec::new();
    for clients in [2, 4, 8, 16] {
        rows.push(serve(&options, clients)?);
        println!();
    }
    println!("clients   requests   throughput (req/s)        p50        p99   refused for room");
    for row in &rows {
        println!(
            "{:>7}   {:>8}   {:>18.0}   {:>8.1?}   {:>8.1?}   {:>16}",
            row.clients, row.requests, row.throughput, row.p50, row.p99, row.refusals
        );
    }
    Ok(())
}

/// One run of the workload with `clients` client threads: its own models, budget and caches.
fn serve(options: &Options, clients: usize) -> Result<Row, BoxError> {
    let dir: PathBuf = std::env::temp_dir().join(format!("resident-serve-{}-{clients}", std::process::id()));
    let model_bytes = write_models(&dir)?;
    let arch = Arc::new(SPEC);
    let (load_heap, load_reserved) = measure_load(&arch, &dir.join("m1.safetensors"))?;
    // The RAM budget fits what the devices can lock at once while one of them loads: every
    // device's models but the one its cache evicts to make room, plus one load's peak (about
    // three models' bytes, see `measure_load`). Any less, and a device whose peers hold the rest
    // could wait for room until they evict. Six of the eight models' weights here. With
    // `--loads-at-once N`, room for N loads' peaks.
    let locked_while_loading = (options.devices.len() * PER_DEVICE - 1) as u64 * model_bytes;
    let group = Group::new(locked_while_loading + options.loads_at_once * load_reserved)?;
    group.budget().set_room_wait(ROOM_WAIT);
    group.budget().set_overflow(options.overflow);
    let per_device = if options.lock_all { MODELS } else { PER_DEVICE };
    let devices: Vec<Arc<Device>> = options
        .devices
        .iter()
        .map(|name| {
            let loader = SharedLoader::new(Arc::clone(&arch), &dir, &group, name)?;
            // Device copies of models the manager unloaded go first when a lock needs room.
            loader.cache().set_device_budget(Some(per_device as u64 * model_bytes), CallOptions::new())?;
            let manager = ModelManager::new(Counting { inner: loader, loads: AtomicU64::new(0) });
            Ok(Arc::new(FixedSizeCache::new(manager, FixedSizeConfig::new(per_device))?))
        })
        .collect::<Result<_, BoxError>>()?;
    let input: Vec<f32> = (0..SPEC.d_in).map(|i| (i as f32 / SPEC.d_in as f32) - 0.5).collect();
    let per_client = options.requests.div_ceil(clients);
    let mut buffers: Vec<Vec<Duration>> = (0..clients).map(|_| Vec::with_capacity(per_client)).collect();
    let refusals = Arc::new(AtomicU64::new(0));

    // Everything above is the baseline; from here the heap holds models and requests.
    HEAP.reset_peak_memory();
    let started = Instant::now();
    if options.lock_all {
        lock_all(&devices[0], &group)?;
    } else {
        let clients: Vec<_> = buffers
            .drain(..)
            .enumerate()
            .map(|(c, mut latencies)| {
                let (device, input, refusals) =
                    (Arc::clone(&devices[c % devices.len()]), input.clone(), Arc::clone(&refusals));
                std::thread::spawn(move || -> Result<Vec<Duration>, String> {
                    let mut draw = Draw(c as u64 + 1);
                    for _ in 0..per_client {
                        let id = draw.model();
                        let start = Instant::now();
                        request(&device, &id, &input, &refusals).map_err(|e| e.to_string())?;
                        latencies.push(start.elapsed());
                    }
                    Ok(latencies)
                })
            })
            .collect();
        for client in clients {
            buffers.push(client.join().map_err(|_| "a client panicked")??);
        }
    }
    let elapsed = started.elapsed();
    let heap_peak = HEAP.get_peak_memory() as u64;
    let mut latencies: Vec<Duration> = buffers.into_iter().flatten().collect();
    latencies.sort();
    let refused = refusals.load(Ordering::Relaxed);
    let row = Row {
        clients,
        requests: latencies.len(),
        throughput: latencies.len() as f64 / elapsed.as_secs_f64(),
        p50: latencies.first().map_or(Duration::ZERO, |_| percentile(&latencies, 0.5)),
        p99: latencies.first().map_or(Duration::ZERO, |_| percentile(&latencies, 0.99)),
        refusals: refused,
    };

    if !latencies.is_empty() {
        println!(
            "{} requests from {clients} clients on {} in {elapsed:.2?}",
            latencies.len(),
            options.devices.join(", ")
        );
        println!("throughput   {:.0} requests/s", row.throughput);
        println!("latency      p50 {:.1?}   p99 {:.1?}", row.p50, row.p99);
    }
    for (name, device) in options.devices.iter().zip(&devices) {
        let loads = device.get_ref().loader().loads.load(Ordering::Relaxed);
        let resident = device.len() as u64;
        println!(
            "{name:<10} loads {loads:>5}   evictions {:>5}   resident {resident} of {MODELS} (max {per_device})",
            loads.saturating_sub(resident)
        );
    }
    let budget = group.budget();
    let (cap, high_water) = (budget.cap(), budget.high_water());
    println!(
        "RAM budget   {} of {cap} bytes in use (high water {high_water}), {} canonical copies for {} models of {model_bytes} bytes, {} loads refused for room",
        budget.in_use(),
        group.store().live_keys().len(),
        MODELS,
        refused
    );
    let slack = slack(clients);
    println!(
        "heap         peak {heap_peak} bytes above the baseline, cap {cap} + slack {slack}; one load allocates {load_heap} at once, reserves {load_reserved}"
    );
    check_one_copy(&devices, &group)?;
    drop(devices);
    std::fs::remove_dir_all(&dir)?;
    if options.overflow {
        println!("overflow     on: the budget is soft, so neither figure is held to the cap");
        return Ok(row);
    }
    if high_water > cap {
        return Err(format!("the budget's high water {high_water} is over its cap {cap}").into());
    }
    if heap_peak > cap + slack {
        return Err(format!(
            "the heap peaked {heap_peak} bytes above the baseline, over the cap {cap} + slack {slack}"
        )
        .into());
    }
    if load_heap > load_reserved {
        return Err(format!("a load allocated {load_heap} bytes at once but reserves {load_reserved}").into());
    }
    Ok(row)
}

/// Every model resident on two devices uses one canonical, and the budget counts each live
/// canonical once.
fn check_one_copy(devices: &[Arc<Device>], group: &Arc<Group>) -> Result<(), BoxError> {
    let resident: Vec<_> =
        devices.iter().flat_map(|d| d.get_ref().loader().inner.cache().resident()).collect();
    let mut shared = 0;
    for record in &resident {
        let same_key = resident.iter().filter(|r| r.key == record.key);
        if same_key.clone().any(|r| r.canonical != record.canonical) {
            return Err(format!("{} has two CPU copies", record.key).into());
        }
        shared += usize::from(same_key.count() > 1);
    }
    let live = group.store().live_keys().len() as u64;
    let counted = group.budget().in_use();
    let per_model = resident.first().map_or(0, |r| r.bytes);
    if counted != live * per_model {
        return Err(format!("budget {counted} != {live} canonicals × {per_model} bytes").into());
    }
    println!(
        "one copy     {} records resident across devices, {} of them sharing a canonical with a peer: budget = {live} × {per_model}",
        resident.len(),
        shared
    );
    Ok(())
}
