"""The package in one process: versions, plans (dict, JSON, torch tensors), regions as buffers and
tensors, a store and a load through the host backend, and the GIL released while the library waits.
The offload across worker processes is test_offload_tp2.py."""

import errno
import json
import os
import select
import subprocess
import sys
import threading
import time

import numpy
import pytest
import torch
from scenarios import TP2_KV_SHAPE, tp2_plan_input

import hugepin


def test_version_comes_from_the_library_it_loaded():
    assert hugepin.__version__ == "0.3.0"
    assert os.path.exists(hugepin.library_path())
    assert os.path.basename(hugepin.library_path()).startswith("libhugepin.so.0")


def test_import_needs_neither_torch_nor_numpy():
    code = "import sys, hugepin; print(sorted(m for m in ('torch', 'numpy') if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True).stdout
    assert out.strip() == "[]"


def test_plans_from_a_dict_from_json_and_from_torch_tensors_agree():
    from_dict = hugepin.Plan.from_dict(tp2_plan_input())
    info = from_dict.info
    assert (info.tp, info.pp, info.chunk_count, info.blocks_per_chunk) == (2, 1, 32, 4)
    assert info.payload_bytes_per_block == 2 * 2 * 512
    assert hugepin.Plan.from_json(json.dumps(tp2_plan_input())).info == info
    assert hugepin.Plan.from_json(json.dumps(tp2_plan_input()).encode()).info == info
    assert from_dict.to_dict()["chunk_count"] == 32

    # The same layout as tensors: meta tensors (shapes only) and a second tensor on the same storage,
    # counted once; as real CPU tensors too.
    for device in ("meta", "cpu"):
        kv = [torch.empty(TP2_KV_SHAPE, dtype=torch.bfloat16, device=device) for _ in range(2)]
        ranks = {(r, 0): (TP2_KV_SHAPE[1], {"layers.0": kv[r], "layers.0.alias": kv[r].view(TP2_KV_SHAPE)})
                 for r in range(2)}
        planned = hugepin.Plan.from_tensors(tp=2, pp=1, blocks_per_chunk=4, cpu_bytes=262144, ranks=ranks,
                                            page_size="4K")
        assert planned.info == info, device


def test_describe_kv_names_shared_storages_after_their_first_tensor():
    from hugepin import tensors

    whole = torch.empty((2, 16, 8, 64), dtype=torch.float16, device="meta")
    other = torch.empty((16, 128), dtype=torch.float16, device="meta")
    rank = tensors.describe_kv({"a": whole, "a.view": whole.view(2, 16, 512), "b": other}, 16, tp_rank=1,
                               groups={"b": 1})
    assert rank["tp_rank"] == 1 and rank["num_blocks"] == 16
    assert [t["storage"] for t in rank["tensors"]] == ["a", "a", "b"]
    assert rank["tensors"][0]["strides"] == [8192, 512, 64, 1]
    assert rank["tensors"][0]["storage_bytes"] == 2 * 16 * 8 * 64 * 2
    assert rank["tensors"][2]["group"] == 1 and "group" not in rank["tensors"][0]


def check_views(worker):
    region = worker.region
    assert (region.rank, region.segments, region.pinned, region.device) == (1, 2, False, -1)
    assert region.length % region.page_size == 0
    segment = worker.segments[1]
    assert segment.bytes_per_block == 512 and segment.host_blocks == 32 * 4

    whole = numpy.frombuffer(worker.buffer(), dtype=numpy.uint8)
    assert whole.size == region.length
    host = worker.host_tensor(1, torch.bfloat16, (segment.host_blocks, 16, 16))
    assert not host.is_pinned()  # a CPU build of torch, and the region is not pinned
    host[5].fill_(1.5)
    as_bytes = torch.frombuffer(worker.buffer(1), dtype=torch.uint8).view(segment.host_blocks, 512)
    assert torch.equal(as_bytes[5].view(torch.bfloat16), torch.full((256,), 1.5, dtype=torch.bfloat16))
    start = segment.host_offset + 5 * segment.host_block_stride
    assert bytes(whole[start:start + 512]) == bytes(as_bytes[5].numpy())
    flat = worker.host_tensor(None, torch.int32)
    assert flat.numel() * 4 == region.length


