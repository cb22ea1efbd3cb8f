"""Stores and loads of hugepin.vllm beside vLLM's own way, on the same blocks, on a GPU host.

An engine at TP 2 on one GPU (two rank processes on the same device, as vllm_scenarios drives them)
with a KV cache shaped like a real model's: 32 layers, 8 KV heads (4 per rank), head size 128,
block size 16, bf16: 64 canonical tensors of 16 KiB per block on each rank, 1 MiB per block per
rank. Each timed job moves --blocks GPU blocks on both ranks at once (both start at the same
CLOCK_MONOTONIC instant; the job's time is from then until the later rank saw its copies land):

  hugepin store / load   the plug-in's path: the manager's prepare_store / prepare_load (a hugepin
                         job over the chunks), then submit_store / submit_load and wait on each
                         rank: pairs built, copies on the rank's pinned arena region by hugepin's
                         copy engine (its own choice of SM kernel or DMA), the report posted
  vllm store / load      what vLLM's CPU worker does: host KV in torch.empty(pin_memory=True)
                         tensors, one copy per block per canonical tensor, pointer arrays built per
                         job, cudaMemcpyBatchAsync (source access order: stream) on a low-priority
                         stream that waits for the current one; per-block cudaMemcpyAsync through
                         ctypes where the CUDA runtime lacks cudaMemcpyBatchAsync (before 12.8; the
                         table says which ran)

Loads go to other GPU blocks than the stores read. Figures: GB/s over both ranks (bytes of both /
time of the slower), median, min and max over --reps jobs, the methods interleaved job by job;
"gpu" is hugepin's own measure of its copies (hugepin_time_copies, on here though off by default:
the GPU time of the job's copies on the slower rank). After the timed jobs, one block of each method is compared with the GPU's bytes.

Usage: python3 vllm_offload.py [--device 0] [--blocks 256] [--reps 7] [--json]
       (PYTHONPATH: the hugepin package; needs torch with CUDA; about a minute)
"""

from __future__ import annotations

import argparse
import ctypes
import json
import os
import statistics
import sys
import time

import numpy as np
import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests"))
os.environ.setdefault("HUGEPIN_VLLM_STANDIN", "current")

import vllm_scenarios  # noqa: E402
from vllm_scenarios import Connector, Engine, Model, gpu_spec, key  # noqa: E402

# A real model's KV at TP 2: 32 layers, 8 KV heads (4 per rank), head size 128, block size 16, bf16.
MODEL_LAYERS, MODEL_KV_HEADS_PER_RANK, MODEL_HEAD_SIZE = 32, 4, 128
CUDA_MEMCPY_DEFAULT = 4
CUDA_MEMCPY_SRC_ACCESS_ORDER_STREAM = 1
BATCH_LIMIT = 8192  # copies per cudaMemcpyBatchAsync call, as hugepin's engine issues them


def model(num_blocks: int) -> Model:
    return Model(layers=(MODEL_LAYERS,), kv_heads=MODEL_KV_HEADS_PER_RANK, head_size=MODEL_HEAD_SIZE,
                 num_blocks=num_blocks)


class _MemLocation(ctypes.Structure):
    _fields_ = [("type", ctypes.c_int), ("id", ctypes.c_int)]


class _MemcpyAttributes(ctypes.Structure):  # cudaMemcpyAttributes (CUDA 12.8+)
    _fields_ = [("srcAccessOrder", ctypes.c_int), ("srcLocHint", _MemLocation), ("dstLocHint", _MemLocation),
                ("flags", ctypes.c_uint)]


def _loaded_cudart() -> str | None:
    """The CUDA runtime this process (torch) loaded."""
    with open("/proc/self/maps") as maps:
        for line in maps:
            path = line.split()[-1]
            if "libcudart.so" in os.path.basename(path):
                return path
    return None


