#!/usr/bin/env bash
# Verifies the probe's CUDA capture on a GPU machine that has no Rust toolchain (issue 17): runs
# the carried, stripped release binary built with `--features cuda` (scripts/gpu-carry.sh) as
# `candle-graph device-check` on the llama-style model and the MLP, capturing step 2, and prints
# one PASS/FAIL line with figures per check. Ends within 5 minutes (the device-check itself is
# limited to GPU_CHECK_TIMEOUT_S, default 240 s).
#
# Usage: bash scripts/gpu-check.sh [--pack] OUT_DIR [BINARY]
#   OUT_DIR  traces (<model>/<device>/trace.jsonl, <model>/reference-cpu/trace.jsonl), summaries,
#            checks.txt, checks.json and gpu-check.log are written here
#   BINARY   default: target/gpu-carry/candle-graph, else target/gpu-carry/candle-graph.gz
#            unpacked into $TMPDIR
#   --pack   leave only checks.txt, checks.json, gpu-check.log and details.tar.gz in OUT_DIR
#            (the device tool brings back at most 8 files)
# Environment: GPU_CHECK_DEVICE (default cuda:0; `cpu` runs the same checks on CPU),
# GPU_CHECK_PAIRS (armed/disarmed pairs, default 20), GPU_CHECK_LIBRARY_PATH (extra folders to
# search for the CUDA libraries first).
#
# Shared libraries: the binary needs libcuda.so.1 (the driver's) and CUDA 13 runtime libraries
# (libcudart.so.13, libcublas.so.13 + libcublasLt.so.13, libcurand.so.10; `readelf -d` lists the
# NEEDED ones). They are NOT carried (cuBLASLt alone is ~540 MB): they are looked up on the GPU
# machine, in the dynamic loader's cache, then GPU_CHECK_LIBRARY_PATH, python3's `nvidia`
# wheels (PyTorch's CUDA 13 libraries), then the CUDA toolkit folders. A `stubs` folder is never
# used: a link-time stub libcuda.so must not be loaded at run time.
set -uo pipefail

pack=0
if [ "${1:-}" = "--pack" ]; then
    pack=1
    shift
fi
repo="$(cd "$(dirname "$0")/.." && pwd)"
out="${1:?usage: scripts/gpu-check.sh [--pack] OUT_DIR [BINARY]}"
bin="${2:-}"
if [ -z "$bin" ]; then
    # The carried binary: plain, or gzip-compressed as scripts/gpu-carry.sh writes it.
    bin="$repo/target/gpu-carry/candle-graph"
    if [ ! -x "$bin" ] && [ -f "$bin.gz" ]; then
        mkdir -p "${TMPDIR:-/tmp}/gpu-check-bin"
        gunzip -c "$bin.gz" >"${TMPDIR:-/tmp}/gpu-check-bin/candle-graph" || exit 2
        chmod +x "${TMPDIR:-/tmp}/gpu-check-bin/candle-graph"
        bin="${TMPDIR:-/tmp}/gpu-check-bin/candle-graph"
    fi
fi
device="${GPU_CHECK_DEVICE:-cuda:0}"
pairs="${GPU_CHECK_PAIRS:-20}"
timeout_s="${GPU_CHECK_TIMEOUT_S:-240}"

mkdir -p "$out" || exit 2
out="$(cd "$out" && pwd)"
log="$out/gpu-check.log"
: >"$log"
say() { echo "gpu-check: $*" | tee -a "$log"; }
fail() {
    say "ERROR: $*"
    exit 2
}

[ -x "$bin" ] || fail "no executable binary at $bin (build target/gpu-carry/candle-graph.gz with scripts/gpu-carry.sh and carry target/gpu-carry)"
say "binary $bin ($(wc -c <"$bin") bytes), device $device, $pairs pairs"
say "machine: $(uname -srm)"
if command -v nvidia-smi >/dev/null 2>&1; then
    nvidia-smi --query-gpu=name,driver_version,memory.total,memory.used,compute_cap --format=csv 2>&1 |
        tee -a "$log"
else
    say "nvidia-smi not found"
fi

