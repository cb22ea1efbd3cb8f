#!/usr/bin/env bash
# Time until a large region (64 GiB by default) is usable for GPU copies, on a GPU host, as root.
# Usage: bench/gpu-pin-large.sh BIN_DIR OUT_DIR [SIZE]
#   BIN_DIR holds a Release build of hugepin (and liburing.so.2 where the host lacks it).
# The rows run in two turns because a host with twice SIZE of memory or less cannot hold a pool
# of SIZE and SIZE of ordinary memory at once: first the hugepage rows (arena cold and warm, bare
# registration) with a pool of SIZE, then, with the pool given back, cudaHostAlloc and 4 KiB
# memory + register. The pool is restored to what it was at the end.
set -uo pipefail
bin=${1:?usage: bench/gpu-pin-large.sh BIN_DIR OUT_DIR [SIZE]}
out=${2:?usage: bench/gpu-pin-large.sh BIN_DIR OUT_DIR [SIZE]}
size=${3:-64G}
mkdir -p "$out"
export LD_LIBRARY_PATH="$bin:${LD_LIBRARY_PATH:-}"
h="$bin/hugepin"
pool_before=$(cat /proc/sys/vm/nr_hugepages)
restore() { echo 0 > /proc/sys/vm/nr_hugepages; echo "$pool_before" > /proc/sys/vm/nr_hugepages; }
trap restore EXIT

grep MemTotal /proc/meminfo
echo 0 > /proc/sys/vm/nr_hugepages
"$h" pool set "$size" --pagesize 2M | tail -2 || exit 1
mountpoint -q /dev/hugepages || "$h" pool mount --pagesize 2M --dir /dev/hugepages
echo "== $size, hugepage rows"
timeout 240 "$h" bench pin --size "$size" --repeat 1 --host off --gpu on --methods arena-cold,arena-warm,bare-register \
  | tee "$out/pin-$size-hugepages.txt"
echo 0 > /proc/sys/vm/nr_hugepages
echo "== $size, what engines use now"
timeout 240 "$h" bench pin --size "$size" --repeat 1 --host off --gpu on --methods cudaHostAlloc,4k-register \
  | tee "$out/pin-$size-engines.txt"
