//! The GPU smoke run: each fixture model served on CUDA through the manager and a cache group,
//! compared with its stored CPU outputs, unloaded, and served again from the group's shared
//! canonical (no second file read), with the driver's memory figures around each step.
//!
//! Built by `scripts/cuda-smoke.sh` (`--release --features cuda`); exits 2 with a typed error
//! where there is no CUDA driver.

use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};

use resident::burn::zoo::{CnnSpec, MlpSpec};
use resident::burn::{Architecture, BurnError, Gpu, SharedLoader, SharedWeights, cuda_driver_present};
use resident::cache::CacheGroup;
use resident::runtime::Arc;
use resident::{BoxError, Manager, ModelManager};

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

/// The driver's view of device memory (MiB used), if `nvidia-smi` is there.
fn driver_mib() -> String {
    let out = Command::new("nvidia-smi").args(["--query-gpu=memory.used", "--format=csv,noheader"]).output();
    match out {
        Ok(out) if out.status.success() => String::from_utf8_lossy(&out.stdout).trim().to_owned(),
        _ => "n/a".to_owned(),
    }
}

fn max_error(got: &[f32], want: &[f32]) -> Result<f32, BoxError> {
    if got.len() != want.len() {
        return Err(format!("{} outputs, {} stored", got.len(), want.len()).into());
    }
    Ok(got.iter().zip(want).map(|(g, w)| (g - w).abs()).fold(0.0, f32::max))
}

fn smoke<A: Architecture>(arch: A, dir: &Path, e: &Expected) -> Result<(), BoxError> {
    let group = CacheGroup::<SharedWeights<A, Gpu>>::new(1 << 30)?;
    let loader = SharedLoader::new(Arc::new(arch), dir, &group, "cuda:0");
    let cache = Arc::clone(loader.cache());
    let manager = ModelManager::new(loader);
    println!("{}: driver memory before load: {}", e.id, driver_mib());
    for round in ["load from file", "reload from the shared canonical"] {
        manager.add_model(&e.id, None)?;
        let output = manager.infer(&e.id, |m| m.infer(&e.input))??;
        let error = max_error(&output, &e.output)?;
        let device = cache.device_bytes();
        println!(
            "{}: {round}: max |gpu - cpu| = {error:.2e}, device copy {device} bytes, driver memory {}",
            e.id,
            driver_mib()
        );
        if error > 1e-4 {
            return Err(format!("{}: GPU output differs from the CPU's by {error}", e.id).into());
        }
        manager.remove(&e.id)?;
        println!(
            "{}: evicted from the device; CPU weights in the group: {} bytes",
            e.id,
            group.budget().in_use()
        );
    }
    println!(
        "{}: misses (file reads) {}, hits (shared canonical) {}",
        e.id,
        cache.stats().misses,
        cache.stats().hits
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