class VllmCopy:
    """vLLM's CPU worker's copy of a job: one copy per (block, canonical tensor), by
    cudaMemcpyBatchAsync where the CUDA runtime has it, else one cudaMemcpyAsync each."""

    def __init__(self):
        torch.cuda.init()
        path = _loaded_cudart()
        for name in ([path] if path else ["libcudart.so.13", "libcudart.so.12", "libcudart.so"]):
            try:
                self.lib = ctypes.CDLL(name)
                path = name
                break
            except OSError:
                continue
        else:
            raise RuntimeError("no CUDA runtime: torch loaded none, and libcudart.so.13/.12/.so are not found")
        version = ctypes.c_int()
        self.lib.cudaRuntimeGetVersion(ctypes.byref(version))
        self.version = version.value
        self.batch = getattr(self.lib, "cudaMemcpyBatchAsync", None) if self.version >= 12080 else None
        pointer, size = ctypes.c_void_p, ctypes.c_size_t
        if self.batch is not None:
            self.batch.restype = ctypes.c_int
            if self.version >= 13000:  # CUDA 13 dropped the failIdx argument
                self.batch.argtypes = [pointer, pointer, pointer, size, pointer, pointer, size, pointer]
            else:
                self.batch.argtypes = [pointer, pointer, pointer, size, pointer, pointer, size, pointer, pointer]
            self.method = f"cudaMemcpyBatchAsync (CUDA runtime {self.version}, {os.path.basename(path)})"
        else:
            self.lib.cudaMemcpyAsync.restype = ctypes.c_int
            self.lib.cudaMemcpyAsync.argtypes = [pointer, pointer, size, ctypes.c_int, pointer]
            self.method = f"cudaMemcpyAsync per block (CUDA runtime {self.version} has no cudaMemcpyBatchAsync)"
        self.attributes = _MemcpyAttributes(srcAccessOrder=CUDA_MEMCPY_SRC_ACCESS_ORDER_STREAM)
        self.attribute_index = ctypes.c_size_t(0)
        self.fail_index = ctypes.c_size_t(0)

    def copy(self, dsts: np.ndarray, srcs: np.ndarray, sizes: np.ndarray, stream: int) -> None:
        """Enqueues dsts[i] <- srcs[i] (sizes[i] bytes) on `stream` (uint64 arrays of addresses)."""
        count = dsts.size
        if self.batch is None:
            for dst, src, size in zip(dsts.tolist(), srcs.tolist(), sizes.tolist()):
                self._check(self.lib.cudaMemcpyAsync(dst, src, size, CUDA_MEMCPY_DEFAULT, stream), "cudaMemcpyAsync")
            return
        for first in range(0, count, BATCH_LIMIT):
            n = min(BATCH_LIMIT, count - first)
            arguments = [dsts.ctypes.data + 8 * first, srcs.ctypes.data + 8 * first, sizes.ctypes.data + 8 * first, n,
                         ctypes.byref(self.attributes), ctypes.byref(self.attribute_index), 1]
            if self.version < 13000:
                arguments.append(ctypes.byref(self.fail_index))
            self._check(self.batch(*arguments, stream), f"cudaMemcpyBatchAsync of {n} copies")

    def _check(self, rc: int, what: str) -> None:
        if rc != 0:
            self.lib.cudaGetErrorString.restype = ctypes.c_char_p
            raise RuntimeError(f"{what}: CUDA error {rc} ({self.lib.cudaGetErrorString(rc).decode()})")


class HostCopy:
    """The same copies with memmove, for a smoke run of this benchmark on a machine without a GPU
    (python/tests/test_vllm_bench_smoke.py): no figure of it means anything."""
    method = "memmove (no GPU: a smoke run)"

    def copy(self, dsts: np.ndarray, srcs: np.ndarray, sizes: np.ndarray, stream) -> None:
        for dst, src, size in zip(dsts.tolist(), srcs.tolist(), sizes.tolist()):
            ctypes.memmove(dst, src, size)


