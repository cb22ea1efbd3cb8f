"""The TP x PP demo on the Python package: python3 -m hugepin.demo [--tp 2 --pp 2 ...]

The parent is the engine's scheduler: it plans an arena from meta tensors (FlashAttention-style
K/V tensors of 8 heads on even pipeline stages and 4 on odd ones, so the stages hold unequal
payloads), creates it, and starts one worker process per rank (python3 -m hugepin.demo --worker).
Each worker attaches its rank, pins its region when it copies through the GPU, builds the copy
engine over its own KV tensor, and answers the parent's JSON lines (the engine's own channel).
The parent dispatches store jobs over free chunks and load jobs over stored ones to every rank,
settles them by quorum, retires chunks through the fence, and at the end has every stored chunk
checked in every rank's region. Every block is stamped with a pattern of (rank, chunk, version,
segment): a store's host blocks and a load's device blocks are checked byte by byte, through torch
tensors over the region. Exit status 0 when everything held, 1 otherwise.

WorkerProcess and the worker's requests are what the tests drive too (python/tests).
"""

from __future__ import annotations

import argparse
import json
import os
import select
import subprocess
import sys
import time

import hugepin

# ------------------------------------------------------------------------------------ stamps


def stamp(rank: int, chunk: int, version: int, segment: int, blocks: int, block_bytes: int):
    """The bytes that block b of `chunk`'s `segment` holds on `rank` after the store of `version`:
    a (blocks, block_bytes) uint8 tensor, different for every (rank, chunk, version, segment)."""
    import torch

    seed = ((((rank * 1_000_003) + chunk) * 1_000_003 + version) * 1_000_003 + segment) % (1 << 62)
    generator = torch.Generator().manual_seed(seed)
    return torch.randint(0, 256, (blocks, block_bytes), generator=generator, dtype=torch.uint8)


# ------------------------------------------------------------------------------------ worker side


