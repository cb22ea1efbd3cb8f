#!/usr/bin/env bash
# The Python package on a GPU host (one CUDA device, run as root): the GPU test (TP=2 worker
# processes, CUDA tensors, the GPU backend), the TP 2 x PP 2 demo on the GPU, the per-call overhead
# of store/load against the C call (host memcpy and GPU), the pinned-KV table (seconds until
# N GiB of pinned host KV is usable from torch, bytes taken per byte asked, four ways), and the vLLM
# plug-in (hugepin.vllm: the connector's sequence with a real model's KV shape at TP 2 on the GPU,
# and its stores and loads beside vLLM's cudaMemcpyBatchAsync over pinned torch memory).
#
# Usage: python/gpu-host-check.sh PREFIX OUT_DIR
#   PREFIX   a folder holding libhugepin.so.0 built with CUDA and the hugepin package beside it, at
#            any depth: an install prefix (cmake --install BUILD --prefix PREFIX), a build tree, or
#            a copy of build/capi/libhugepin.so* and build/python/hugepin; the library found there
#            is the one loaded (HUGEPIN_LIBRARY), the header is this tree's include/
#   OUT_DIR  where each step's output goes (one file per step)
# Environment: PYTHON (default python3: the venv's, with torch and numpy), STEPS (default
# "preflight tests demo overhead pinned vllm"), SIZES (GiB for the pinned-KV table, default 16,64),
# CALLS (calls per column of the overhead table, default 2000), VLLM_BLOCKS and VLLM_REPS (GPU
# blocks per rank per job, default 256, and jobs per row, default 7, of the vLLM plug-in's table).
#
# Each step prints "== <command>", then its output, and has a time limit; a failed step says so
# and the next one runs. Exit status 0 when every step passed. On the H200 host every step took
# 116 s in all with SIZES=16 (2026-12-01); the pinned step at 64 GiB alone, about 75 s.
set -u
if [ $# -ne 2 ]; then
  echo "usage: $0 PREFIX OUT_DIR" >&2
  exit 2
fi
here=$(cd "$(dirname "$0")" && pwd)
prefix=$(cd "$1" 2>/dev/null && pwd) || { echo "gpu-host-check: no such prefix: $1" >&2; exit 2; }
out=$2
mkdir -p "$out" || exit 2
out=$(cd "$out" && pwd)
python=${PYTHON:-python3}
steps=${STEPS:-preflight tests demo overhead pinned vllm}
sizes=${SIZES:-16,64}
calls=${CALLS:-2000}
vllm_blocks=${VLLM_BLOCKS:-256}
vllm_reps=${VLLM_REPS:-7}
work=$(mktemp -d /tmp/hugepin-gpu-check-XXXXXX)
trap 'rm -rf "$work"' EXIT

fail() { echo "gpu-host-check: $*" >&2; exit 1; }

init=$(find "$prefix" -path '*/hugepin/__init__.py' -print -quit)
[ -n "$init" ] || fail "no Python package under $prefix (hugepin/__init__.py): cmake --install BUILD --prefix $prefix"
library=$(find "$prefix" -name 'libhugepin.so.0' -print -quit)
[ -n "$library" ] || fail "no libhugepin.so.0 under $prefix"
include=$(cd "$here/../include" && pwd)
export PYTHONPATH="$(dirname "$(dirname "$init")")"
export HUGEPIN_LIBRARY=$library
missing=$(ldd "$library" | grep 'not found')
[ -z "$missing" ] || fail "$library needs libraries this host lacks: $missing"

declare -a results=()
# run NAME LIMIT COMMAND...: prints the command and its output, keeps it in OUT_DIR/NAME.txt.
run() {
  local name=$1 limit=$2
  shift 2
  echo
  echo "== $*" | tee "$out/$name.txt"
  timeout --kill-after=15 "$limit" "$@" 2>&1 | tee -a "$out/$name.txt"
  local rc=${PIPESTATUS[0]}
  case $rc in
    0) results+=("PASS  $name") ;;
    124|137) results+=("FAIL  $name: no result in $limit s"); echo "gpu-host-check: $name ran past $limit s" ;;
    *) results+=("FAIL  $name: exit $rc"); echo "gpu-host-check: $name failed (exit $rc)" ;;
  esac
  return "$rc"
}

wants() { case " $steps " in *" $1 "*) return 0 ;; *) return 1 ;; esac; }

if wants preflight; then
  # The host, the interpreter, and a libhugepin that can pin (a build without CUDA says ENODEV).
  run preflight 120 "$python" -c "
import subprocess, sys, os, torch, numpy, hugepin
print(subprocess.run(['nvidia-smi', '--query-gpu=name,driver_version,memory.total', '--format=csv,noheader'],
                     capture_output=True, text=True).stdout.strip())
print('python', sys.version.split()[0], sys.executable, '| torch', torch.__version__, '| numpy', numpy.__version__)
print('hugepin', hugepin.__version__, hugepin.library_path())
assert torch.cuda.is_available(), 'torch sees no CUDA device'
name = 'gpu-preflight-%d' % os.getpid()
plan = hugepin.Plan.from_dict({'tp': 1, 'pp': 1, 'blocks_per_chunk': 1, 'cpu_bytes': 1 << 21, 'page_size': '4K',
                               'ranks': [{'tp_rank': 0, 'pp_rank': 0, 'num_blocks': 1, 'bytes_per_block': 4096}]})
with hugepin.Scheduler.create(name, plan) as scheduler, hugepin.Worker(name, 0) as worker:
    worker.pin(0)
    host = worker.host_tensor()
    print('pinned a region for cuda:0; torch sees it pinned:', host.is_pinned())
    assert host.is_pinned()
    del host
" || fail "preflight failed: nothing else can work (see above)"
fi

if wants tests; then
  run gpu-tests 300 "$python" "$here/tests/gpu_check.py"
fi

if wants demo; then
  run demo-gpu 240 "$python" -m hugepin.demo --tp 2 --pp 2 --backend gpu --jobs 24
fi

if wants overhead; then
  timer="$work/libhugepin_call_timer.so"
  echo
  echo "== cc -O2 -shared -fPIC -I$include $here/bench/call_timer.c $library -o $timer"
  if cc -O2 -shared -fPIC -I"$include" "$here/bench/call_timer.c" "$library" -Wl,-rpath,"$(dirname "$library")" \
      -o "$timer"; then
    run overhead-host 300 "$python" "$here/bench/call_overhead.py" --c-timer "$timer" --iterations "$calls"
    run overhead-gpu 300 "$python" "$here/bench/call_overhead.py" --c-timer "$timer" --iterations "$calls" --gpu 0
  else
    results+=("FAIL  overhead: the C timer did not build")
  fi
fi

if wants pinned; then
  run pinned-kv 540 "$python" "$here/bench/pinned_kv.py" --sizes "$sizes"
fi

if wants vllm; then
  run vllm 480 "$python" "$here/tests/vllm_gpu_check.py" --blocks "$vllm_blocks" --reps "$vllm_reps"
fi

echo
echo "== summary ($out)"
printf '%s\n' "${results[@]}" | tee "$out/summary.txt"
for result in "${results[@]}"; do
  case $result in FAIL*) exit 1 ;; esac
done
exit 0
