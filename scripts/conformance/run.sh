#!/usr/bin/env bash
# Issue 43's conformance suite: records the four model families (mlp, cnn, gru, transformer)
# in Candle and in PyTorch, and times each op alone on both sides, into
# crates/trace-diff/tests/data/conformance/FAMILY/:
#   pytorch.json.gz, pytorch.candle-graph.json   torch.profiler trace (5 steps after 1 warm-up)
#   candle.jsonl.gz                              the probe's trace (same steps, stack samples)
#   runs.json                                    which of the RUNS recordings a side each is
#   clock.json                                   the clock table (scripts/conformance/merge.py)
# Each side is recorded RUNS times, interleaved (Candle, PyTorch, Candle, ...), and the
# fastest run by wall time is kept (pick_run.py: the least disturbed by the load); the clock
# runs ROUNDS rounds a side, interleaved, pooled by merge.py.
# The machine is shared: a process that waits for a core shows the wait as op time (PyTorch's
# profiler and the probe's sampler both measure wall time), so every recording and clock run
# is a real-time process (`chrt -f 1`: one core while it runs, a few seconds at a time; the
# kernel keeps 5% of it for the rest) — PRIO="nice -n -5" (or PRIO=" ") to run without.
# glibc's heap is kept (MALLOC_MMAP_THRESHOLD_ 32 MiB, no trimming) on both sides and in the
# clock: an op timed alone reuses the memory it freed, so the traces must too, or the page
# faults of fresh memory land on whichever op first touches it (the heap's history, not the
# op).
# The tests (crates/trace-diff/tests/conformance.rs) read only these files: CI needs no torch.
#
# PyTorch: a virtual environment with torch from PyPI (`pip install --no-cache-dir torch
# numpy`; PyPI's Linux wheel is the CUDA build and pulls its CUDA libraries, about 3 GB on disk;
# the CPU-only index was not reachable here). Set CONFORMANCE_VENV to reuse one (default
# target/conformance/venv). Both sides run on one thread: torch.set_num_threads(1) and
# RAYON_NUM_THREADS=1.
#
# Usage: scripts/conformance/run.sh [FAMILY ...]   (default: all four)
# Environment: RUNS (recordings per side; default 5), ROUNDS (clock rounds per side; default
# 3), REPS (repetitions per op per round; default 20), SAMPLE_HZ (the Candle sampler; default
# 10000), PRIO (default "chrt -f 1"), CLOCK_ONLY=1 (keep the committed traces, redo the clock).
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root"
families=("$@")
[ ${#families[@]} -eq 0 ] && families=(mlp cnn gru transformer)
runs_n=${RUNS:-5}
rounds=${ROUNDS:-3}
prio=${PRIO:-chrt -f 1}
reps=${REPS:-20}
hz=${SAMPLE_HZ:-10000}
venv=${CONFORMANCE_VENV:-$root/target/conformance/venv}
if ! "$venv/bin/python" -c "import torch" 2>/dev/null; then
    python3 -m venv "$venv"
    "$venv/bin/pip" install --no-cache-dir torch numpy
fi
py="$prio $venv/bin/python"
export RAYON_NUM_THREADS=1
export MALLOC_MMAP_THRESHOLD_=33554432 MALLOC_TRIM_THRESHOLD_=68719476736
# the probe optimised (its allocator hook and sampler run in the measured step), the rest as
# the dev profile builds it (Candle's crates at opt-level 3)
cargo build -p candle-graph-examples --example conformance \
    --config 'profile.dev.package.trace-probe.opt-level=3'
target=${CARGO_TARGET_DIR:-$root/target}
bin="$prio $target/debug/examples/conformance"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
for f in "${families[@]}"; do
    out="crates/trace-diff/tests/data/conformance/$f"
    mkdir -p "$out"
    if [ "${CLOCK_ONLY:-0}" != 1 ]; then
    rm -f "$out/runs.json"
    ctraces=()
    ttraces=()
    for r in $(seq 1 "$runs_n"); do
        $bin capture "$f" "$tmp/$f-c$r" "$hz" > /dev/null
        ctraces+=("$tmp/$f-c$r/trace.jsonl")
        $py scripts/conformance/torch_side.py profile "$f" "$tmp/$f-t$r.json.gz" > /dev/null
        ttraces+=("$tmp/$f-t$r.json.gz")
    done
    python3 scripts/conformance/pick_run.py candle "$out/candle.jsonl.gz" "$out/runs.json" "${ctraces[@]}"
    python3 scripts/conformance/pick_run.py pytorch "$out/pytorch.json.gz" "$out/runs.json" "${ttraces[@]}"
    fi
    runs=()
    for r in $(seq 1 "$rounds"); do
        $bin clock "$f" "$tmp/$f-candle-$r.json" "$reps" > /dev/null
        $py scripts/conformance/torch_side.py clock "$f" "$tmp/$f-torch-$r.json" "$reps" > /dev/null
        runs+=("$tmp/$f-candle-$r.json" "$tmp/$f-torch-$r.json")
    done
    python3 scripts/conformance/merge.py "$out/clock.json" "${runs[@]}"
    ls -la "$out"
done