class BenchRank(vllm_scenarios.Rank):
    """A rank that also times its transfers and runs vLLM's way on pinned torch memory."""

    def _synchronize(self) -> None:
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)

    def fill_random(self, request: dict) -> dict:
        for segment in self.segments:
            segment[request["first"]:request["first"] + request["count"]].random_(-128, 127)
        self._synchronize()
        return {"ok": True}

    @staticmethod
    def _until(start_at: float) -> None:
        while time.monotonic() < start_at:
            pass

    def timed(self, request: dict) -> dict:
        """The plug-in's store or load, submitted at start_at; when this rank saw it land."""
        src, dst = vllm_scenarios.unpacked(request["specs"])
        job = request["job"]
        self._until(request["start_at"])
        submit = self.worker.submit_store if request["kind"] == "store" else self.worker.submit_load
        if not submit(job, src, dst):
            return {"ok": False, "error": f"rank {self.rank}: job {job} not submitted"}
        self.worker.wait({job})
        end = time.monotonic()
        [result] = [r for r in self.worker.get_finished() if r.job_id == job]
        return {"ok": result.success, "end": end, "bytes": result.transfer_size, "gpu_seconds": result.transfer_time,
                "error": f"rank {self.rank}: job {job} failed"}

    def baseline_setup(self, request: dict) -> dict:
        count, cuda = request["count"], self.device.type == "cuda"
        self.pinned = [torch.empty((count, segment.shape[1]), dtype=torch.int8, pin_memory=cuda)
                       for segment in self.segments]
        self.vllm_copy = VllmCopy() if cuda else HostCopy()
        self.vllm_stream = None
        if cuda:
            low, _ = torch.cuda.Stream.priority_range()
            self.vllm_stream = torch.cuda.Stream(priority=low)
        return {"ok": True, "method": self.vllm_copy.method}

    def _pointers(self, first_gpu: int, count: int, store: bool):
        gpu, host, sizes = [], [], []
        blocks = np.arange(count, dtype=np.uint64)
        for segment, pinned in zip(self.segments, self.pinned):
            gpu.append(segment.data_ptr() + (first_gpu + blocks) * (segment.stride(0) * segment.element_size()))
            host.append(pinned.data_ptr() + blocks * pinned.stride(0))
            sizes.append(np.full(count, segment.shape[1], dtype=np.uint64))
        gpu, host, sizes = np.concatenate(gpu), np.concatenate(host), np.concatenate(sizes)
        return (host, gpu, sizes) if store else (gpu, host, sizes)

    def baseline(self, request: dict) -> dict:
        """vLLM's way, started at start_at: pointer arrays, the copies, the stream synchronized."""
        store, first, count = request["kind"] == "store", request["gpu_first"], request["count"]
        self._until(request["start_at"])
        dsts, srcs, sizes = self._pointers(first, count, store)
        if self.vllm_stream is None:
            self.vllm_copy.copy(dsts, srcs, sizes, None)
        else:
            self.vllm_stream.wait_stream(torch.cuda.current_stream())
            self.vllm_copy.copy(dsts, srcs, sizes, self.vllm_stream.cuda_stream)
            self.vllm_stream.synchronize()
        return {"ok": True, "end": time.monotonic(), "bytes": int(sizes.sum())}

    def compare(self, request: dict) -> dict:
        """GPU block `gpu` against block `host` of the pinned tensors (vLLM) or of `chunk` (hugepin)."""
        gpu = request["gpu"]
        worker = self.copier.wait_attached(30)
        for s, segment in enumerate(self.segments):
            want = segment[gpu].cpu()
            if request["method"] == "vllm":
                got = self.pinned[s][request["host"]].clone()
            else:
                host = worker.host_tensor(s, torch.int8)
                got = host[request["host"]].clone()
                del host
            if not torch.equal(got, want):
                return {"ok": False, "error": f"rank {self.rank}: {request['method']} block {request['host']} of segment "
                                              f"{s} differs from GPU block {gpu}"}
        return {"ok": True}


def _rates(runs: list) -> dict:
    rates = sorted(run["gb_per_second"] for run in runs)
    return {"median": statistics.median(rates), "min": rates[0], "max": rates[-1]}