def test_region_buffers_numpy_and_tensors_see_the_same_memory(arena):
    with hugepin.Scheduler.create(arena, hugepin.Plan.from_dict(tp2_plan_input())) as scheduler, \
            hugepin.Worker(arena, 1) as worker:
        check_views(worker)  # its arrays and tensors are gone when it returns: detach may unmap
        assert scheduler.info.ranks == 2


def test_store_and_load_through_the_host_backend_with_numpy_and_torch_pairs(arena):
    with hugepin.Scheduler.create(arena, hugepin.Plan.from_dict(tp2_plan_input())) as scheduler, \
            hugepin.Worker(arena, 0, copy_threads=2) as w0, hugepin.Worker(arena, 1) as w1:
        kv = [torch.randint(-100, 100, TP2_KV_SHAPE).to(torch.bfloat16) for _ in range(2)]
        back = [torch.zeros(TP2_KV_SHAPE, dtype=torch.bfloat16) for _ in range(2)]
        for worker, tensor in zip((w0, w1), kv):
            worker.set_device_kv(list(tensor.unbind(0)), hugepin.Backend.HOST)
        fd = w0.completion_fd()

        job = scheduler.dispatch("store", [3])
        pairs = numpy.array([[10 + b, 3 * 4 + b] for b in range(4)], dtype=numpy.int64)
        w0.store(job, pairs)
        w1.store(job, torch.from_numpy(pairs))
        assert select.select([fd], [], [], 5)[0] == [fd]
        assert w0.wait(job, 5.0) and w1.wait(job, 5.0)
        result = w0.finished()
        assert [(r.job, r.kind, r.error, r.bytes) for r in result] == [(job, hugepin.STORE, 0, 2 * 4 * 512)]
        assert w0.finished() == []
        progress = scheduler.poll(1.0)
        assert progress.completed == [job] and progress.failed == []
        for worker, tensor in zip((w0, w1), kv):
            for s in range(2):
                assert torch.equal(worker.host_tensor(s, torch.bfloat16, (128, 256))[12:16], tensor[s, 10:14])

        job = scheduler.dispatch(hugepin.LOAD, [3])
        for worker, tensor in zip((w0, w1), back):
            worker.set_device_kv(list(tensor.unbind(0)), "host")
            worker.load(job, numpy.ascontiguousarray(pairs[:, ::-1]))
            assert worker.wait(job, 5.0)
        assert scheduler.poll(1.0).completed == [job]
        for tensor, original in zip(back, kv):
            assert torch.equal(tensor[:, 10:14], original[:, 10:14])
            assert not tensor[:, :10].any()

        scheduler.retire(3)
        epoch = scheduler.begin_epoch()
        for worker in (w0, w1):
            worker.release(epoch - 1)
        scheduler.poll(1.0)
        assert scheduler.reusable() == [3]
        figures = scheduler.figures()
        assert (figures.jobs_completed, figures.jobs_failed, figures.reports_rejected) == (2, 0, 0)


def test_time_copies_every_times_a_sample_and_refuses_what_is_not_a_count(arena):
    with hugepin.Scheduler.create(arena, hugepin.Plan.from_dict(tp2_plan_input())) as scheduler:
        with pytest.raises(hugepin.OutOfRangeError, match="time_copies_every"):
            hugepin.Worker(arena, 0, time_copies=True, time_copies_every=-1)
        pairs = numpy.array([[b, b] for b in range(4)], dtype=numpy.int64)
        kv = [torch.zeros(TP2_KV_SHAPE[1:], dtype=torch.bfloat16) for _ in range(2)]
        # One job in a million: the library picks no job id below 400000; 1: every job.
        for first_chunk, every, timed in ((0, 1000000, False), (4, 1, True)):
            with hugepin.Worker(arena, 0, time_copies=True, time_copies_every=every) as worker:
                worker.set_device_kv(kv, hugepin.Backend.HOST)
                for chunk in range(first_chunk, first_chunk + 4):
                    job = scheduler.dispatch("store", [chunk])
                    worker.store(job, pairs)
                    assert worker.wait(job, 5.0)
                results = worker.finished()
                assert len(results) == 4
                assert all((r.gpu_done_ns > 0) == timed for r in results), (every, results)


