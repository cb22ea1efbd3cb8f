"""The Python package's per-call overhead: store() and load() through hugepin against the same
calls made from C (call_overhead.c), at each pair count, side by side.

Both sides do the same thing: one process holds a TP=1 arena's scheduler and its worker; each
timed call is one job, dispatched untimed, then the call alone timed, then, untimed, the wait for
its copies and the drain of its report. The Python side times the call with its pairs as a numpy
array and as a torch tensor (N x 2 int64, made once). Host memcpy backend, or with --gpu the
region pinned and device KV in GPU memory (the call enqueues and returns).

Usage: python3 call_overhead.py [--c-program PATH] [--pairs 64,4096] [--iterations N]
                                [--block-bytes B] [--gpu DEVICE] [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
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


def one_call(scheduler, worker, call, pairs, chunks) -> int:
    job = scheduler.dispatch(hugepin.STORE if call == worker.store else hugepin.LOAD, chunks)
    start = time.perf_counter_ns()
    call(job, pairs)
    took = time.perf_counter_ns() - start
    if not worker.wait(job, 10.0):
        raise RuntimeError(f"job {job} did not land in 10 s")
    worker.finished()
    for _ in range(1000):
        if job in scheduler.poll(0.01).completed:
            return took
    raise RuntimeError(f"job {job} did not complete")


def python_rows(args) -> list[dict]:
    max_pairs = max(args.pairs)
    arena = f"overhead-py-{os.getpid()}"
    rows = []
    with hugepin.Scheduler.create(arena, hugepin.Plan.from_dict(plan_input(max_pairs, args.block_bytes))) as scheduler:
        with hugepin.Worker(arena, 0) as worker:
            blocks = worker.segments[0].host_blocks
            if args.gpu is not None:
                worker.pin(args.gpu)
                device_kv = torch.zeros((blocks, args.block_bytes), dtype=torch.uint8, device=f"cuda:{args.gpu}")
            else:
                device_kv = torch.zeros((blocks, args.block_bytes), dtype=torch.uint8)
            worker.set_device_kv([device_kv], "gpu" if args.gpu is not None else "host")
            for count in args.pairs:
                chunks = list(range(-(-count // BLOCKS_PER_CHUNK)))
                as_numpy = numpy.repeat(numpy.arange(count, dtype=numpy.int64), 2).reshape(count, 2)
                as_torch = torch.from_numpy(as_numpy.copy())
                for kind in ("store", "load"):
                    row = {"pairs": count, "kind": kind}
                    call = worker.store if kind == "store" else worker.load
                    for name, pairs in (("numpy", as_numpy), ("torch", as_torch)):
                        for _ in range(args.iterations // 10 + 1):
                            one_call(scheduler, worker, call, pairs, chunks)
                        samples = sorted(one_call(scheduler, worker, call, pairs, chunks)
                                         for _ in range(args.iterations))
                        row[name] = (samples[len(samples) // 2], samples[len(samples) * 9 // 10])
                    rows.append(row)
    return rows


def c_rows(args) -> dict:
    command = [args.c_program, "--pairs", ",".join(map(str, args.pairs)), "--iterations", str(args.iterations),
               "--block-bytes", str(args.block_bytes)]
    if args.gpu is not None:
        command += ["--gpu", str(args.gpu)]
    done = subprocess.run(command, capture_output=True, text=True, timeout=600)
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(command)} exited {done.returncode}: {done.stderr.strip()}")
    result = json.loads(done.stdout)
    return {(row["pairs"], row["kind"]): (row["median_ns"], row["p90_ns"]) for row in result["rows"]}


def table(args, rows: list[dict], c: dict) -> str:
    us = lambda ns: f"{ns / 1000:.2f}"  # noqa: E731
    lines = [f"backend {'gpu ' + str(args.gpu) if args.gpu is not None else 'host memcpy'}, "
             f"{args.block_bytes}-byte blocks, {args.iterations} calls each; median (p90) us per call; "
             f"Python {sys.version.split()[0]}, numpy {numpy.__version__}, torch {torch.__version__}",
             f"{'PAIRS':>6}  {'CALL':<5}  {'C':>14}  {'PY numpy':>14}  {'PY torch':>14}  {'+numpy':>7}  {'+torch':>7}"]
    for row in rows:
        base = c.get((row["pairs"], row["kind"]))
        cells = [f"{us(v[0])} ({us(v[1])})" for v in (base, row["numpy"], row["torch"]) if v is not None]
        if base is None:
            cells.insert(0, "-")
        extra = [f"+{us(row[n][0] - base[0])}" if base else "-" for n in ("numpy", "torch")]
        lines.append(f"{row['pairs']:>6}  {row['kind']:<5}  {cells[0]:>14}  {cells[1]:>14}  {cells[2]:>14}  "
                     f"{extra[0]:>7}  {extra[1]:>7}")
    return "\n".join(lines)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--c-program", help="call_overhead built from call_overhead.c (else Python only)")
    parser.add_argument("--pairs", type=lambda s: [int(x) for x in s.split(",")], default=[64, 4096])
    parser.add_argument("--iterations", type=int, default=2000)
    parser.add_argument("--block-bytes", type=int, default=512)
    parser.add_argument("--gpu", type=int, default=None, help="GPU backend on this device")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    c = c_rows(args) if args.c_program else {}
    rows = python_rows(args)
    if args.json:
        print(json.dumps({"python": rows, "c": [{"pairs": k[0], "kind": k[1], "median_ns": v[0], "p90_ns": v[1]}
                                                for k, v in c.items()]}))
    else:
        print(table(args, rows, c))
    return 0


if __name__ == "__main__":
    sys.exit(main())
