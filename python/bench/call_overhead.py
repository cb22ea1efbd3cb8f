"""The Python package's per-call overhead: Worker.store() and Worker.load() against the same C call
(hugepin_worker_store / _load timed in C by call_timer.c, loaded as a shared library), at each pair
count, in one process, interleaved call by call.

One process holds a TP=1 arena's scheduler and its worker. Each timed call is one job: dispatched
untimed, then the call alone timed, then, untimed, the wait for its copies and polls without
waiting until its report is applied, so every call starts from the same idle state. Rounds cycle
through C, Python with numpy pairs, Python with torch pairs (N x 2 int64, made once), so both sides
meet the machine and the library in the same states. Host memcpy backend, or with --gpu the region
pinned and the device KV a CUDA tensor (the call enqueues and returns).

Usage: python3 call_overhead.py --c-timer LIBRARY [--pairs 64,4096] [--iterations N]
                                [--block-bytes B] [--gpu DEVICE] [--json]
"""

from __future__ import annotations

import argparse
import ctypes
import json
import os
import sys
import time

import numpy
import torch

import hugepin

BLOCKS_PER_CHUNK = 64


def plan_input(max_pairs: int, block_bytes: int) -> dict:
    blocks = -(-max_pairs // BLOCKS_PER_CHUNK) * BLOCKS_PER_CHUNK
    return {"tp": 1, "pp": 1, "blocks_per_chunk": BLOCKS_PER_CHUNK, "cpu_bytes": blocks * block_bytes,
            "page_size": "4K", "ranks": [{"tp_rank": 0, "pp_rank": 0, "num_blocks": blocks,
                                          "bytes_per_block": block_bytes}]}


def load_timer(path: str):
    library = ctypes.CDLL(path)
    timed = library.hugepin_bench_timed_call
    timed.restype = ctypes.c_int64
    timed.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_uint64, ctypes.c_void_p, ctypes.c_size_t,
                      ctypes.POINTER(ctypes.c_int)]
    return timed


class Bench:
    def __init__(self, scheduler, worker, timer):
        self.scheduler, self.worker, self.timer = scheduler, worker, timer
        self.rc = ctypes.c_int()

    def one_call(self, side: str, store: bool, pairs, chunks) -> int:
        job = self.scheduler.dispatch(hugepin.STORE if store else hugepin.LOAD, chunks)
        if side == "c":
            took = self.timer(self.worker._handle, 1 if store else 0, job, pairs.ctypes.data, len(pairs),
                              ctypes.byref(self.rc))
            if self.rc.value < 0:
                raise RuntimeError(f"the C call failed with {self.rc.value}")
        else:
            call = self.worker.store if store else self.worker.load
            start = time.perf_counter_ns()
            call(job, pairs)
            took = time.perf_counter_ns() - start
        if not self.worker.wait(job, 10.0):
            raise RuntimeError(f"job {job} did not land in 10 s")
        self.worker.finished()
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:  # without waiting: no doorbell sleep to wake
            if job in self.scheduler.poll(0).completed:
                return took
        raise RuntimeError(f"job {job} did not complete")


def measure(args) -> list[dict]:
    arena = f"overhead-py-{os.getpid()}"
    timer = load_timer(args.c_timer)
    rows = []
    plan = hugepin.Plan.from_dict(plan_input(max(args.pairs), args.block_bytes))
    with hugepin.Scheduler.create(arena, plan) as scheduler, hugepin.Worker(arena, 0) as worker:
        blocks = worker.segments[0].host_blocks
        device = "cpu"
        if args.gpu is not None:
            worker.pin(args.gpu)
            device = f"cuda:{args.gpu}"
        device_kv = torch.zeros((blocks, args.block_bytes), dtype=torch.uint8, device=device)
        worker.set_device_kv([device_kv], "gpu" if args.gpu is not None else "host")
        bench = Bench(scheduler, worker, timer)
        for count in args.pairs:
            chunks = list(range(-(-count // BLOCKS_PER_CHUNK)))
            as_numpy = numpy.repeat(numpy.arange(count, dtype=numpy.int64), 2).reshape(count, 2)
            sides = {"c": as_numpy, "numpy": as_numpy, "torch": torch.from_numpy(as_numpy.copy())}
            for store in (True, False):
                samples = {side: [] for side in sides}
                for i in range(args.iterations // 10 + 1 + args.iterations):
                    for side, pairs in sides.items():
                        took = bench.one_call(side, store, pairs, chunks)
                        if i > args.iterations // 10:  # the first tenth warms up
                            samples[side].append(took)
                row = {"pairs": count, "kind": "store" if store else "load"}
                for side, values in samples.items():
                    values.sort()
                    row[side] = (values[len(values) // 2], values[len(values) * 9 // 10])
                rows.append(row)
    return rows


def table(args, rows: list[dict]) -> str:
    def cell(pair):
        return f"{pair[0] / 1000:.2f} ({pair[1] / 1000:.2f})"

    lines = [f"backend {'gpu ' + str(args.gpu) if args.gpu is not None else 'host memcpy'}, "
             f"{args.block_bytes}-byte blocks, {args.iterations} calls per column, interleaved; median (p90) us "
             f"per call; Python {sys.version.split()[0]}, numpy {numpy.__version__}, torch {torch.__version__}",
             f"{'PAIRS':>6}  {'CALL':<5}  {'C':>14}  {'PY numpy':>14}  {'PY torch':>14}  {'+numpy':>7}  {'+torch':>7}"]
    for row in rows:
        extra = [f"{(row[side][0] - row['c'][0]) / 1000:+.2f}" for side in ("numpy", "torch")]
        lines.append(f"{row['pairs']:>6}  {row['kind']:<5}  {cell(row['c']):>14}  {cell(row['numpy']):>14}  "
                     f"{cell(row['torch']):>14}  {extra[0]:>7}  {extra[1]:>7}")
    return "\n".join(lines)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--c-timer", required=True, help="the shared library built from call_timer.c")
    parser.add_argument("--pairs", type=lambda s: [int(x) for x in s.split(",")], default=[64, 4096])
    parser.add_argument("--iterations", type=int, default=2000)
    parser.add_argument("--block-bytes", type=int, default=512)
    parser.add_argument("--gpu", type=int, default=None, help="GPU backend on this device")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    rows = measure(args)
    print(json.dumps(rows) if args.json else table(args, rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
