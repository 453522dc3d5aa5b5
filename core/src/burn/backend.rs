//! Backends that serve device copies: [`ServeBackend`] for ndarray ([`Cpu`]) and, with the
//! `cuda` feature, CUDA ([`Gpu`]).

use std::path::PathBuf;

use burn::tensor::backend::Backend;
use burn_store::ModuleSnapshot;

use super::architecture::Architecture;
use super::error::BurnError;

/// The CPU backend: canonical weights always live here.
pub type Cpu = burn::backend::NdArray<f32>;

/// burn's CUDA backend.
#[cfg(feature = "cuda")]
pub type Gpu = burn::backend::Cuda<f32, i32>;

/// A backend a device cache can place models on.
pub trait ServeBackend: Backend {
    /// The backend's name in errors.
    const NAME: &'static str;

    /// Whether a device copy shares the CPU tensors (so it costs no device bytes).
    const SHARES_CPU_TENSORS: bool;

    /// The device a cache's device name stands for.
    fn device(name: &str) -> Result<Self::Device, BurnError>;

    /// `cpu`'s weights as a module on `device` (named `name`).
    fn place<A: Architecture>(
        arch: &A,
        cpu: &A::Module<super::Cpu>,
        device: &Self::Device,
        name: &str,
    ) -> Result<A::Module<Self>, BurnError>;
}

/// Device index of `name` if it is `prefix` or `prefix:N`.
fn index(name: &str, prefix: &str) -> Option<usize> {
    match name.strip_prefix(prefix)? {
        "" => Some(0),
        rest => rest.strip_prefix(':')?.parse().ok(),
    }
}

impl ServeBackend for Cpu {
    const NAME: &'static str = "ndarray";
    const SHARES_CPU_TENSORS: bool = true;

    /// `cpu` or `cpu:N` (every index is the one CPU device).
    fn device(name: &str) -> Result<Self::Device, BurnError> {
        index(name, "cpu")
            .map(|_| Default::default())
            .ok_or_else(|| BurnError::UnknownDevice { name: name.to_owned(), backend: Self::NAME })
    }

    /// On the CPU the "device copy" shares the canonical tensors: nothing is copied.
    fn place<A: Architecture>(
        _arch: &A,
        cpu: &A::Module<Cpu>,
        _device: &Self::Device,
        _name: &str,
    ) -> Result<A::Module<Cpu>, BurnError> {
        Ok(cpu.clone())
    }
}

#[cfg(feature = "cuda")]
impl ServeBackend for Gpu {
    const NAME: &'static str = "cuda";
    const SHARES_CPU_TENSORS: bool = false;

    /// `cuda` or `cuda:N`, once the driver library is known to be present (burn's CUDA backend
    /// panics on its first operation without it).
    fn device(name: &str) -> Result<Self::Device, BurnError> {
        let index = index(name, "cuda")
            .ok_or_else(|| BurnError::UnknownDevice { name: name.to_owned(), backend: Self::NAME })?;
        if !cuda_driver_present() {
            return Err(BurnError::CudaUnavailable { reason: "libcuda.so.1 is not installed".to_owned() });
        }
        Ok(burn::backend::cuda::CudaDevice::new(index))
    }

    fn place<A: Architecture>(
        arch: &A,
        cpu: &A::Module<Cpu>,
        device: &Self::Device,
        name: &str,
    ) -> Result<A::Module<Gpu>, BurnError> {
        copy_to::<A, Gpu>(arch, cpu, device, name)
    }
}

/// Copies `cpu`'s tensors into a new module on `device` of backend `T` (any backend: a real
/// copy, tensor by tensor).
pub fn copy_to<A: Architecture, T: Backend>(
    arch: &A,
    cpu: &A::Module<Cpu>,
    device: &T::Device,
    name: &str,
) -> Result<A::Module<T>, BurnError> {
    let mut module = arch.init::<T>(device);
    let applied = module.apply(cpu.collect(None, None, false), None, None, false);
    if applied.errors.is_empty() && applied.missing.is_empty() {
        Ok(module)
    } else {
        Err(BurnError::Transfer { device: name.to_owned(), message: format!("{applied:?}") })
    }
}

/// Whether the CUDA driver library (`libcuda.so.1`) can be found where the dynamic loader
/// looks: `LD_LIBRARY_PATH`, the usual library directories, and the loader's cache.
pub fn cuda_driver_present() -> bool {
    const NAMES: [&str; 2] = ["libcuda.so.1", "libcuda.so"];
    let mut dirs: Vec<PathBuf> =
        std::env::var_os("LD_LIBRARY_PATH").map(|p| std::env::split_paths(&p).collect()).unwrap_or_default();
    dirs.extend(
        [
            "/usr/lib/x86_64-linux-gnu",
            "/usr/lib/aarch64-linux-gnu",
            "/usr/lib64",
            "/usr/lib",
            "/lib64",
            "/lib",
        ]
        .map(PathBuf::from),
    );
    if dirs.iter().any(|dir| NAMES.iter().any(|name| dir.join(name).exists())) {
        return true;
    }
    std::fs::read("/etc/ld.so.cache")
        .is_ok_and(|cache| cache.windows(NAMES[0].len()).any(|w| w == NAMES[0].as_bytes()))
}