class _RankWorker:
    """The worker process's state: its hugepin.Worker and its device KV tensor."""

    def __init__(self, request: dict):
        import torch

        self.torch = torch
        backend = request["backend"]
        self.worker = hugepin.Worker(request["arena"], request["tp_rank"], request["pp_rank"])
        self.rank = self.worker.rank
        self.device = torch.device("cpu")
        if backend == "gpu":
            self.device = torch.device("cuda", request.get("device", 0))
            torch.cuda.set_device(self.device)
            self.worker.pin(self.device)
        self.kv = torch.zeros(request["kv_shape"], dtype=getattr(torch, request["dtype"]), device=self.device)
        self.worker.set_device_kv(list(self.kv.unbind(0)), backend)
        self.stream = torch.cuda.current_stream() if backend == "gpu" else None
        self.bpc = self.worker.blocks_per_chunk
        self.host = [self.worker.host_tensor(s) for s in range(len(self.worker.segments))]

    def describe(self) -> dict:
        region = self.worker.region
        return {"rank": self.rank, "segments": len(self.host), "page_size": region.page_size,
                "pinned": region.pinned, "host_is_pinned": self.host[0].is_pinned(),
                "bytes_per_block": [info.bytes_per_block for info in self.worker.segments]}

    def _device_rows(self, segment: int, first: int, count: int):
        return self.kv[segment].view(self.torch.uint8)[first:first + count].reshape(count, -1)

    def _pairs(self, request: dict, store: bool):
        rows = []
        for i, chunk in enumerate(request["chunks"]):
            for b in range(self.bpc):
                device, host = request["device_block"] + i * self.bpc + b, chunk * self.bpc + b
                rows.append((device, host) if store else (host, device))
        return rows

    def _mismatch(self, where: str, chunk: int, segment: int, got, want) -> str | None:
        if self.torch.equal(got.cpu(), want):
            return None
        block = int((got.cpu() != want).any(dim=1).nonzero()[0])
        return f"rank {self.rank}: {where}: chunk {chunk} segment {segment} block {block} differs"

    def store(self, request: dict) -> dict:
        for i, chunk in enumerate(request["chunks"]):
            for s in range(len(self.host)):
                rows = self._device_rows(s, request["device_block"] + i * self.bpc, self.bpc)
                rows.copy_(stamp(self.rank, chunk, request["version"], s, self.bpc, rows.shape[1]))
        pairs = self.torch.tensor(self._pairs(request, True), dtype=self.torch.int64)  # torch pairs
        self.worker.store(request["job"], pairs, self.stream)
        return self._landed(request, "store")

    def load(self, request: dict) -> dict:
        import numpy

        for i in range(len(request["chunks"])):
            for s in range(len(self.host)):
                self._device_rows(s, request["device_block"] + i * self.bpc, self.bpc).zero_()
        if self.stream is not None:
            self.stream.synchronize()  # the zeros land before the load's copies on the worker's stream
        pairs = numpy.array(self._pairs(request, False), dtype=numpy.int64)  # numpy pairs
        self.worker.load(request["job"], pairs)
        return self._landed(request, "load")

    def _landed(self, request: dict, kind: str) -> dict:
        if not self.worker.wait(request["job"], 30.0):
            return {"ok": False, "error": f"rank {self.rank}: job {request['job']} did not land in 30 s"}
        results = [r for r in self.worker.finished() if r.job == request["job"]]
        if not results or results[0].error != 0:
            return {"ok": False, "error": f"rank {self.rank}: job {request['job']} landed with {results}"}
        for i, chunk in enumerate(request["chunks"]):
            for s in range(len(self.host)):
                want = stamp(self.rank, chunk, request["version"], s, self.bpc, self.host[s].shape[1])
                if kind == "store":
                    got = self.host[s][chunk * self.bpc:(chunk + 1) * self.bpc]
                else:
                    got = self._device_rows(s, request["device_block"] + i * self.bpc, self.bpc)
                problem = self._mismatch(kind, chunk, s, got, want)
                if problem:
                    return {"ok": False, "error": problem}
        return {"ok": True, "bytes": results[0].bytes}

    def verify(self, request: dict) -> dict:
        for chunk, version in request["versions"].items():
            chunk = int(chunk)
            for s in range(len(self.host)):
                want = stamp(self.rank, chunk, version, s, self.bpc, self.host[s].shape[1])
                problem = self._mismatch("region", chunk, s, self.host[s][chunk * self.bpc:(chunk + 1) * self.bpc], want)
                if problem:
                    return {"ok": False, "error": problem}
        return {"ok": True, "chunks": len(request["versions"])}

    def handle(self, request: dict) -> dict:
        op = request["op"]
        if op == "store":
            return self.store(request)
        if op == "load":
            return self.load(request)
        if op == "verify":
            return self.verify(request)
        if op == "release":
            self.worker.release(request["epoch"], self.stream)
            return {"ok": True}
        if op == "heartbeat":
            self.worker.heartbeat()
            return {"ok": True}
        return {"ok": False, "error": f"unknown request {op!r}"}

    def stop(self) -> None:
        self.host = []
        self.worker.detach()


def worker_main() -> int:
    """A worker process: the first request (init) attaches; then one JSON reply per request line."""
    rank_worker = None
    for line in sys.stdin:
        request = json.loads(line)
        try:
            if request["op"] == "init":
                rank_worker = _RankWorker(request)
                reply = {"ok": True, **rank_worker.describe()}
            elif rank_worker is None:
                reply = {"ok": False, "error": f"{request['op']} before a successful init"}
            elif request["op"] == "stop":
                rank_worker.stop()
                reply = {"ok": True}
            else:
                reply = rank_worker.handle(request)
        except Exception as error:  # noqa: BLE001 (the parent gets every failure as a reply, and goes on)
            reply = {"ok": False, "error": f"{type(error).__name__}: {error}"}
        print(json.dumps(reply), flush=True)
        if request["op"] == "stop":
            return 0
    return 1  # the parent went away


# ------------------------------------------------------------------------------------ scheduler side