def test_a_job_posted_done_without_a_copy_settles_completed_or_failed(arena):
    with hugepin.Scheduler.create(arena, hugepin.Plan.from_dict(tp2_plan_input())) as scheduler, \
            hugepin.Worker(arena, 0) as w0, hugepin.Worker(arena, 1) as w1:
        scheduler.poll(0)
        completes = scheduler.dispatch(hugepin.STORE, [1, 2])
        fails = scheduler.dispatch(hugepin.STORE, [3])
        for bad, fragment in ((lambda: w0.post_done(0), "job = 0"), (lambda: w0.post_done(completes, -5), "error = -5"),
                              (lambda: w0.post_done(completes, 1.5), "error = 1.5")):
            try:
                bad()
            except hugepin.Error as error:
                assert fragment in str(error)
            else:
                raise AssertionError(f"no error naming {fragment!r}")
        assert scheduler.poll(0).reports == 0  # the refusals posted nothing
        for worker in (w0, w1):
            worker.post_done(completes)
        w0.post_done(fails)
        w1.post_done(fails, errno.EIO)
        progress = scheduler.poll(0)
        assert progress.completed == [completes]
        assert [(f.job, f.rank, f.cause, f.error) for f in progress.failed] == \
            [(fails, 1, hugepin.FailureCause.COPY_FAILED, errno.EIO)]
        assert scheduler.figures().pinned_chunks == 0
        assert w0.finished() == []  # nothing was launched here


def test_a_wait_that_runs_out_returns_false(arena):
    with hugepin.Scheduler.create(arena, hugepin.Plan.from_dict(tp2_plan_input())) as scheduler:
        progress = scheduler.poll(0.05)
        assert progress.completed == [] and progress.failed == []
        with hugepin.Worker(arena, 0) as worker:
            try:
                worker.wait(7, 0.01)
            except hugepin.NotFoundError as error:
                assert "7" in str(error)
            else:
                raise AssertionError("waiting for a job never launched did not fail")


def test_the_gil_is_released_while_the_library_waits(arena):
    """The main thread keeps running Python while another thread sleeps in poll() on the report
    gate; with the GIL held it could not run between the call's start and end."""
    with hugepin.Scheduler.create(arena, hugepin.Plan.from_dict(tp2_plan_input())) as scheduler:
        inside = []

        def poll():
            start = time.monotonic()
            scheduler.poll(0.5)
            inside.append((start, time.monotonic()))

        thread = threading.Thread(target=poll)
        ticks = []
        thread.start()
        while thread.is_alive():
            ticks.append(time.monotonic())
            time.sleep(0.001)  # returns only once this thread holds the GIL again
        thread.join()
        start, end = inside[0]
        assert any(start < tick < end for tick in ticks)


def test_detach_refuses_while_a_view_of_the_region_lives(arena):
    with hugepin.Scheduler.create(arena, hugepin.Plan.from_dict(tp2_plan_input())):
        worker = hugepin.Worker(arena, 0)
        view = worker.host_tensor(0)[3]
        try:
            worker.detach()
        except hugepin.BusyError as error:
            assert "rank 0" in str(error) and "viewed" in str(error)
        else:
            raise AssertionError("detached under a live tensor")
        view.fill_(7)  # still mapped
        del view
        worker.detach()
        worker.detach()
        try:
            worker.heartbeat()
        except hugepin.InvalidArgumentError as error:
            assert "detached" in str(error)
        else:
            raise AssertionError("a detached worker answered")
        again = hugepin.Worker(arena, 0)  # the rank was given back
        again.close()


def test_streams_reach_the_c_abi_as_handles_and_the_default_stream_stays_the_default():
    from hugepin import _args

    class Stream:  # a torch.cuda.Stream as the package reads it
        def __init__(self, handle):
            self.cuda_stream = handle

    class Protocol:  # the __cuda_stream__ protocol of cuda-python and others
        def __cuda_stream__(self):
            return (0, 0x7000)

    assert _args.stream_handle(None) is None  # the worker's own stream
    assert _args.stream_handle(0x5000) == 0x5000
    assert _args.stream_handle(Stream(0x6000)) == 0x6000
    assert _args.stream_handle(Protocol()) == 0x7000
    # torch's default stream is handle 0, which the C ABI would read as "the worker's own stream"
    # (non-blocking, not ordered after the default stream): it goes down as cudaStreamLegacy.
    assert _args.stream_handle(Stream(0)) == 1
    assert _args.stream_handle(0) == 1
