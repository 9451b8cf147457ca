#!/usr/bin/env bash
# Installs a CUDA 13.0 toolchain from PyPI wheels into a cache folder and prints the environment
# that makes `cargo check/clippy/build --features cuda` work on a machine WITHOUT a GPU or a
# system CUDA installation.
#
# Usage:
#   eval "$(bash scripts/cuda-toolchain.sh)"               # compiler + link libraries + stub
#   eval "$(bash scripts/cuda-toolchain.sh --check-only)"  # compiler and headers only
#   bash scripts/cuda-toolchain.sh --dir DIR ...           # install into DIR
# Default DIR: $CANDLE_GRAPH_CUDA_TOOLCHAIN, else <repo>/target/cuda-toolchain. Progress goes to
# stderr; stdout holds only `export` lines. A second run with the same versions installs nothing.
#
# Why each piece is needed (candle 0.11.1, cudarc 0.19.10, checked 2026-11-30):
# - nvidia-cuda-nvcc (nvcc, ptxas, fatbinary), nvidia-nvvm (cicc, libnvvm: the front end nvcc
#   calls), nvidia-cuda-crt (nvcc's crt/ host headers), nvidia-cuda-cccl (thrust/cub/libcu++
#   headers the kernels include) and nvidia-cuda-runtime (cuda_runtime.h, cuda_fp16.h,
#   cuda_bf16.h, …): candle-kernels' build script (through cudaforge) compiles every kernel with
#   nvcc, and cudarc's build script runs `nvcc --version` to choose its bindings
#   (`cuda-version-from-build-system` → cuda-13000). `cargo check`/`clippy` need only these.
# - ALL AT ONE 13.0.x RELEASE. With nvidia-nvvm 13.5 next to a 13.0 nvcc, cicc writes PTX ISA 9.5
#   and the 13.0 ptxas rejects it ("Unsupported .version 9.5"). The H200 machine's driver
#   (580.x) is CUDA 13.0: it cannot load PTX newer than 13.0's, and cudarc built against 13.0
#   headers references only driver functions that a 13.0 driver exports (Rust links with
#   `-z now`, so one missing symbol would stop the binary at start-up).
# - nvidia-cublas (+ cuBLASLt), nvidia-curand, nvidia-cuda-nvrtc: candle-core enables cudarc's
#   `dynamic-linking`, so linking a binary passes `-lcublas -lcublasLt -lcurand -lnvrtc -lcudart`
#   (and candle-kernels' static kernel archive `-lcudart -lstdc++`). Only `cargo build`/`test`
#   need them, not `check`.
# - Unversioned symlinks (libcublas.so → libcublas.so.13, …): the wheels ship only the SONAME
#   files, and the linker's `-lNAME` looks for `libNAME.so`.
# - A stub libcuda.so (SONAME libcuda.so.1) in <cu13>/lib/stubs: no wheel ships the driver
#   library, and `-lcuda` must resolve at link time. cudarc's build script adds <root>/lib/stubs
#   to the link search path (as for a real toolkit's `lib64/stubs/libcuda.so`). The stub defines
#   every `cu*` function of cudarc's driver bindings (src/driver/sys/mod.rs, 515 names), each
#   returning CUDA_ERROR_NO_DEVICE (100), so a binary that ever loaded it by mistake would get a
#   clean "no CUDA device" error, never garbage (seen: `demo --device cuda:0` then exits 2 with
#   `DriverError(CUDA_ERROR_NO_DEVICE, …)`). It is a LINK-TIME file only: the binary's NEEDED
#   entry is the SONAME `libcuda.so.1`, a name the stub folder does not hold, so the loader cannot
#   pick the stub up even with <cu13>/lib/stubs on LD_LIBRARY_PATH; on the GPU machine the real
#   driver's `libcuda.so.1` is loaded. The stub exports `candle_graph_link_time_stub`, and
#   scripts/gpu-check.sh refuses a libcuda.so.1 containing that name.
# - CUDA_COMPUTE_CAP=90: there is no GPU here for cudaforge to query (nvidia-smi); 90 is the
#   H200's compute capability. One capability keeps the kernel build as small as possible.
# - CUDA_ROOT / CUDA_PATH / CUDA_HOME: cudarc reads them for its link search paths, cudaforge
#   for nvcc and the include folder.
set -euo pipefail

# One CUDA release (13.0 update 2 era): versions checked together, see above.
WHEELS_COMPILE=(
    nvidia-cuda-nvcc==13.0.88
    nvidia-cuda-crt==13.0.88
    nvidia-nvvm==13.0.88
    nvidia-cuda-cccl==13.0.85
    nvidia-cuda-runtime==13.0.96
)
WHEELS_LINK=(
    nvidia-cublas==13.0.2.14
    nvidia-curand==10.4.0.35
    nvidia-cuda-nvrtc==13.0.88
)
# Unversioned link names → the SONAME file the wheels ship.
LINK_NAMES=(
    libcudart.so:libcudart.so.13
    libcublas.so:libcublas.so.13
    libcublasLt.so:libcublasLt.so.13
    libcurand.so:libcurand.so.10
    libnvrtc.so:libnvrtc.so.13
)

repo="$(cd "$(dirname "$0")/.." && pwd)"
dir="${CANDLE_GRAPH_CUDA_TOOLCHAIN:-$repo/target/cuda-toolchain}"
with_libs=1
while [ $# -gt 0 ]; do
    case "$1" in
    --check-only) with_libs=0 ;;
    --dir)
        dir="${2:?--dir needs a folder}"
        shift
        ;;
    -h | --help)
        sed -n '2,12p' "$0" >&2
        exit 0
        ;;
    *)
        echo "cuda-toolchain: unknown argument $1" >&2
        exit 2
        ;;
    esac
    shift