def measure(device: str, blocks: int, reps: int) -> dict:
    """Runs the engine and every timed job; returns the figures."""
    bpc = 16
    chunks = blocks // bpc
    engine = Engine(model=model(2 * blocks), tp=2, pp=1, blocks_per_chunk=bpc,
                    cpu_bytes=2 * chunks * bpc * 2 * model(1).rank_bytes_per_block(0),
                    engine_id=f"bench-{os.getpid()}",
                    # Timed copies for the "gpu" figures (off by default in the plug-in), as in every
                    # run of this benchmark so far.
                    extra=(("hugepin_arena", f"vllm-bench-{os.getpid()}"), ("hugepin_time_copies", True)))
    connector = Connector(engine, device=device, command=[os.path.abspath(__file__), "--rank"])
    manager = connector.manager
    runs = {name: [] for name in ("hugepin store", "vllm store", "hugepin load", "vllm load")}
    try:
        method = [rank.request({"op": "baseline_setup", "count": blocks}) for rank in connector.ranks][0]["method"]
        for rank in connector.ranks:
            rank.request({"op": "fill_random", "first": 0, "count": blocks})

        def together(requests: list) -> dict:
            start_at = time.monotonic() + 0.2
            for rank, request in zip(connector.ranks, requests):
                rank.send({**request, "start_at": start_at})
            replies = [rank.reply(120) for rank in connector.ranks]
            seconds = max(reply["end"] for reply in replies) - start_at
            total = sum(reply["bytes"] for reply in replies)
            gpu = max(reply.get("gpu_seconds") or 0 for reply in replies)
            return {"seconds": seconds, "bytes": total, "gb_per_second": total / seconds / 1e9,
                    "gpu_gb_per_second": total / gpu / 1e9 if gpu else None}

        stored = None
        for rep in range(reps):
            keys = [key(f"bench-{rep}-{c}") for c in range(chunks)]
            out = manager.prepare_store(keys, connector.context(f"r{rep}"))
            assert out is not None and len(out.keys_to_store) == chunks, "the manager refused the bench's store"
            packed = vllm_scenarios.packed((gpu_spec(range(blocks)), out.store_spec))
            runs["hugepin store"].append(together([{"op": "timed", "kind": "store", "job": connector.job_id(),
                                                   "specs": packed}] * 2))
            manager.complete_store(keys, connector.context(f"r{rep}"))
            runs["vllm store"].append(together([{"op": "baseline", "kind": "store", "gpu_first": 0,
                                                "count": blocks}] * 2))
            load = manager.prepare_load(keys, connector.context(f"r{rep}"))
            packed = vllm_scenarios.packed((load, gpu_spec(range(blocks, 2 * blocks))))
            runs["hugepin load"].append(together([{"op": "timed", "kind": "load", "job": connector.job_id(),
                                                  "specs": packed}] * 2))
            manager.complete_load(keys, connector.context(f"r{rep}"))
            runs["vllm load"].append(together([{"op": "baseline", "kind": "load", "gpu_first": blocks,
                                               "count": blocks}] * 2))
            stored = out.store_spec
        for rank in connector.ranks:  # the bytes moved were the GPU's
            rank.request({"op": "compare", "method": "vllm", "gpu": 3, "host": 3})
            rank.request({"op": "compare", "method": "hugepin", "gpu": 3, "host": int(stored.block_ids[0]) * bpc + 3})
        region = connector.ranks[0].request({"op": "describe"})
    finally:
        connector.close()
    per_rank = blocks * model(1).rank_bytes_per_block(0)
    name = torch.cuda.get_device_name(torch.device(device)) if device.startswith("cuda") else "no GPU (smoke run)"
    figures = {"device": name, "torch": torch.__version__,
               "vllm_method": method, "blocks": blocks, "bytes_per_rank": per_rank, "reps": reps,
               "hugepin_page_size": region["page_size"], "rows": {}}
    for name, measured in runs.items():
        row = {"gb_per_second": _rates(measured)}
        gpu = [run["gpu_gb_per_second"] for run in measured if run["gpu_gb_per_second"]]
        if gpu:
            row["gpu_gb_per_second"] = statistics.median(gpu)
        figures["rows"][name] = row
    return figures


def print_table(figures: dict) -> None:
    print(f"{figures['device']}, torch {figures['torch']}; TP 2 on one GPU, 32 layers x 8 KV heads x 128, block 16, "
          f"bf16 (1 MiB per block per rank); {figures['blocks']} blocks per rank per job "
          f"({figures['bytes_per_rank'] >> 20} MiB), {figures['reps']} jobs each, interleaved; hugepin page size "
          f"{figures['hugepin_page_size']}; vLLM's way: {figures['vllm_method']}")
    print(f"{'METHOD':<15}{'GB/s median':>12}{'min':>8}{'max':>8}{'gpu':>8}")
    for name, row in figures["rows"].items():
        rates, gpu = row["gb_per_second"], row.get("gpu_gb_per_second")
        print(f"{name:<15}{rates['median']:>12.2f}{rates['min']:>8.2f}{rates['max']:>8.2f}"
              f"{(f'{gpu:.2f}' if gpu else '-'):>8}")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--device", type=int, default=0)
    parser.add_argument("--blocks", type=int, default=256, help="GPU blocks per rank per job (a multiple of 16)")
    parser.add_argument("--reps", type=int, default=7)
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--rank", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.rank:
        return vllm_scenarios.rank_main(BenchRank)
    if not torch.cuda.is_available():
        print(f"vllm_offload: no CUDA device for torch {torch.__version__}", file=sys.stderr)
        return 77
    if args.blocks <= 0 or args.blocks % 16:
        parser.error(f"--blocks {args.blocks}: give a positive multiple of 16")
    figures = measure(f"cuda:{args.device}", args.blocks, args.reps)
    print(json.dumps(figures, indent=1) if args.json else "", end="")
    if not args.json:
        print_table(figures)
    return 0


if __name__ == "__main__":
    sys.exit(main())
