#!/usr/bin/env bash
# Runs the GPU tests and benchmarks on a GPU host, as root; each table also lands in OUT_DIR.
# Usage: bench/gpu-host.sh BIN_DIR OUT_DIR
#   BIN_DIR holds hugepin and dma_cuda_test (a Release build).
# Reserves 2 MiB hugepages and mounts hugetlbfs at /dev/hugepages when none is mounted; gives
# the pool back at the end.
set -uo pipefail
bin=${1:?usage: bench/gpu-host.sh BIN_DIR OUT_DIR}
out=${2:?usage: bench/gpu-host.sh BIN_DIR OUT_DIR}
mkdir -p "$out"
hugepin="$bin/hugepin"

nvidia-smi --query-gpu=name,driver_version,pcie.link.gen.max,pcie.link.width.max --format=csv,noheader
nproc; grep MemTotal /proc/meminfo
pool_before=$(cat /proc/sys/vm/nr_hugepages)
"$hugepin" pool set 24G --pagesize 2M || true
mountpoint -q /dev/hugepages || "$hugepin" pool mount --pagesize 2M --dir /dev/hugepages
"$hugepin" pool show

echo "== dma_cuda_test"
if ! timeout 150 "$bin/dma_cuda_test" 2>&1 | tail -40 | tee "$out/dma_cuda_test.txt"; then
  echo "dma_cuda_test failed: no benchmarks on a broken engine"
  echo "$pool_before" > /proc/sys/vm/nr_hugepages
  exit 1
fi

echo "== bench copy"
timeout 200 "$hugepin" bench copy | tee "$out/copy.txt"

echo "== bench overlap"
timeout 120 "$hugepin" bench overlap | tee "$out/overlap.txt"
timeout 120 "$hugepin" bench overlap --sm-blocks 1 | tee "$out/overlap-1sm.txt"

echo "== bench pin 16G"
timeout 200 "$hugepin" bench pin --size 16G --repeat 3 --threads all | tee "$out/pin16.txt"

echo "== chunking: 16G as 1G registrations"
timeout 60 "$hugepin" bench pin --size 16G --repeat 1 --threads all --chunk 1G --methods arena-warm | tee "$out/pin16-chunks.txt"

echo 0 > /proc/sys/vm/nr_hugepages
echo "$pool_before" > /proc/sys/vm/nr_hugepages

echo "== bench pin 64G (two turns: see bench/gpu-pin-large.sh)"
bash "$(dirname "$0")/gpu-pin-large.sh" "$bin" "$out" 64G