# --- shared libraries -------------------------------------------------------------------------
missing_libs() { LD_LIBRARY_PATH="${ld_path:-}" ldd "$bin" 2>/dev/null | awk '/=> not found/ {print $1}'; }
ld_path=""
add_dir() {
    case "$1" in */stubs | */stubs/*) return ;; esac
    case ":$ld_path:" in *":$1:"*) return ;; esac
    ld_path="${ld_path:+$ld_path:}$1"
}
candidate_dirs() {
    local IFS=:
    for d in ${GPU_CHECK_LIBRARY_PATH:-}; do [ -n "$d" ] && echo "$d"; done
    if command -v python3 >/dev/null 2>&1; then
        python3 - <<'EOF' 2>/dev/null
import glob, os
try:
    import nvidia
except Exception:
    raise SystemExit
for root in list(nvidia.__path__):
    for lib in sorted(glob.glob(os.path.join(root, "*", "lib"))) + sorted(glob.glob(os.path.join(root, "*", "*", "lib"))):
        print(lib)
EOF
    fi
    for d in /usr/local/nvidia/lib64 /usr/local/nvidia/lib /usr/local/cuda/lib64 \
        /usr/local/cuda/targets/x86_64-linux/lib /usr/local/cuda-13*/lib64 \
        /usr/local/cuda-13*/targets/x86_64-linux/lib /usr/lib/x86_64-linux-gnu; do
        [ -d "$d" ] && echo "$d"
    done
}
for lib in $(missing_libs); do
    for d in $(candidate_dirs); do
        if [ -e "$d/$lib" ]; then
            add_dir "$d"
            break
        fi
    done
done
# Last resort: search the file system (bounded), never in a stubs folder.
for lib in $(missing_libs); do
    found="$(timeout 60 find / -xdev -name "$lib" -not -path '*/stubs/*' 2>/dev/null | head -n1)"
    [ -n "$found" ] && add_dir "$(dirname "$found")"
done
still="$(missing_libs | tr '\n' ' ')"
say "LD_LIBRARY_PATH additions: ${ld_path:-none}"
LD_LIBRARY_PATH="$ld_path" ldd "$bin" 2>&1 | grep -E 'libcuda|libcudart|libcublas|libcurand|libnvrtc|not found' |
    tee -a "$log"
[ -z "$still" ] || fail "shared libraries not found: $still (set GPU_CHECK_LIBRARY_PATH)"
cuda_lib="$(LD_LIBRARY_PATH="$ld_path" ldd "$bin" | awk '$1 == "libcuda.so.1" {print $3}')"
if [ -n "$cuda_lib" ]; then
    real_cuda_lib="$(readlink -f "$cuda_lib")"
    say "libcuda.so.1 → $real_cuda_lib ($(wc -c <"$real_cuda_lib") bytes)"
    case "$real_cuda_lib" in
    */stubs/*) fail "libcuda.so.1 resolves to a stub ($real_cuda_lib): the driver's library is needed" ;;
    esac
    if grep -q candle_graph_link_time_stub "$real_cuda_lib"; then
        fail "libcuda.so.1 is the link-time stub of scripts/cuda-toolchain.sh ($real_cuda_lib): the driver's library is needed"
    fi
fi
export LD_LIBRARY_PATH="${ld_path}${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"

# --- the checks -------------------------------------------------------------------------------
start=$(date +%s)
say "running: $bin device-check --device $device --out $out --pairs $pairs (limit ${timeout_s}s)"
timeout "$timeout_s" "$bin" device-check --device "$device" --out "$out" --pairs "$pairs" 2>&1 |
    tee -a "$log"
rc=${PIPESTATUS[0]}
say "device-check exit status $rc after $(($(date +%s) - start)) s (0 all passed, 1 a check failed, 2 could not run, 124 timed out)"

# Summaries of the device traces, for review (text from the same binary).
folder="${device//:/-}"
for model in llama mlp; do
    trace="$out/$model/$folder"
    if [ -f "$trace/trace.jsonl" ]; then
        "$bin" summary "$trace" >"$trace/summary.txt" 2>&1
        "$bin" memory "$trace" --device "$device" >"$trace/memory.txt" 2>&1
        "$bin" check "$trace" >"$trace/check.txt" 2>&1
    fi
done

# The main job on the device: `demo` profiles the llama step there and prints the analysis.
mkdir -p "$out/demo"
say "running: $bin demo --device $device --out $out/demo"
timeout 120 "$bin" demo --device "$device" --out "$out/demo" >"$out/demo/demo.txt" 2>&1
say "demo exit status $? ($(wc -l <"$out/demo/demo.txt") lines in demo/demo.txt)"
"$bin" memory "$out/demo" --device "$device" >"$out/demo/memory.txt" 2>&1

if [ "$pack" = 1 ]; then
    (cd "$out" && tar czf details.tar.gz --exclude=details.tar.gz llama mlp demo 2>/dev/null &&
        rm -rf llama mlp demo)
    say "packed traces and summaries into $out/details.tar.gz"
fi
[ -f "$out/checks.txt" ] && cat "$out/checks.txt"
exit "$rc"
