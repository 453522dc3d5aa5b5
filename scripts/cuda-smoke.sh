#!/usr/bin/env bash
# Builds the CUDA smoke binary here (no GPU needed to build), then runs it if this machine has a
# CUDA driver. On a GPU machine without a Rust toolchain, copy `target/release/examples/cuda_smoke`
# and `fixtures/models/` there and run `./cuda_smoke fixtures/models`.
#
# CUDARC_CUDA_VERSION pins the driver API level the bindings call (default 13000: CUDA 13.0,
# what a 580-series driver provides). Libraries are opened at run time, not linked:
# - libcuda.so.1 comes with the driver;
# - libnvrtc (burn's CUDA runtime compiles its kernels with NVRTC) is looked for as libnvrtc.so,
#   libnvrtc.so.13, .so.12, .so.11 and .so.1. A driver-only machine lacks it: carry
#   libnvrtc.so.13 and libnvrtc-builtins.so.13.* from a CUDA 13 toolkit (for instance the
#   nvidia-cuda-nvrtc wheel on PyPI) and point LD_LIBRARY_PATH at them.
set -euo pipefail
cd "$(dirname "$0")/.."
export CUDARC_CUDA_VERSION="${CUDARC_CUDA_VERSION:-13000}"
cargo build --release --locked -p resident --features cuda --example cuda_smoke
if [[ "${1:-}" == "--build-only" ]]; then
    exit 0
fi
exec ./target/release/examples/cuda_smoke fixtures/models
