#!/usr/bin/env bash
# Stages in .devbin (ignored by git; name it in the device tool's `carry`) everything the GPU host
# runs for bench/gpu-session.sh, built here: a Release install prefix with CUDA (the CLI, hugepind,
# libhugepin, the shim, the Python package and hugepin.vllm), dma_cuda_test, the membarrier-denying
# launcher for bench ring, the wake-latency and membarrier-reach probes, the examples built against the prefix for the GPU, and the two runtime
# libraries the host lacks (liburing, libnuma) as Debian packages. Stays under the tool's 64 MiB.
# Usage: bench/stage-gpu-carry.sh [BUILD_DIR]   (default build-rel)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$root/build-rel}
stage=$root/.devbin
cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$build" --target hugepin hugepind libhugepin hugepin_preload hugepin_man_pages hugepin_python \
  hugepin_option_man_pages dma_cuda_test deny_membarrier wake_latency_probe sleep_cpu_probe membarrier_reach
rm -rf "$stage"
mkdir -p "$stage/deps" "$stage/examples"
cmake --install "$build" --prefix "$stage/prefix" >/dev/null
strip "$stage"/prefix/bin/* "$stage"/prefix/sbin/* "$stage"/prefix/lib/libhugepin.so.*.*.*
cp "$build/dma/dma_cuda_test" "$build/bench/deny_membarrier" "$build/bench/wake_latency_probe" "$build/bench/sleep_cpu_probe" \
  "$build/bench/membarrier_reach" \
  "$stage/"
strip "$stage/dma_cuda_test"
cmake -S "$root/examples" -B "$build/examples" -G Ninja -DCMAKE_PREFIX_PATH="$stage/prefix" \
  -DHUGEPIN_EXAMPLES_CUDA=ON -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$build/examples" >/dev/null
cp "$build/examples/offload_c" "$build/examples/offload_cpp" "$stage/examples/"
(cd "$stage/deps" && apt-get download liburing2 libnuma1 2>&1 | grep -v '^W: ' || true)
size=$(du -sm "$stage" | cut -f1)
echo "stage-gpu-carry: $stage holds ${size} MiB"
[ "$size" -lt 60 ] || { echo "stage-gpu-carry: over 60 MiB: the device tool carries 64 MiB at most" >&2; exit 1; }
