#!/usr/bin/env bash
# Checks the LD_PRELOAD shim with PyTorch on a GPU host, as root: reserves 2 MiB hugepages, mounts a
# private hugetlbfs for the shim's mappings, runs shim/torch_check.py (one report, exit 1 on any
# failed check), and gives the pages and the mount back whatever happens.
#
# Usage: shim/gpu-host-check.sh PRELOAD_SO [OUT_DIR] [torch_check.py options]
#   PRELOAD_SO  libhugepin_preload.so (built anywhere with glibc <= the host's: it needs only libc)
#   OUT_DIR     where the report is written as well (default: no copy)
# Needs: python3 with torch (CUDA), an NVIDIA GPU, root, and free memory for the pool (34 GiB by
# default: HUGEPIN_CHECK_POOL_PAGES pages of 2 MiB; the 32 GiB timing needs 16384 of them).
set -uo pipefail
preload=${1:?usage: shim/gpu-host-check.sh PRELOAD_SO [OUT_DIR] [torch_check.py options]}
out=${2:-}
shift $(( $# >= 2 ? 2 : 1 ))
here=$(cd "$(dirname "$0")" && pwd)
pool_pages=${HUGEPIN_CHECK_POOL_PAGES:-17408}

[ "$(id -u)" -eq 0 ] || { echo "gpu-host-check: needs root (hugepages, mount)" >&2; exit 1; }
[ -f "$preload" ] || { echo "gpu-host-check: no such file: $preload" >&2; exit 1; }
python3 -c 'import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)' ||
  { echo "gpu-host-check: python3 cannot import torch with CUDA" >&2; exit 1; }

nvidia-smi --query-gpu=name,driver_version,pci.bus_id --format=csv,noheader
python3 -c 'import torch; print("torch", torch.__version__, "CUDA", torch.version.cuda)'
echo "shim: $preload, exports:"; nm -D --defined-only "$preload" | awk '{print "  " $3}'

nr=/proc/sys/vm/nr_hugepages
pool_before=$(cat $nr)
mount_dir=$(mktemp -d /tmp/hugepin-shim-check-XXXXXX)
cleanup() {
  umount "$mount_dir" 2>/dev/null
  rmdir "$mount_dir" 2>/dev/null
  echo "$pool_before" > $nr
}
trap cleanup EXIT

echo $((pool_before + pool_pages)) > $nr
got=$(cat $nr)
if [ "$got" -lt $((pool_before + pool_pages)) ]; then
  echo "gpu-host-check: the kernel reserved $((got - pool_before)) of $pool_pages more 2 MiB pages" >&2
  exit 1
fi
mount -t hugetlbfs -o pagesize=2M,mode=0700 none "$mount_dir" || exit 1
grep -E 'HugePages_(Total|Free)' /proc/meminfo

report=$(mktemp)
python3 "$here/torch_check.py" --shim "$preload" --hugetlbfs "$mount_dir" "$@" 2>&1 | tee "$report"
rc=${PIPESTATUS[0]}
if [ -n "$out" ]; then
  mkdir -p "$out"
  cp "$report" "$out/torch_check.txt"
fi
rm -f "$report"
exit "$rc"