class WorkerProcess:
    """A rank's worker process as the scheduler sees it: one JSON request, one JSON reply."""

    def __init__(self, arena: str, tp_rank: int, pp_rank: int, backend: str, kv_shape, dtype: str = "bfloat16",
                 device: int = 0):
        self.process = subprocess.Popen([sys.executable, "-m", "hugepin.demo", "--worker"], stdin=subprocess.PIPE,
                                        stdout=subprocess.PIPE, text=True)
        self.pid = self.process.pid
        self.label = f"worker tp {tp_rank} pp {pp_rank} (pid {self.pid})"
        self.info = None  # the init reply: started() waits for it
        self.send({"op": "init", "arena": arena, "tp_rank": tp_rank, "pp_rank": pp_rank, "backend": backend,
                   "kv_shape": list(kv_shape), "dtype": dtype, "device": device})

    def started(self) -> WorkerProcess:
        """Waits for the worker to attach (importing torch takes seconds: start every worker first)."""
        if self.info is None:
            self.info = self.reply(timeout=120)
        return self

    def send(self, request: dict) -> None:
        self.process.stdin.write(json.dumps(request) + "\n")
        self.process.stdin.flush()

    def reply(self, timeout: float = 60) -> dict:
        ready, _, _ = select.select([self.process.stdout], [], [], timeout)
        line = self.process.stdout.readline() if ready else ""
        if not line:
            raise RuntimeError(f"{self.label}: no reply in {timeout} s (exit status {self.process.poll()})")
        reply = json.loads(line)
        if not reply.get("ok"):
            raise RuntimeError(f"{self.label}: {reply.get('error')}")
        return reply

    def request(self, request: dict, timeout: float = 60) -> dict:
        self.send(request)
        return self.reply(timeout)

    def stop(self) -> int:
        if self.process.poll() is None:
            try:
                self.request({"op": "stop"})
            finally:
                self.process.stdin.close()
        return self.process.wait(30)

    def kill(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait(30)


def wait_for(scheduler: hugepin.Scheduler, job: int, timeout: float = 30.0) -> None:
    """Polls until `job` completes; raises RuntimeError when it fails or `timeout` passes."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        progress = scheduler.poll(0.01)
        for failed in progress.failed:
            raise RuntimeError(f"job {failed.job} failed: {failed.message}")
        if job in progress.completed:
            return
    raise RuntimeError(f"job {job} did not reach quorum in {timeout} s")


def kv_shape(pp_rank: int, num_blocks: int) -> tuple:
    """A rank's KV tensor: (2, num_blocks, 16 tokens, heads, 128), 8 heads on even stages, 4 on odd."""
    return (2, num_blocks, 16, 8 if pp_rank % 2 == 0 else 4, 128)


def _parse_size(text: str) -> int:
    units = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    text = text.strip().upper().rstrip("IB").rstrip("B")
    if text and text[-1] in units:
        return int(float(text[:-1]) * units[text[-1]])
    return int(text)


def run(args) -> int:
    import torch

    ranks = {(t, p): (args.num_blocks, {"layers.0": torch.empty(kv_shape(p, args.num_blocks), dtype=torch.bfloat16,
                                                                   device="meta")})
             for p in range(args.pp) for t in range(args.tp)}
    plan = hugepin.Plan.from_tensors(tp=args.tp, pp=args.pp, blocks_per_chunk=args.blocks_per_chunk,
                                     cpu_bytes=args.cpu_bytes, ranks=ranks, page_size=args.page_size)
    info = plan.info
    arena = args.arena or f"pydemo-{os.getpid()}"
    backend = args.backend
    if backend == "auto":
        backend = "gpu" if torch.cuda.is_available() else "host"
    print(f"hugepin {hugepin.__version__} ({hugepin.library_path()}), torch {torch.__version__}, backend {backend}")
    print(f"plan: tp {info.tp} x pp {info.pp}, {info.chunk_count} chunks of {info.blocks_per_chunk} blocks, "
          f"{info.payload_bytes_per_block} bytes per block over all ranks, page size {info.page_size}")
    per_job = 2
    if info.chunk_count < 2 * per_job or args.num_blocks < 2 * per_job * info.blocks_per_chunk:
        print("demo: the plan needs at least 4 chunks and 2 jobs' blocks on the device: raise --cpu-bytes or "
              "--num-blocks", file=sys.stderr)
        return 1
    failures = []
    with hugepin.Scheduler.create(arena, plan, keep_arena=args.keep) as scheduler:
        workers = []
        try:
            devices = torch.cuda.device_count() if backend == "gpu" else 1
            for p in range(args.pp):
                for t in range(args.tp):
                    workers.append(WorkerProcess(arena, t, p, backend, kv_shape(p, args.num_blocks),
                                                 device=(p * args.tp + t) % max(1, devices)))
            for worker in workers:
                worker.started()
            start = time.monotonic()
            moved, quorum_ms = _offload(scheduler, workers, info, args.jobs, per_job, failures)
            seconds = time.monotonic() - start
            figures = scheduler.figures()
        finally:
            codes = []
            for worker in workers:
                try:
                    codes.append(worker.stop())
                except RuntimeError as error:
                    failures.append(str(error))
                    worker.kill()
    quorum_ms.sort()
    print(f"moved {moved} bytes in {seconds:.2f} s ({moved / seconds / 1e9:.2f} GB/s); quorum p50 "
          f"{quorum_ms[len(quorum_ms) // 2]:.2f} ms; {figures.jobs_completed} jobs completed, {figures.jobs_failed} "
          f"failed, {figures.reports_applied} reports applied, {figures.reports_rejected} rejected")
    if failures or figures.jobs_failed or figures.reports_rejected or any(codes):
        for failure in failures:
            print(f"demo: {failure}", file=sys.stderr)
        print("demo: FAILED", file=sys.stderr)
        return 1
    print("demo: OK")
    return 0


def _offload(scheduler, workers, info, jobs: int, per_job: int, failures: list):
    """The main loop: stores over free chunks, a load of the last stored chunks every third step,
    eviction of the oldest chunks through the fence when none is free, an epoch per step."""
    free = list(range(info.chunk_count))
    stored = {}      # chunk -> the job (version) whose data it holds, oldest first
    retired = set()
    moved, quorum_ms = 0, []
    counts = {"store": 0, "load": 0, "evicted": 0}

    def run_job(kind, chunks, version=None):
        nonlocal moved
        job = scheduler.dispatch(kind, chunks)
        op = "store" if kind == hugepin.STORE else "load"
        started = time.monotonic()
        for worker in workers:  # every rank at once, then every reply
            worker.send({"op": op, "job": job, "chunks": chunks, "version": version or job, "device_block": 0})
        for worker in workers:
            moved += worker.reply()["bytes"]
        wait_for(scheduler, job)
        quorum_ms.append((time.monotonic() - started) * 1e3)
        counts[op] += 1
        return job

    def take_back(want: int, timeout: float) -> None:
        # On the GPU a rank's release comes from its stream, after its reply: wait for the fence.
        deadline = time.monotonic() + timeout
        while True:
            for chunk in scheduler.reusable():
                retired.discard(chunk)
                free.append(chunk)
            if len(free) >= want or not retired or time.monotonic() >= deadline:
                return
            scheduler.poll(0.01)

    last = []
    for step in range(jobs):
        if len(free) < per_job:
            for chunk in list(stored)[:2 * per_job]:
                scheduler.retire(chunk)
                retired.add(chunk)
                del stored[chunk]
                counts["evicted"] += 1
        if len(free) >= per_job:
            last = [free.pop(0) for _ in range(per_job)]
            job = run_job(hugepin.STORE, last)
            stored.update((chunk, job) for chunk in last)
        if step % 3 == 2 and last and all(chunk in stored for chunk in last):
            run_job(hugepin.LOAD, last, stored[last[0]])
        epoch = scheduler.begin_epoch()
        for worker in workers:
            worker.request({"op": "release", "epoch": epoch - 1})
        scheduler.poll(0)
        take_back(per_job, 10.0)  # at once when enough are free (or nothing waits on the fence)
    take_back(info.chunk_count, 10.0)  # every retired chunk back through the fence
    versions = {str(chunk): version for chunk, version in stored.items()}
    for worker in workers:
        reply = worker.request({"op": "verify", "versions": versions}, timeout=120)
        print(f"{worker.label}: {reply['chunks']} stored chunks verified in its region")
    if retired:
        failures.append(f"chunks {sorted(retired)} retired and never reusable")
    print(f"{counts['store']} stores, {counts['load']} loads; {counts['evicted']} chunks evicted through the fence")
    return moved, quorum_ms


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python3 -m hugepin.demo", description=__doc__.split("\n\n")[0])
    parser.add_argument("--tp", type=int, default=2)
    parser.add_argument("--pp", type=int, default=2)
    parser.add_argument("--backend", choices=["auto", "host", "gpu"], default="auto")
    parser.add_argument("--jobs", type=int, default=24, help="store jobs (a load every third step)")
    parser.add_argument("--num-blocks", type=int, default=64, help="device KV blocks per rank")
    parser.add_argument("--blocks-per-chunk", type=int, default=4)
    parser.add_argument("--cpu-bytes", type=_parse_size, default=_parse_size("8M"), help="host KV of all ranks")
    parser.add_argument("--page-size", choices=["4K", "2M", "1G"], default=None, help="default: the best available")
    parser.add_argument("--arena", default=None)
    parser.add_argument("--keep", action="store_true", help="keep the arena at the end")
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        return worker_main()
    try:
        return run(args)
    except (hugepin.Error, RuntimeError) as error:
        print(f"demo: {error}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
