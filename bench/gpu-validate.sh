#!/usr/bin/env bash
# The multi-GPU validation run (TP x PP offload end to end), as root on a GPU host; each result
# also lands in OUT_DIR. Usage: bench/gpu-validate.sh BIN_DIR OUT_DIR
#   BIN_DIR holds a Release build of hugepin (and liburing.so.2 where the host lacks it).
# Per shape: the demo on real GPUs (one worker process per rank, ranks spread over the GPUs),
# one rank killed mid-run and replaced, its region checked intact, and an inspector snapshot
# taken while it runs. Then quorum latency as TP x PP grows, and every GPU copying at once.
set -uo pipefail
bin=${1:?usage: bench/gpu-validate.sh BIN_DIR OUT_DIR}
out=${2:?usage: bench/gpu-validate.sh BIN_DIR OUT_DIR}
mkdir -p "$out"
export LD_LIBRARY_PATH="$bin:${LD_LIBRARY_PATH:-}"
h="$bin/hugepin"

nvidia-smi -L; nproc; lscpu | grep -i 'numa node' ; nvidia-smi topo -m 2>/dev/null | head -8
pool_before=$(cat /proc/sys/vm/nr_hugepages)
"$h" pool set 80G --pagesize 2M | tail -2
mountpoint -q /dev/hugepages || "$h" pool mount --pagesize 2M --dir /dev/hugepages

for shape in "2 2" "4 1" "4 2"; do
  set -- $shape
  name="tp$1-pp$2"
  ( sleep 6; "$h" inspect > "$out/inspect-$name.txt" 2>&1 ) &
  echo "== demo $name"
  timeout 150 "$h" demo --tp "$1" --pp "$2" --backend gpu --cpu-bytes 32G --gpu-blocks 4096 --seconds 10 \
    --kill-rank 1 --kill-after 7 --restart 2>&1 | grep -v '^failed: ' | tee "$out/demo-$name.txt"
  wait
done

echo "== quorum latency as TP x PP grows (host copies)"
for ranks in 4 8 16 32 64; do
  timeout 90 "$h" demo --tp "$ranks" --pp 1 --backend host --cpu-bytes 8G --seconds 4 --json > "$out/quorum-$ranks.json" 2>/dev/null
  python3 -c "import json; d=json.load(open('$out/quorum-$ranks.json')); print($ranks, 'ranks: quorum p50', round(d['quorum_ms']['p50'],2), 'ms p99', round(d['quorum_ms']['p99'],2), 'ms', d['stores']+d['loads'], 'jobs', round(d['gb_per_second'],2), 'GB/s')"
done

echo "== every GPU copying at once"
gpus=$(nvidia-smi -L | wc -l)
for ((d = 0; d < gpus; d++)); do
  timeout 150 "$h" bench copy --device "$d" --blocks 64K,1M --bytes 1G --repeat 3 > "$out/copy-gpu$d.txt" 2>&1 &
done
wait
for ((d = 0; d < gpus; d++)); do echo "-- GPU $d"; cat "$out/copy-gpu$d.txt"; done

echo 0 > /proc/sys/vm/nr_hugepages
echo "$pool_before" > /proc/sys/vm/nr_hugepages
