#!/usr/bin/env bash
# Builds what scripts/gpu-check.sh runs on the GPU machine (which has no Rust toolchain): the
# `candle-graph` binary with the `cuda` and `cuda-ledger` features, release profile, stripped, gzip-compressed into
# target/gpu-carry/candle-graph.gz (carry that folder to the GPU machine). Then prints its sizes
# and the shared libraries it needs (readelf NEEDED): those are looked up there, not carried.
#
# Usage: bash scripts/gpu-carry.sh
# Cold, this compiles Candle's CUDA kernels with nvcc for sm_90 (the PTX kernels and the static
# MoE/GGUF kernel library, ~30 min on 2 loaded cores); the target directory is cached at
# $CANDLE_GRAPH_CACHE/cuda-build-target (default ~/.cache/candle-graph), apart from CI's
# check-only one (.ci/run).
set -euo pipefail
repo="$(cd "$(dirname "$0")/.." && pwd)"
cache="${CANDLE_GRAPH_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/candle-graph}"
# The full toolchain: compiler, link libraries, the link-time libcuda stub.
cuda_env="$(bash "$repo/scripts/cuda-toolchain.sh" --dir "$cache/cuda-toolchain")"
eval "$cuda_env"
# Never the check-only wrapper here: this build links the real kernels.
unset NVCC
target="${CANDLE_GRAPH_CUDA_BUILD_TARGET:-$cache/cuda-build-target}"
cd "$repo"
# Release without debug info and stripped: the binary must fit the 64 MiB the device tool
# carries (a debug CUDA test binary was 262 MB).
CARGO_TARGET_DIR="$target" CARGO_PROFILE_RELEASE_DEBUG=false CARGO_PROFILE_RELEASE_STRIP=symbols \
    cargo build --release --locked -p trace-cli --features cuda,cuda-ledger
mkdir -p target/gpu-carry
rm -f target/gpu-carry/candle-graph target/gpu-carry/candle-graph.gz
bin="$target/release/candle-graph"
# Carry the gzip-compressed copy (about a quarter of the size; scripts/gpu-check.sh unpacks it):
# the device tool carries 64 MiB in all, the working tree included.
gzip -6 -c "$bin" >target/gpu-carry/candle-graph.gz
echo "built $bin: $(wc -c <"$bin") bytes; carry target/gpu-carry/candle-graph.gz: $(wc -c <target/gpu-carry/candle-graph.gz) bytes"
echo "NEEDED:"
readelf -d "$bin" | awk '/NEEDED/ {gsub(/[\[\]]/, "", $5); print "  " $5}'
if readelf -d "$bin" | grep -q 'RUNPATH\|RPATH'; then
    echo "warning: the binary has an RPATH/RUNPATH:" >&2
    readelf -d "$bin" | grep 'RUNPATH\|RPATH' >&2
fi
