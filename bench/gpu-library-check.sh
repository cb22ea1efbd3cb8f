#!/usr/bin/env bash
# The library and the offload path on a GPU host, as root: the copy engine's CUDA test, the C
# and C++ examples built against an installed prefix (GPU backend), the demo on the GPU, and
# `hugepin bench offload`. Every table also lands in OUT_DIR.
# Usage: bench/gpu-library-check.sh PREFIX EXAMPLES_BIN DMA_CUDA_TEST OUT_DIR
#   PREFIX        a `cmake --install` prefix (bin/hugepin, lib/libhugepin.so)
#   EXAMPLES_BIN  examples/ built against PREFIX with -DHUGEPIN_EXAMPLES_CUDA=ON
# Reserves 2 MiB hugepages and mounts hugetlbfs when none is mounted; gives the pool back after.
set -uo pipefail
prefix=${1:?usage: gpu-library-check.sh PREFIX EXAMPLES_BIN DMA_CUDA_TEST OUT_DIR}
examples=${2:?}
dma_cuda_test=${3:?}
out=${4:?}
mkdir -p "$out"
hugepin="$prefix/bin/hugepin"
export LD_LIBRARY_PATH="$prefix/lib:${LD_LIBRARY_PATH:-}"
status=0
step() { echo; echo "== $*"; }

nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
pool_before=$(cat /proc/sys/vm/nr_hugepages)
"$hugepin" pool set 16G --pagesize 2M >/dev/null || true
mountpoint -q /dev/hugepages || "$hugepin" pool mount --pagesize 2M --dir /dev/hugepages
"$hugepin" pool show | head -5

step "dma_cuda_test"
# The whole output, each case's duration included (-d), stays in the file: when a case fails or
# hangs, the cases that finished before it say which one it was.
timeout -s INT 200 "$dma_cuda_test" -d > "$out/dma_cuda_test.txt" 2>&1 || status=1
tail -5 "$out/dma_cuda_test.txt"

step "examples (GPU backend, installed library, 2M pages)"
for example in offload_c offload_cpp; do
  timeout 60 "$examples/$example" --page-size 2M 2>&1 | tee "$out/$example.txt" || status=1
done

step "hugepin demo --backend gpu"
timeout 120 "$hugepin" demo --backend gpu --seconds 5 2>&1 | grep -v '^hugepin: warning' | tee "$out/demo.txt" || status=1

step "hugepin bench offload (TP 2 x PP 2, one GPU)"
timeout 400 "$hugepin" bench offload --backend gpu 2>&1 | tee "$out/offload.txt" || status=1

echo 0 > /proc/sys/vm/nr_hugepages
echo "$pool_before" > /proc/sys/vm/nr_hugepages
echo; echo "gpu-library-check: status $status"
exit $status
