"""A worker process that dies mid-job, as the C++ session test does it, across processes: rank 1
holds the job in its channel, stopped (SIGSTOP), when it is killed (SIGKILL). Its job fails naming
the rank, its chunk is released only once the process is gone, and comes back through the fence.
With a heartbeat timeout, a rank that falls silent while its process lives fails its job at once,
and the job's chunk stays quarantined (held, not pinnable, not reusable) until the process is gone."""

import os
import signal
import time

from scenarios import TP2_KV_SHAPE, refused, reusable_within, tp2_plan_input

import hugepin
from hugepin.demo import WorkerProcess


def start(scheduler, arena):
    workers = [WorkerProcess(arena, rank, 0, "host", TP2_KV_SHAPE) for rank in range(2)]
    for worker in workers:
        worker.started()
    scheduler.poll(0.05)
    return workers


def poll_for(scheduler, seconds: float, keep_alive=None):
    """Polls for `seconds` (each poll returns early when a job may settle), rank 0 heartbeating
    every 0.1 s when `keep_alive` is given; yields each poll's Progress."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if keep_alive:
            keep_alive.request({"op": "heartbeat"})
        yield scheduler.poll(0.1)
        time.sleep(0.1 if keep_alive else 0)


def failed_within(scheduler, timeout: float = 20.0, keep_alive=None) -> list:
    for progress in poll_for(scheduler, timeout, keep_alive):
        if progress.failed:
            return progress.failed
    raise AssertionError(f"no job failed in {timeout} s")


def store_on_rank0_and_stall_rank1(scheduler, workers, chunk: int) -> int:
    """Dispatches a store of `chunk`; rank 0 stores it; rank 1 is stopped, then handed the job."""
    job = scheduler.dispatch(hugepin.STORE, [chunk])
    request = {"op": "store", "job": job, "chunks": [chunk], "version": 1, "device_block": 0}
    workers[0].request(request)
    workers[1].request({"op": "heartbeat"})
    os.kill(workers[1].pid, signal.SIGSTOP)
    workers[1].send(request)
    progress = scheduler.poll(0.05)
    assert job not in progress.completed and progress.failed == []
    assert scheduler.figures().pinned_chunks == 1
    return job


def test_a_worker_killed_mid_job_fails_its_job_and_its_chunk_comes_back(arena):
    with hugepin.Scheduler.create(arena, hugepin.Plan.from_dict(tp2_plan_input())) as scheduler:
        workers = start(scheduler, arena)
        try:
            job = store_on_rank0_and_stall_rank1(scheduler, workers, 2)
            workers[1].kill()  # SIGKILL, and reaped: the process is gone

            failed = failed_within(scheduler)
            assert [(f.job, f.kind, f.rank, f.cause) for f in failed] == \
                [(job, hugepin.STORE, 1, hugepin.FailureCause.RANK_UNRESPONSIVE)]
            assert "rank 1" in failed[0].message
            figures = scheduler.figures()
            assert (figures.live_ranks, figures.pinned_chunks, figures.quarantined_chunks) == (1, 0, 0)
            with refused(hugepin.BusyError):
                scheduler.dispatch(hugepin.STORE, [3])  # a rank is not live: no job can reach quorum

            scheduler.retire(2)  # the failed store's chunk comes back through the fence
            epoch = scheduler.begin_epoch()
            workers[0].request({"op": "release", "epoch": epoch - 1})
            assert reusable_within(scheduler, 1) == [2]
        finally:
            assert workers[0].stop() == 0
            workers[1].kill()


def test_a_silent_worker_keeps_its_chunk_quarantined_until_its_process_is_gone(arena):
    plan = hugepin.Plan.from_dict(tp2_plan_input())
    with hugepin.Scheduler.create(arena, plan, heartbeat_timeout=2.0) as scheduler:
        workers = start(scheduler, arena)
        try:
            job = store_on_rank0_and_stall_rank1(scheduler, workers, 4)
            failed = failed_within(scheduler, keep_alive=workers[0])  # rank 1 silent past the timeout
            assert [(f.job, f.rank, f.cause) for f in failed] == [(job, 1, hugepin.FailureCause.RANK_UNRESPONSIVE)]
            assert scheduler.figures().quarantined_chunks == 1

            # Alive (stopped) and silent: it may still copy into chunk 4, so the chunk stays held.
            scheduler.retire(4)
            epoch = scheduler.begin_epoch()
            workers[0].request({"op": "release", "epoch": epoch - 1})
            for _ in poll_for(scheduler, 1.0, keep_alive=workers[0]):
                assert scheduler.reusable() == []
            assert scheduler.figures().quarantined_chunks == 1
            with refused(hugepin.BusyError):
                scheduler.dispatch(hugepin.STORE, [5])

            workers[1].kill()  # gone now: the quarantine ends, the fence lets the chunk go
            chunks = []
            for _ in poll_for(scheduler, 10.0, keep_alive=workers[0]):
                chunks += scheduler.reusable()
                if chunks:
                    break
            assert chunks == [4]
            assert scheduler.figures().quarantined_chunks == 0
        finally:
            assert workers[0].stop() == 0
            workers[1].kill()
