#!/usr/bin/env bash
# CI's CUDA step (called by .ci/run): type-checks the CUDA code (probe, examples, `demo --device
# cuda`, `device-check`) with clippy on a machine without a GPU.
# - scripts/cuda-toolchain.sh --check-only: a CUDA 13.0 nvcc and headers from PyPI wheels (no
#   link libraries: clippy never links);
# - NVCC=scripts/nvcc-check-only: Candle's PTX kernels are compiled for real for sm_90, its
#   link-only MoE/GGUF kernel library from empty translation units (the 25-minute part);
# - toolchain and target directory in a cache outside the clone
#   ($CANDLE_GRAPH_CACHE, default ${XDG_CACHE_HOME:-$HOME/.cache}/candle-graph), so later runs
#   on this machine reuse them; a cold run installs and builds everything.
set -euo pipefail
cd "$(dirname "$0")/.."
cache="${CANDLE_GRAPH_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/candle-graph}"
cuda_env="$(bash scripts/cuda-toolchain.sh --check-only --dir "$cache/cuda-toolchain")"
eval "$cuda_env"
export NVCC="$PWD/scripts/nvcc-check-only"
CARGO_TARGET_DIR="$cache/cuda-check-target" cargo clippy --locked \
    -p trace-probe -p candle-graph-examples -p trace-cli --features cuda -- -D warnings
# The same with the complete CUDA storage capture (trace-probe's `cuda-ledger`: the driver's
# allocation calls interposed), which is off by default until it has run on a GPU.
CARGO_TARGET_DIR="$cache/cuda-check-target" cargo clippy --locked \
    -p trace-probe -p candle-graph-examples -p trace-cli --features cuda,trace-probe/cuda-ledger,trace-cli/cuda-ledger -- -D warnings
