"""The scenarios the tests share, without pytest (python/gpu-host-check.sh runs them through
gpu_check.py on a GPU host that may lack pytest): the TP=2 plan, the check that a call is refused
by name, the TP=2 offload across worker processes, bad input with CUDA tensors."""

import contextlib
import time

import numpy
import torch

import hugepin
from hugepin.demo import WorkerProcess, wait_for

# TP 2 x PP 1, 4 blocks per chunk; each rank one (2, 64, 256) bf16 KV tensor: two segments of 512
# bytes per block (as examples/c/offload.c). 262144 bytes of host KV: 32 chunks.
TP2_BLOCKS = 64
TP2_KV_SHAPE = (2, TP2_BLOCKS, 256)


def tp2_plan_input(page_size: str = "4K") -> dict:
    rank = lambda tp_rank: {  # noqa: E731
        "tp_rank": tp_rank, "pp_rank": 0, "num_blocks": TP2_BLOCKS,
        "tensors": [{"name": "layers.0", "shape": list(TP2_KV_SHAPE), "strides": [TP2_BLOCKS * 256, 256, 1],
                     "element_size": 2, "storage": "kv"}]}
    return {"tp": 2, "pp": 1, "blocks_per_chunk": 4, "cpu_bytes": 262144, "page_size": page_size,
            "ranks": [rank(0), rank(1)]}


@contextlib.contextmanager
def refused(kind, *fragments):
    """The block raises `kind` (a hugepin.Error subclass) whose message holds every fragment."""
    try:
        yield
    except kind as error:
        assert isinstance(error, hugepin.Error), repr(error)
        for fragment in fragments:
            assert fragment in str(error), f"{fragment!r} not in {str(error)!r}"
    else:
        raise AssertionError(f"no {kind.__name__} (expected one naming {fragments})")


def reusable_within(scheduler, want: int, timeout: float = 10.0) -> list:
    """The chunks that become reusable until `want` did or `timeout` seconds passed."""
    chunks = []
    deadline = time.monotonic() + timeout
    while len(chunks) < want and time.monotonic() < deadline:
        scheduler.poll(0.01)
        chunks += scheduler.reusable()
    return sorted(chunks)


def run_tp2(arena: str, backend: str) -> None:
    """TP=2 across processes, as examples/c/offload.c does it in C: this process schedules, two
    worker processes (hugepin.demo's worker) copy with `backend` ("host" or "gpu")."""
    with hugepin.Scheduler.create(arena, hugepin.Plan.from_dict(tp2_plan_input())) as scheduler:
        workers = [WorkerProcess(arena, rank, 0, backend, TP2_KV_SHAPE) for rank in range(2)]
        try:
            for worker in workers:
                info = worker.started().info
                assert info["segments"] == 2 and info["bytes_per_block"] == [512, 512]
                assert info["pinned"] == info["host_is_pinned"] == (backend == "gpu")
            scheduler.poll(0.05)

            # Stores: chunks 0 .. 7, two per job; the first job reaches rank 0 alone first.
            for c in range(0, 8, 2):
                job = scheduler.dispatch(hugepin.STORE, [c, c + 1])
                store = {"op": "store", "job": job, "chunks": [c, c + 1], "version": 1, "device_block": 0}
                workers[0].request(store)
                if c == 0:
                    progress = scheduler.poll(0.05)
                    assert progress.reports >= 1 and job not in progress.completed
                    assert scheduler.figures().pinned_chunks == 2  # held until the quorum
                workers[1].request(store)
                wait_for(scheduler, job)
            assert scheduler.figures().pinned_chunks == 0

            # Loads: every stored chunk into device blocks 16 .., checked on each rank.
            for c in range(0, 8, 2):
                job = scheduler.dispatch(hugepin.LOAD, [c, c + 1])
                for worker in workers:
                    worker.request({"op": "load", "job": job, "chunks": [c, c + 1], "version": 1,
                                    "device_block": 16})
                wait_for(scheduler, job)

            # Retire and fence: retired in this epoch, reusable only once both ranks released it.
            for c in range(8):
                scheduler.retire(c)
            epoch = scheduler.begin_epoch()
            scheduler.poll(0.05)
            assert scheduler.reusable() == []
            workers[0].request({"op": "release", "epoch": epoch - 1})
            scheduler.poll(0.05)
            assert scheduler.reusable() == []
            workers[1].request({"op": "release", "epoch": epoch - 1})
            assert reusable_within(scheduler, 8) == list(range(8))

            # A chunk that came back is the engine's again: stored over, the others untouched.
            job = scheduler.dispatch(hugepin.STORE, [0, 1])
            for worker in workers:
                worker.request({"op": "store", "job": job, "chunks": [0, 1], "version": 2, "device_block": 32})
            wait_for(scheduler, job)
            versions = {str(c): 2 if c < 2 else 1 for c in range(8)}
            for worker in workers:
                assert worker.request({"op": "verify", "versions": versions})["chunks"] == 8

            figures = scheduler.figures()
            assert (figures.jobs_completed, figures.jobs_failed, figures.reports_rejected) == (9, 0, 0)
        finally:
            codes = [worker.stop() for worker in workers]
        assert codes == [0, 0]


