"""TP=2 across processes, as examples/c/offload.c does it in C: a Python scheduler (this process)
and two Python worker processes (hugepin.demo's worker, driven over its JSON-lines channel), host
memcpy. Stores (each rank stamps its device blocks, stores them and checks its region through torch
tensors over it), the quorum (a job one rank reported does not complete), loads (checked on the
device side), retire and the fence (retired chunks come back only once both ranks released the
epoch), reuse of a chunk that came back. test_offload_tp2_gpu.py runs the same with CUDA tensors."""

import time

from conftest import TP2_KV_SHAPE, tp2_plan_input

import hugepin
from hugepin.demo import WorkerProcess, wait_for


def reusable_within(scheduler, want: int, timeout: float = 10.0) -> list:
    """The chunks that become reusable until `want` did or `timeout` seconds passed."""
    chunks = []
    deadline = time.monotonic() + timeout
    while len(chunks) < want and time.monotonic() < deadline:
        scheduler.poll(0.01)
        chunks += scheduler.reusable()
    return sorted(chunks)


def run_tp2(arena: str, backend: str) -> None:
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


def test_tp2_offload_host_memcpy(arena):
    run_tp2(arena, "host")
