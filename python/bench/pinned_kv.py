"""Seconds until N GiB of pinned host KV is usable from torch, and the bytes taken per byte asked,
four ways, each in a process of its own (CUDA initialised before the clock starts):

  torch-pin-memory   torch.empty(N, dtype=torch.uint8, pin_memory=True): cudaHostAlloc through
                     torch's caching host allocator (which rounds up to a power of two)
  vllm-shm-register  vLLM's way: a /dev/shm file, ftruncate, mmap, cudaHostRegister (through
                     torch.cuda.cudart()), torch.frombuffer over the mapping
  hugepin-cold       the arena created now (2 MiB hugepages, strict: no fallback), its one rank
                     attached, pinned (Worker.pin), Worker.host_tensor()
  hugepin-warm       the arena already there (left by the cold row, as when a worker restarts
                     under hugepind): attach, pin, host_tensor

Usable: a CPU tensor over all N bytes whose is_pinned() is True. Taken: how much free memory
(MemFree, plus free hugepages) dropped while the method holds the KV, less nothing: for the warm row,
what the arena holds (taken by the cold row) plus what the warm process took. The hugepage rows run
first, with a pool of N reserved for them and given back after, then the others (a host with twice N
of memory or less cannot hold both at once). Needs root (the pool, a hugetlbfs mount, and a private
tmpfs when /dev/shm is smaller than N) and one CUDA device.

Usage: python3 pinned_kv.py [--sizes 16,64] [--device 0]
"""

from __future__ import annotations

import argparse
import ctypes
import json
import mmap
import os
import subprocess
import sys
import time

GIB = 1 << 30
HUGEPAGE = 2 << 20
METHODS = ("torch-pin-memory", "vllm-shm-register", "hugepin-cold", "hugepin-warm")


def meminfo() -> dict:
    values = {}
    with open("/proc/meminfo") as text:
        for line in text:
            name, _, rest = line.partition(":")
            values[name] = int(rest.split()[0])
    return values


def free_bytes() -> int:
    """Free memory, counting free hugepages of the default size as free too."""
    info = meminfo()
    return info["MemFree"] * 1024 + info["HugePages_Free"] * info["Hugepagesize"] * 1024


# ------------------------------------------------------------------------------------ one method


def child(method: str, size: int, device: int, arena: str, shm_dir: str) -> dict:
    import torch

    torch.cuda.set_device(device)
    torch.zeros(1, device=f"cuda:{device}")
    torch.cuda.synchronize()
    keep = []
    before = free_bytes()
    start = time.perf_counter()
    if method == "torch-pin-memory":
        tensor = torch.empty(size, dtype=torch.uint8, pin_memory=True)
    elif method == "vllm-shm-register":
        path = os.path.join(shm_dir, f"hugepin-pinned-kv-{os.getpid()}")
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o600)
        os.ftruncate(fd, size)
        region = mmap.mmap(fd, size, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)
        os.close(fd)
        os.unlink(path)  # the mapping keeps the pages
        address = ctypes.addressof(ctypes.c_char.from_buffer(region))
        error = torch.cuda.cudart().cudaHostRegister(address, size, 0)
        if int(error) != 0:
            raise RuntimeError(f"cudaHostRegister of {size} bytes: error {int(error)}")
        tensor = torch.frombuffer(region, dtype=torch.uint8)
        keep.append(region)
    else:
        import hugepin

        if method == "hugepin-cold":
            plan = hugepin.Plan.from_dict({"tp": 1, "pp": 1, "blocks_per_chunk": 1, "cpu_bytes": size,
                                           "page_size": "2M", "ranks": [{"tp_rank": 0, "pp_rank": 0, "num_blocks": 1,
                                                                         "bytes_per_block": HUGEPAGE}]})
            keep.append(hugepin.Scheduler.create(arena, plan, strict=True, keep_arena=True))
        worker = hugepin.Worker(arena, 0)
        worker.pin(device)
        tensor = worker.host_tensor()
        keep.append(worker)
    seconds = time.perf_counter() - start
    result = {"method": method, "asked": size, "seconds": seconds, "taken": before - free_bytes(),
              "bytes": tensor.numel(), "pinned": bool(tensor.is_pinned())}
    del tensor
    return result


# ------------------------------------------------------------------------------------ the table


def run_child(args, method: str, size: int, arena: str, shm_dir: str) -> dict:
    command = [sys.executable, __file__, "--child", method, "--size", str(size), "--device", str(args.device),
               "--arena", arena, "--shm-dir", shm_dir]
    done = subprocess.run(command, capture_output=True, text=True, timeout=args.timeout)
    if done.returncode != 0:
        tail = done.stderr.strip().splitlines()[-3:]
        return {"method": method, "asked": size, "failed": f"exit {done.returncode}: {' / '.join(tail)}"}
    return json.loads(done.stdout.strip().splitlines()[-1])


def write(path: str, value: str) -> None:
    with open(path, "w") as out:
        out.write(value)


def hugetlbfs_mounted() -> bool:
    with open("/proc/mounts") as mounts:
        return any(line.split()[2] == "hugetlbfs" and "pagesize=1024M" not in line for line in mounts)