def check_cuda_tensors(arena: str) -> None:
    """Bad input with CUDA tensors, and a store from a CUDA tensor on a torch stream; torch sees
    the pinned region as pinned memory."""
    with hugepin.Scheduler.create(arena, hugepin.Plan.from_dict(tp2_plan_input())) as scheduler, \
            hugepin.Worker(arena, 0) as worker:
        worker.pin(torch.device("cuda", 0))
        assert worker.region.pinned and worker.region.device == 0
        host = worker.host_tensor(0)
        assert host.is_pinned()
        del host
        kv = torch.zeros(TP2_KV_SHAPE, dtype=torch.bfloat16, device="cuda:0")
        with refused(hugepin.InvalidArgumentError, "cpu", "GPU backend"):
            worker.set_device_kv(list(kv.cpu().unbind(0)), "gpu")
        with refused(hugepin.InvalidArgumentError, "cuda:0", "host backend"):
            worker.set_device_kv(list(kv.unbind(0)), "host")
        worker.set_device_kv(list(kv.unbind(0)), "auto")
        job = scheduler.dispatch(hugepin.STORE, [1])
        pairs = numpy.array([[b, 4 + b] for b in range(4)], dtype=numpy.int64)
        with refused(hugepin.InvalidArgumentError, "cuda:0"):
            worker.store(job, torch.from_numpy(pairs).cuda())
        # On a stream of its own: the copies start after what was queued there (a fill of blocks 0-3).
        stream = torch.cuda.Stream()
        with torch.cuda.stream(stream):
            kv[:, 0:4].fill_(3.0)
        worker.store(job, torch.from_numpy(pairs), stream)
        assert worker.wait(job, 10.0)
        assert [r.error for r in worker.finished()] == [0]
        # On torch's default stream (handle 0): after a long kernel queued there, still in order.
        scheduler.poll(1.0)
        job = scheduler.dispatch(hugepin.STORE, [2])
        big = torch.ones((8192, 8192), device="cuda:0")
        for _ in range(8):
            big = big @ big / 8192  # stays 1.0; keeps the default stream busy before the fill lands
        kv[:, 4:8].copy_(big[:2, :4 * 256].reshape(2, 4, 256).to(torch.bfloat16) * 5)
        worker.store(job, torch.from_numpy(pairs + [4, 4]), torch.cuda.current_stream())
        assert worker.wait(job, 10.0)
        host = worker.host_tensor(0, torch.bfloat16, (128, 256))
        assert torch.equal(host[4:8], torch.full((4, 256), 3.0, dtype=torch.bfloat16))
        assert torch.equal(host[8:12], torch.full((4, 256), 5.0, dtype=torch.bfloat16))
        del host
