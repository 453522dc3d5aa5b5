//! A serving loop on burn models: one `FixedSizeCache<ModelManager>` per device, both devices'
//! caches in one `CacheGroup` (one weight store, one RAM budget), client threads sending
//! inference requests over a skewed mix of more models than a device keeps.
//!
//! `cargo run --release --example serve [-- --clients N --requests N --devices a,b]`
//! runs on ndarray (devices `cpu:0,cpu:1`); with `--features cuda` the device copies are CUDA
//! tensors (devices `cuda:0,cuda:0` by default: two caches on one GPU).

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use resident::burn::zoo::MlpSpec;
use resident::burn::{Cpu, SharedLoader, SharedWeights, save};
use resident::cache::CacheGroup;
use resident::runtime::Arc;
use resident::{BoxError, FixedSizeCache, FixedSizeConfig, Loader, Manager, ModelId, ModelManager};

#[cfg(feature = "cuda")]
type Target = resident::burn::Gpu;
#[cfg(not(feature = "cuda"))]
type Target = Cpu;
#[cfg(feature = "cuda")]
const DEVICES: &str = "cuda:0,cuda:0";
#[cfg(not(feature = "cuda"))]
const DEVICES: &str = "cpu:0,cpu:1";

const MODELS: usize = 8;
const PER_DEVICE: usize = 3;
const SPEC: MlpSpec = MlpSpec { d_in: 64, hidden: 256, d_out: 10 };

/// Counts the loads a device's manager asks for.
struct Counting<L> {
    inner: L,
    loads: AtomicU64,
}

impl<L: Loader> Loader for Counting<L> {
    type Model = L::Model;

    fn load(&self, id: &ModelId) -> Result<L::Model, BoxError> {
        self.loads.fetch_add(1, Ordering::Relaxed);
        self.inner.load(id)
    }
}

type Device = FixedSizeCache<ModelManager<Counting<SharedLoader<MlpSpec, Target>>>>;

struct Options {
    clients: usize,
    requests: usize,
    devices: Vec<String>,
}

fn options() -> Result<Options, BoxError> {
    let mut options = Options { clients: 4, requests: 20_000, devices: split(DEVICES) };
    let mut args = std::env::args().skip(1);
    while let Some(flag) = args.next() {
        let value = args.next().ok_or_else(|| format!("{flag} needs a value"))?;
        match flag.as_str() {
            "--clients" => options.clients = value.parse()?,
            "--requests" => options.requests = value.parse()?,
            "--devices" => options.devices = split(&value),
            _ => return Err(format!("unknown flag {flag}").into()),
        }
    }
    if options.clients == 0 || options.devices.is_empty() {
        return Err("need at least one client and one device".into());
    }
    Ok(options)
}

fn split(list: &str) -> Vec<String> {
    list.split(',').filter(|d| !d.is_empty()).map(str::to_owned).collect()
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

/// One request: make sure the model is resident, then run it (again if an eviction won the race).
fn request(device: &Device, id: &str, input: &[f32]) -> Result<usize, BoxError> {
    for _ in 0..10 {
        device.add_model(id, None)?;
        match device.infer(id, |model| model.infer(input)) {
            Ok(output) => return Ok(output?.len()),
            Err(resident::ManagerError::NotFound { .. }) => continue,
            Err(e) => return Err(e.into()),
        }
    }
    Err(format!("{id} was evicted ten times before it could run").into())
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    sorted[((sorted.len() - 1) as f64 * p).round() as usize]
}

fn main() -> Result<(), BoxError> {
    let options = options()?;
    let dir: PathBuf = std::env::temp_dir().join(format!("resident-serve-{}", std::process::id()));
    let model_bytes = write_models(&dir)?;
    // The RAM budget holds five of the eight models' CPU weights.
    let group = CacheGroup::<SharedWeights<MlpSpec, Target>>::new(5 * model_bytes)?;
    let arch = Arc::new(SPEC);
    let devices: Vec<Arc<Device>> = options
        .devices
        .iter()
        .map(|name| {
            let loader = SharedLoader::new(Arc::clone(&arch), &dir, &group, name)?;
            // Device copies of models the manager unloaded go first when a lock needs room.
            loader.cache().set_device_budget(Some(PER_DEVICE as u64 * model_bytes));
            let manager = ModelManager::new(Counting { inner: loader, loads: AtomicU64::new(0) });
            Ok(Arc::new(FixedSizeCache::new(manager, FixedSizeConfig::new(PER_DEVICE))?))
        })
        .collect::<Result<_, BoxError>>()?;

    let started = Instant::now();
    let per_client = options.requests.div_ceil(options.clients);
    let clients: Vec<_> = (0..options.clients)
        .map(|c| {
            let device = Arc::clone(&devices[c % devices.len()]);
            std::thread::spawn(move || -> Result<Vec<Duration>, String> {
                let mut draw = Draw(c as u64 + 1);
                let input: Vec<f32> = (0..SPEC.d_in).map(|i| (i as f32 / SPEC.d_in as f32) - 0.5).collect();
                let mut latencies = Vec::with_capacity(per_client);
                for _ in 0..per_client {
                    let id = draw.model();
                    let start = Instant::now();
                    request(&device, &id, &input).map_err(|e| e.to_string())?;
                    latencies.push(start.elapsed());
                }
                Ok(latencies)
            })
        })
        .collect();
    let mut latencies = Vec::new();
    for client in clients {
        latencies.extend(client.join().map_err(|_| "a client panicked")??);
    }
    let elapsed = started.elapsed();
    latencies.sort();
    if latencies.is_empty() {
        return Err("no requests ran".into());
    }

    println!(
        "{} requests from {} clients on {} in {elapsed:.2?}",
        latencies.len(),
        options.clients,
        options.devices.join(", ")
    );
    println!("throughput   {:.0} requests/s", latencies.len() as f64 / elapsed.as_secs_f64());
    println!(
        "latency      p50 {:.1?}   p99 {:.1?}",
        percentile(&latencies, 0.5),
        percentile(&latencies, 0.99)
    );
    for (name, device) in options.devices.iter().zip(&devices) {
        let loads = device.get_ref().loader().loads.load(Ordering::Relaxed);
        let resident = device.len() as u64;
        println!(
            "{name:<10} loads {loads:>5}   evictions {:>5}   resident {resident} of {MODELS} (max {PER_DEVICE})",
            loads - resident
        );
    }
    let budget = group.budget();
    println!(
        "RAM budget   {} of {} bytes in use (high water {}), {} canonical copies for {} models of {model_bytes} bytes",
        budget.in_use(),
        budget.cap(),
        budget.high_water(),
        group.store().live_keys().len(),
        MODELS
    );
    check_one_copy(&devices, &group)?;
    drop(devices);
    std::fs::remove_dir_all(&dir)?;
    Ok(())
}

/// Every model resident on two devices uses one canonical, and the budget counts each live
/// canonical once.
fn check_one_copy(
    devices: &[Arc<Device>],
    group: &Arc<CacheGroup<SharedWeights<MlpSpec, Target>>>,
) -> Result<(), BoxError> {
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
