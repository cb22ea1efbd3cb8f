#!/usr/bin/env bash
# Issue 16's targets on a GPU host, as root, in one device call: `hugepin bench offload --backend gpu`
# RUNS times without MPS and RUNS times with the MPS control daemon, once with one rank alone on the
# GPU (--tp 1 --pp 1), once under MPS looking once per step; each run's JSON in OUT_DIR, then
# bench/offload_targets.py's summary of them all (summary.txt), labelled by setting.
# Usage: bench/gpu-offload-targets.sh PREFIX OUT_DIR [RUNS]   (RUNS: 3; about 40 s a run)
#   PREFIX   a `cmake --install` prefix (bin/hugepin); extra bench options in $OFFLOAD_OPTIONS
#   BACKEND  gpu unless set (host: a dry run of this script on a machine without a GPU)
#   POOL     2 MiB hugepages to reserve, 24G unless set; "none" leaves the pool and mounts alone
# Reserves the pool and mounts hugetlbfs when none is mounted; gives the pool back after.
set -uo pipefail
prefix=${1:?usage: gpu-offload-targets.sh PREFIX OUT_DIR [RUNS]}
out=${2:?usage: gpu-offload-targets.sh PREFIX OUT_DIR [RUNS]}
runs=${3:-3}
backend=${BACKEND:-gpu}
pool=${POOL:-24G}
here=$(cd "$(dirname "$0")" && pwd)
hugepin="$prefix/bin/hugepin"
export LD_LIBRARY_PATH="$prefix/lib:${LD_LIBRARY_PATH:-}"
mkdir -p "$out"
pool_before=$(cat /proc/sys/vm/nr_hugepages)
if [ "$pool" != none ]; then
  "$hugepin" pool set "$pool" --pagesize 2M >/dev/null || true
  mountpoint -q /dev/hugepages || "$hugepin" pool mount --pagesize 2M --dir /dev/hugepages
fi
status=0
labels=()
# bench NAME LABEL [OPTIONS...]: one run, its JSON in OUT_DIR/NAME.json, its stderr beside it.
bench() {
  local name=$1 label=$2
  shift 2
  # shellcheck disable=SC2086  # OFFLOAD_OPTIONS is a list of words
  timeout 300 "$hugepin" bench offload --backend "$backend" "$@" ${OFFLOAD_OPTIONS:-} --json \
    > "$out/$name.json" 2> "$out/$name.err" || { echo "gpu-offload-targets: $name failed" >&2; status=1; return; }
  labels+=("$label=$out/$name.json")
  echo "gpu-offload-targets: $name done"
}
for i in $(seq "$runs"); do bench "plain$i" "without MPS"; done
bench tp1 "one rank alone" --tp 1 --pp 1
export CUDA_MPS_PIPE_DIRECTORY=/tmp/hugepin-mps-pipe CUDA_MPS_LOG_DIRECTORY=/tmp/hugepin-mps-log
mkdir -p "$CUDA_MPS_PIPE_DIRECTORY" "$CUDA_MPS_LOG_DIRECTORY"
if nvidia-cuda-mps-control -d; then
  sleep 1
  for i in $(seq "$runs"); do bench "mps$i" "MPS"; done
  bench mps-step "MPS" --collect-every-us 2000 --jobs-in-flight 64 --cpu-bytes 8G
  echo quit | nvidia-cuda-mps-control
else
  echo "gpu-offload-targets: the MPS control daemon would not start: no MPS runs" >&2
  status=1
fi
unset CUDA_MPS_PIPE_DIRECTORY CUDA_MPS_LOG_DIRECTORY
if [ ${#labels[@]} -gt 0 ]; then
  python3 "$here/offload_targets.py" "${labels[@]}" | tee "$out/summary.txt" || status=1
fi
if [ "$pool" != none ]; then
  echo 0 > /proc/sys/vm/nr_hugepages
  echo "$pool_before" > /proc/sys/vm/nr_hugepages
fi
exit $status
