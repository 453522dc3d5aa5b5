//! The GPU smoke run: each fixture model served on CUDA through the manager and a cache group,
//! compared with its stored CPU outputs, unloaded, and served again from the group's shared
//! canonical (no second file read), with the driver's and the CUDA runtime's memory figures
//! around each step.
//!
//! Built by `scripts/cuda-smoke.sh` (`--release --features cuda`); exits 2 with a typed error
//! where there is no CUDA driver.

use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};

use resident::burn::zoo::{CnnSpec, MlpSpec};
use resident::burn::{Architecture, BurnError, Gpu, SharedLoader, SharedWeights, cuda_driver_present};
use resident::cache::CacheGroup;
use resident::runtime::Arc;
use resident::{BoxError, ManagerExt, ModelManager};

#[derive(serde::Deserialize)]
struct Expected {
    id: String,
    kind: String,
    sizes: [usize; 3],
    input: Vec<f32>,
    output: Vec<f32>,
}

#[derive(serde::Deserialize)]
struct Fixtures {
    models: Vec<Expected>,
}

/// Device memory as the driver sees it (`nvidia-smi`) and as burn's CUDA runtime sees it (its
/// pools for this thread's stream, which keep freed memory reserved).
fn memory_report() -> String {
    use cubecl::Runtime;
    let out = Command::new("nvidia-smi").args(["--query-gpu=memory.used", "--format=csv,noheader"]).output();
    let driver = match out {
        Ok(out) if out.status.success() => String::from_utf8_lossy(&out.stdout).trim().to_owned(),
        _ => "n/a".to_owned(),
    };
    let client = cubecl::cuda::CudaRuntime::client(&cubecl::cuda::CudaDevice::new(0));
    let backend = match client.memory_usage() {
        Ok(usage) => format!("{} bytes in use, {} reserved", usage.bytes_in_use, usage.bytes_reserved),
        Err(e) => format!("n/a ({e:?})"),
    };
    format!("driver {driver}; backend {backend}")
}

/// The largest difference; a NaN anywhere counts as infinitely wrong.
fn max_error(got: &[f32], want: &[f32]) -> Result<f32, BoxError> {
    if got.len() != want.len() {
        return Err(format!("{} outputs, {} stored", got.len(), want.len()).into());
    }
    let error = |(g, w): (&f32, &f32)| if g.is_finite() { (g - w).abs() } else { f32::INFINITY };
    Ok(got.iter().zip(want).map(error).fold(0.0, f32::max))
}

/// The largest difference from the CPU's output accepted, per unit of the output's scale.
const TOLERANCE: f32 = 2e-3;

/// Serves the fixture from `manager` and checks it against the stored CPU output.
fn serve_and_check<A: Architecture>(
    manager: &ModelManager<SharedLoader<A, Gpu>>,
    e: &Expected,
    round: &str,
) -> Result<(), BoxError> {
    manager.add_model(&e.id, None)?;
    let output = manager.infer(&e.id, |m| m.infer(&e.input))??;
    let error = max_error(&output, &e.output)?;
    let cache = manager.loader().cache();
    println!(
        "{}: {round}: max |gpu - cpu| = {error:.2e}; device copies in {}: {} bytes; memory: {}",
        e.id,
        cache.device(),
        cache.device_bytes(),
        memory_report()
    );
    // Relative to the output's scale, and loose enough for TF32: on Ampere and later GPUs,
    // burn's CUDA kernels may multiply f32 on tensor cores with 10-bit mantissas (an H200 put
    // the CNN's convolution 1.1e-4 off on outputs near 0.55). A wrong or stale weight moves
    // outputs by orders of magnitude more.
    let scale = e.output.iter().fold(1.0_f32, |m, v| m.max(v.abs()));
    if error > TOLERANCE * scale {
        return Err(format!("{}: GPU output differs from the CPU's by {error}", e.id).into());
    }
    Ok(())
}

/// Loads the fixture on one cache (from the file), serves it from a second cache on the same
/// GPU (adopting the first one's canonical: no file read, a fresh device copy), then evicts
/// everything, reporting device memory along the way.
fn smoke<A: Architecture>(arch: A, dir: &Path, e: &Expected) -> Result<(), BoxError> {
    let group = CacheGroup::<SharedWeights<A, Gpu>>::new(1 << 30)?;
    let arch = Arc::new(arch);
    let first = ModelManager::new(SharedLoader::new(Arc::clone(&arch), dir, &group, "cuda:0")?);
    let second = ModelManager::new(SharedLoader::new(arch, dir, &group, "cuda:0")?);
    println!("{}: memory before: {}", e.id, memory_report());
    serve_and_check(&first, e, "loaded from the file")?;
    first.remove(&e.id)?;
    serve_and_check(&second, e, "reloaded from the shared canonical")?;
    let (cpu, live) = (group.budget().in_use(), group.store().live_keys().len());
    println!("{}: one CPU copy for both caches: {live} canonical, {cpu} bytes in the RAM budget", e.id);
    if live != 1 {
        return Err(format!("{}: {live} canonicals for one model", e.id).into());
    }
    second.remove(&e.id)?;
    for manager in [&first, &second] {
        manager.loader().cache().shutdown();
    }
    println!(
        "{}: evicted everywhere: RAM budget {} bytes, device copies {} bytes; memory: {}",
        e.id,
        group.budget().in_use(),
        first.loader().cache().device_bytes() + second.loader().cache().device_bytes(),
        memory_report()
    );
    Ok(())
}

fn run(dir: &Path) -> Result<(), BoxError> {
    if !cuda_driver_present() {
        return Err(BurnError::CudaUnavailable { reason: "libcuda.so.1 is not installed".to_owned() }.into());
    }
    let fixtures: Fixtures = serde_json::from_str(&std::fs::read_to_string(dir.join("expected.json"))?)?;
    for e in &fixtures.models {
        let [a, b, c] = e.sizes;
        match e.kind.as_str() {
            "mlp" => smoke(MlpSpec { d_in: a, hidden: b, d_out: c }, dir, e)?,
            "cnn" => smoke(CnnSpec { side: a, channels: b, d_out: c }, dir, e)?,
            other => return Err(format!("unknown fixture kind {other}").into()),
        }
    }
    Ok(())
}

fn main() -> ExitCode {
    let dir = std::env::args().nth(1).map_or_else(|| PathBuf::from("fixtures/models"), PathBuf::from);
    match run(&dir) {
        Ok(()) => {
            println!("cuda smoke: ok");
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("cuda smoke: {e}");
            ExitCode::from(2)
        }
    }
}
