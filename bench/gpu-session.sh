#!/usr/bin/env bash
# Every GPU-host check of this phase, from what bench/stage-gpu-carry.sh staged in .devbin, in two
# parts that each fit one device call (10 minutes), run as root from the repository root:
#   native  dma_cuda_test, the C and C++ examples on the GPU backend through the installed
#           library, the demo on the GPU, hugepin bench offload (bench/gpu-library-check.sh), and
#           hugepin bench ring three times with membarrier registered and three with it refused
#   python  the Python package and hugepin.vllm (python/gpu-host-check.sh: GPU tests, the demo,
#           per-call overhead, the pinned-KV table, the plug-in's sequence and throughput)
# Usage: bench/gpu-session.sh native|python OUT_DIR
set -u
part=${1:?usage: bench/gpu-session.sh native|python OUT_DIR}
out=${2:?usage: bench/gpu-session.sh native|python OUT_DIR}
stage=.devbin
[ -d "$stage/prefix" ] || { echo "gpu-session: no $stage/prefix: run bench/stage-gpu-carry.sh here first" >&2; exit 2; }
mkdir -p "$out" /tmp/deps
for f in "$stage"/deps/*.deb; do dpkg -x "$f" /tmp/deps; done
export LD_LIBRARY_PATH="/tmp/deps/usr/lib/x86_64-linux-gnu:/tmp/deps/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}"
status=0
case "$part" in
  native)
    bash bench/gpu-library-check.sh "$stage/prefix" "$stage/examples" "$stage/dma_cuda_test" "$out" || status=1
    echo; echo "== hugepin bench ring (3 runs registered, 3 with membarrier refused)"
    lscpu | head -20 > "$out/lscpu.txt"
    for i in 1 2 3; do
      timeout 120 "$stage/prefix/bin/hugepin" bench ring 2>&1 | tee -a "$out/ring.txt" || status=1
      timeout 120 "$stage/deny_membarrier" "$stage/prefix/bin/hugepin" bench ring 2>&1 | tee -a "$out/ring-refused.txt" \
        || status=1
    done ;;
  python)
    bash python/gpu-host-check.sh "$stage/prefix" "$out" || status=1 ;;
  *) echo "gpu-session: unknown part '$part' (native, python)" >&2; exit 2 ;;
esac
echo "gpu-session $part: status $status"
exit $status