def hugepage_rows(args, arena: str, notes: list) -> list:
    import hugepin

    rows = []
    pool = "/proc/sys/vm/nr_hugepages"
    pool_before = int(open(pool).read())
    try:
        wanted = max(args.sizes) // HUGEPAGE + 64
        write(pool, str(max(pool_before, wanted)))
        free = meminfo()["HugePages_Free"]
        notes.append(f"pool: {free} free 2 MiB pages of {wanted} wanted")
        if not hugetlbfs_mounted():
            os.makedirs("/dev/hugepages", exist_ok=True)
            subprocess.run(["mount", "-t", "hugetlbfs", "-o", "pagesize=2M", "none", "/dev/hugepages"], check=True)
            notes.append("mounted hugetlbfs (2M) at /dev/hugepages")
        for size in args.sizes:
            if free * HUGEPAGE < size:
                rows.append({"method": "hugepin-cold", "asked": size, "failed": "the pool cannot hold it"})
                continue
            name = f"{arena}-{size // GIB}g"
            before = free_bytes()
            cold = run_child(args, "hugepin-cold", size, name, "")
            rows.append(cold)
            if "failed" not in cold:
                kept = before - free_bytes()  # what the arena holds with no process attached
                warm = run_child(args, "hugepin-warm", size, name, "")
                if "failed" not in warm:
                    warm["taken"] += kept
                rows.append(warm)
            try:
                hugepin.destroy_arena(name)
            except hugepin.NotFoundError:
                pass
    finally:
        write(pool, "0")
        write(pool, str(pool_before))
    return rows


def shm_dir_for(size: int, notes: list) -> tuple[str, bool]:
    stat = os.statvfs("/dev/shm")
    if stat.f_bavail * stat.f_frsize >= size + GIB:
        return "/dev/shm", False
    private = "/tmp/hugepin-pinned-kv-shm"
    os.makedirs(private, exist_ok=True)
    subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size // GIB + 2}G,mode=1777", "tmpfs", private], check=True)
    notes.append(f"{size // GIB} GiB: /dev/shm has {stat.f_bavail * stat.f_frsize / GIB:.1f} GiB free, so vLLM's "
                 f"file went to a private tmpfs of {size // GIB + 2} GiB (the same file system)")
    return private, True


def other_rows(args, notes: list) -> list:
    rows = []
    for size in args.sizes:
        rows.append(run_child(args, "torch-pin-memory", size, "", ""))
        directory, mounted = shm_dir_for(size, notes)
        try:
            rows.append(run_child(args, "vllm-shm-register", size, "", directory))
        finally:
            if mounted:
                subprocess.run(["umount", directory], check=False)
    return rows


def table(rows: list, notes: list) -> str:
    lines = [f"{'GIB':>4}  {'METHOD':<18}  {'SECONDS':>8}  {'vs TORCH':>8}  {'TAKEN GIB':>9}  {'TAKEN/ASKED':>11}  PINNED"]
    torch_seconds = {row["asked"]: row["seconds"] for row in rows
                     if row["method"] == "torch-pin-memory" and "failed" not in row}
    for size in sorted({row["asked"] for row in rows}):
        for method in METHODS:
            for row in (r for r in rows if r["asked"] == size and r["method"] == method):
                if "failed" in row:
                    lines.append(f"{size / GIB:>4.0f}  {method:<18}  FAILED: {row['failed']}")
                    continue
                ratio = torch_seconds.get(size, 0) / row["seconds"] if row["seconds"] > 0 else 0
                lines.append(f"{size / GIB:>4.0f}  {method:<18}  {row['seconds']:>8.2f}  "
                             f"{ratio:>7.1f}x  {row['taken'] / GIB:>9.2f}  {row['taken'] / size:>11.3f}  "
                             f"{'yes' if row['pinned'] and row['bytes'] == size else 'NO'}")
    return "\n".join(lines + [f"note: {note}" for note in notes])


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", type=lambda s: [int(x) * GIB for x in s.split(",")], default=[16 * GIB, 64 * GIB],
                        help="GiB, comma-separated (default 16,64)")
    parser.add_argument("--device", type=int, default=0)
    parser.add_argument("--timeout", type=float, default=300, help="seconds per row")
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--child", choices=METHODS, help=argparse.SUPPRESS)
    parser.add_argument("--size", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--arena", default="", help=argparse.SUPPRESS)
    parser.add_argument("--shm-dir", default="", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        print(json.dumps(child(args.child, args.size, args.device, args.arena, args.shm_dir)))
        return 0
    if os.geteuid() != 0:
        print("pinned_kv: needs root (hugepage pool, hugetlbfs and tmpfs mounts)", file=sys.stderr)
        return 2
    notes = [f"{meminfo()['MemTotal'] / (1 << 20):.0f} GiB of memory"]
    rows = hugepage_rows(args, f"pinned-kv-{os.getpid()}", notes) + other_rows(args, notes)
    print(json.dumps(rows) if args.json else table(rows, notes))
    return 1 if any("failed" in row or not row["pinned"] for row in rows) else 0


if __name__ == "__main__":
    sys.exit(main())