done
say() { echo "cuda-toolchain: $*" >&2; }

mkdir -p "$dir"
dir="$(cd "$dir" && pwd)"
# One installer at a time per folder (CI runs of several clones share the cache).
exec 9>"$dir/.lock"
flock 9
site="$dir/site"
cu13="$site/nvidia/cu13"

# Install a set of wheels once; the marker names the exact versions, so a version change
# reinstalls. `--no-deps`: every wheel is pinned above (their own requirements are looser).
# One pip call per set, always the whole set: `pip install --target --upgrade` replaces the
# top-level `nvidia/` folder, so a second, partial call would delete the first one's files.
marker_of() { echo "$dir/.installed-$1-$(printf '%s\n' "${@:2}" | sha256sum | cut -c1-16)"; }
full_marker="$(marker_of full "${WHEELS_COMPILE[@]}" "${WHEELS_LINK[@]}")"
compile_marker="$(marker_of compile "${WHEELS_COMPILE[@]}")"
install_set() {
    local marker="$1"
    shift
    say "installing wheels into $site: $*"
    rm -f "$dir"/.installed-*
    PIP_ROOT_USER_ACTION=ignore python3 -m pip install --quiet --disable-pip-version-check \
        --no-warn-script-location \
        --no-deps --only-binary=:all: --no-compile --upgrade --target "$site" "$@" >&2
    touch "$marker"
}

if [ -e "$full_marker" ]; then
    say "compiler and link libraries already in $site"
elif [ "$with_libs" = 1 ]; then
    install_set "$full_marker" "${WHEELS_COMPILE[@]}" "${WHEELS_LINK[@]}"
elif [ -e "$compile_marker" ]; then
    say "compiler already in $site"
else
    install_set "$compile_marker" "${WHEELS_COMPILE[@]}"
fi
[ -x "$cu13/bin/nvcc" ] || {
    say "no nvcc at $cu13/bin/nvcc after install"
    exit 1
}

if [ "$with_libs" = 1 ]; then
    for pair in "${LINK_NAMES[@]}"; do
        link="${pair%%:*}"
        target="${pair#*:}"
        [ -e "$cu13/lib/$target" ] || {
            say "missing $cu13/lib/$target"
            exit 1
        }
        ln -sfn "$target" "$cu13/lib/$link"
    done

    # The link-time driver stub, generated from the cudarc source this workspace locks.
    cudarc_version="$(awk '/^name = "cudarc"$/ {getline; gsub(/version = |"/, ""); print; exit}' \
        "$repo/Cargo.lock")"
    stub="$cu13/lib/stubs/libcuda.so"
    # v2: the stub exports the marker scripts/gpu-check.sh looks for.
    stub_marker="$cu13/lib/stubs/.stub-v2-cudarc-$cudarc_version"
    if [ ! -e "$stub_marker" ] || [ ! -e "$stub" ]; then
        cargo_home="${CARGO_HOME:-$HOME/.cargo}"
        sys_rs="$(ls "$cargo_home"/registry/src/*/"cudarc-$cudarc_version"/src/driver/sys/mod.rs \
            2>/dev/null | head -n1 || true)"
        if [ -z "$sys_rs" ]; then
            (cd "$repo" && cargo fetch --quiet >&2)
            sys_rs="$(ls "$cargo_home"/registry/src/*/"cudarc-$cudarc_version"/src/driver/sys/mod.rs |
                head -n1)"
        fi
        mkdir -p "$cu13/lib/stubs"
        src="$dir/libcuda-stub.c"
        {
            echo "/* Link-time stub of the CUDA driver API, generated by scripts/cuda-toolchain.sh"
            echo "   from cudarc $cudarc_version src/driver/sys/mod.rs. Never load it at run time. */"
            echo "/* Marker: scripts/gpu-check.sh refuses a libcuda.so.1 that contains it. */"
            echo 'const char candle_graph_link_time_stub[] = "candle-graph link-time libcuda stub";'
            grep -oE '^pub unsafe fn cu[A-Za-z0-9_]+' "$sys_rs" | sed 's/^pub unsafe fn //' |
                sort -u | sed 's/.*/int &(void) { return 100; \/* CUDA_ERROR_NO_DEVICE *\/ }/'
        } >"$src"
        count="$(grep -c '^int cu' "$src")"
        [ "$count" -gt 400 ] || {
            say "only $count driver functions found in $sys_rs"
            exit 1
        }
        gcc -shared -fPIC -O0 -Wl,-soname,libcuda.so.1 -o "$stub" "$src"
        touch "$stub_marker"
        say "stub $stub: $count functions, SONAME libcuda.so.1 (link time only)"
    fi
fi

version="$("$cu13/bin/nvcc" --version | sed -n 's/.*release \([0-9.]*\),.*/\1/p')"
say "nvcc $version at $cu13/bin/nvcc"
case "$version" in
13.0) ;;
*)
    say "expected nvcc 13.0, got $version"
    exit 1
    ;;
esac

cat <<EOF
export CUDA_ROOT='$cu13'
export CUDA_PATH='$cu13'
export CUDA_HOME='$cu13'
export PATH='$cu13/bin':"\$PATH"
export CUDA_COMPUTE_CAP=90
EOF
