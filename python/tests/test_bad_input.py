"""Every bad input raises a hugepin.Error subclass whose message names the value, and changes
nothing: no byte copied, no report posted, no job opened, no chunk pinned or retired, the arena
and the copy engine as they were. One process holds the scheduler and both workers (the protocol
across processes is test_offload_tp2.py)."""

import numpy
import pytest
import torch
from scenarios import TP2_KV_SHAPE, refused, tp2_plan_input

import hugepin


@pytest.fixture
def cluster(arena):
    scheduler = hugepin.Scheduler.create(arena, hugepin.Plan.from_dict(tp2_plan_input()))
    workers = [hugepin.Worker(arena, r) for r in range(2)]
    kv = [torch.randint(-100, 100, TP2_KV_SHAPE).to(torch.bfloat16) for _ in range(2)]
    for worker, tensor in zip(workers, kv):
        worker.set_device_kv(list(tensor.unbind(0)), "host")
    scheduler.poll(0.05)  # the workers' attach reports: what follows starts with empty rings
    yield scheduler, workers, kv
    for worker in workers:
        worker.detach()
    scheduler.close()


def region_bytes(worker) -> bytes:
    return bytes(memoryview(worker.buffer()))


def test_plans_and_arenas(arena):
    with refused(hugepin.InvalidArgumentError, "tp"):
        hugepin.Plan.from_dict({**tp2_plan_input(), "tp": 0})
    with refused(hugepin.InvalidArgumentError):
        hugepin.Plan.from_json('{"tp": 2,')
    with refused(hugepin.InvalidArgumentError, "list"):
        hugepin.Plan.from_dict([1, 2])
    with refused(hugepin.InvalidArgumentError, "int"):
        hugepin.Plan.from_json(7)
    kv = torch.empty((3, 16, 64), device="meta")
    with refused(hugepin.InvalidArgumentError, "'layers.0'", "element 1024"):
        hugepin.Plan.from_tensors(tp=1, pp=1, blocks_per_chunk=1, cpu_bytes=1 << 20, ranks={(0, 0): (16, {"layers.0": kv[1]})})
    with refused(hugepin.InvalidArgumentError, "ranks[0]"):
        hugepin.Plan.from_tensors(tp=1, pp=1, blocks_per_chunk=1, cpu_bytes=1 << 20, ranks={0: (16, {})})

    with refused(hugepin.NotFoundError, "pytest-no-such-arena"):
        hugepin.arena_info("pytest-no-such-arena")
    with refused(hugepin.InvalidArgumentError, "../etc"):
        hugepin.arena_info("../etc")
    with refused(hugepin.NotFoundError, "pytest-no-such-arena"):
        hugepin.Scheduler.adopt("pytest-no-such-arena")
    with refused(hugepin.NotFoundError, "pytest-no-such-arena"):
        hugepin.Worker("pytest-no-such-arena", 0)
    with refused(hugepin.InvalidArgumentError, "None"):
        hugepin.Worker(None, 0)

    plan = hugepin.Plan.from_dict(tp2_plan_input())
    with refused(hugepin.InvalidArgumentError, "page_size", "'3M'"):
        hugepin.Scheduler.create(arena, plan, page_size="3M")
    with refused(hugepin.NotFoundError, arena):
        hugepin.arena_info(arena)  # the refused create left nothing
    with refused(hugepin.InvalidArgumentError, "heartbeat_timeout", "-1"):
        hugepin.Scheduler.create(arena, plan, heartbeat_timeout=-1)
    with refused(hugepin.InvalidArgumentError, "dict"):
        hugepin.Scheduler.create(arena, tp2_plan_input())
    with hugepin.Scheduler.create(arena, plan) as scheduler:
        with refused(hugepin.ExistsError, arena):
            hugepin.Scheduler.create(arena, plan)
        with refused(hugepin.ExistsError, arena):
            hugepin.create_arena(arena, plan)
        with refused(hugepin.BusyError, "scheduler role"):
            hugepin.Scheduler.adopt(arena)
        assert hugepin.arena_info(arena) == scheduler.info
        with refused(hugepin.OutOfRangeError, "2"):
            hugepin.Worker(arena, 2)
        with refused(hugepin.OutOfRangeError, "tp_rank = -1"):
            hugepin.Worker(arena, -1)
        with refused(hugepin.OutOfRangeError, "pp 1"):
            hugepin.Worker(arena, 0, 1)
        with refused(hugepin.InvalidArgumentError, "completion_poll = -1e-05"):
            hugepin.Worker(arena, 0, completion_poll=-1e-5)
        with refused(hugepin.InvalidArgumentError, "completion_poll = 'fast'"):
            hugepin.Worker(arena, 0, completion_poll="fast")
        with hugepin.Worker(arena, 0, completion_poll="spin"):  # HUGEPIN_COMPLETION_SPIN: taken
            with refused(hugepin.BusyError):
                hugepin.Worker(arena, 0)


def test_dispatch_retire_and_poll(cluster):
    scheduler, _, _ = cluster
    before = scheduler.figures()
    with refused(hugepin.InvalidArgumentError, "'copy'"):
        scheduler.dispatch("copy", [1])
    with refused(hugepin.InvalidArgumentError, "kind = 7"):
        scheduler.dispatch(7, [1])
    with refused(hugepin.InvalidArgumentError):
        scheduler.dispatch(hugepin.STORE, [])
    with refused(hugepin.OutOfRangeError, "32"):
        scheduler.dispatch(hugepin.STORE, [1, 32])
    with refused(hugepin.OutOfRangeError, "chunks[0] = -1"):
        scheduler.dispatch(hugepin.STORE, [-1])
    with refused(hugepin.OutOfRangeError, "4294967296"):
        scheduler.dispatch(hugepin.LOAD, numpy.array([1 << 32], dtype=numpy.int64))
    with refused(hugepin.InvalidArgumentError, "'ab'"):
        scheduler.dispatch(hugepin.STORE, "ab")
    with refused(hugepin.InvalidArgumentError, "'x'"):
        scheduler.dispatch(hugepin.STORE, ["x"])
    with refused(hugepin.OutOfRangeError, "32"):
        scheduler.retire(32)
    with refused(hugepin.InvalidArgumentError, "timeout = -1"):
        scheduler.poll(-1)
    assert scheduler.figures() == before

    scheduler.retire(5)
    retired = scheduler.figures()
    with refused(hugepin.InvalidArgumentError, "5"):
        scheduler.retire(5)
    with refused(hugepin.BusyError, "5"):
        scheduler.dispatch(hugepin.STORE, [5])
    assert scheduler.figures() == retired


def test_pairs_of_the_wrong_dtype_shape_layout_device_or_range(cluster):
    scheduler, (w0, w1), kv = cluster
    job = scheduler.dispatch(hugepin.STORE, [1])
    good = numpy.array([[b, 4 + b] for b in range(4)], dtype=numpy.int64)
    region = region_bytes(w0)
    bad = [
        (hugepin.InvalidArgumentError, ("float64",), good.astype(numpy.float64), None, job),
        (hugepin.InvalidArgumentError, ("int32",), good.astype(numpy.int32), None, job),
        (hugepin.InvalidArgumentError, ("torch.int32",), torch.from_numpy(good).int(), None, job),
        (hugepin.InvalidArgumentError, ("(4, 3)",), numpy.zeros((4, 3), dtype=numpy.int64), None, job),
        (hugepin.InvalidArgumentError, ("(8,)",), good.reshape(8), None, job),
        (hugepin.InvalidArgumentError, ("(1, 4, 2)",), torch.from_numpy(good).view(1, 4, 2), None, job),
        (hugepin.InvalidArgumentError, ("strides", "not C-contiguous"), numpy.zeros((8, 2), numpy.int64)[::2], None, job),
        (hugepin.InvalidArgumentError, ("strides", "not contiguous"), torch.zeros((2, 4), dtype=torch.int64).t(), None, job),
        (hugepin.InvalidArgumentError, ("meta",), torch.zeros((4, 2), dtype=torch.int64, device="meta"), None, job),
        (hugepin.InvalidArgumentError, ("list",), good.tolist(), None, job),
        (hugepin.OutOfRangeError, ("job = 0",), good, None, 0),
        (hugepin.OutOfRangeError, ("job = -3",), good, None, -3),
        (hugepin.InvalidArgumentError, ("'abc'",), good, "abc", job),
        (hugepin.InvalidArgumentError, ("stream = -1",), good, -1, job),
    ]
    for kind, fragments, pairs, stream, job_id in bad:
        for call in (w0.store, w0.load):
            with refused(kind, *fragments):
                call(job_id, pairs, stream)
    # Out of range: a store copies (device block, host block), a load (host block, device block);
    # the device holds 64 blocks, the region 128.
    out_of_range = [(w0.store, "128", [[0, 4], [1, 128]]), (w0.store, "64", [[64, 4]]),
                    (w0.load, "128", [[128, 0]]), (w0.load, "64", [[4, 0], [5, 64]]),
                    (w0.store, "pairs[1] = (-1, 5)", [[0, 4], [-1, 5]]), (w0.load, "pairs[0] = (4, -2)", [[4, -2]])]
    for call, fragment, rows in out_of_range:
        with refused(hugepin.OutOfRangeError, fragment):
            call(job, numpy.array(rows, dtype=numpy.int64))
    assert region_bytes(w0) == region  # nothing copied
    assert w0.finished() == []          # nothing landed
    progress = scheduler.poll(0.05)
    assert (progress.reports, progress.completed, progress.failed) == (0, [], [])  # nothing posted

    for worker in (w0, w1):  # the job goes on as if nothing had happened
        worker.store(job, torch.from_numpy(good))
    assert scheduler.poll(1.0).completed == [job]
    assert torch.equal(w0.host_tensor(0, torch.bfloat16, (128, 256))[4:8], kv[0][0, 0:4])


def test_device_kv_of_the_wrong_dtype_layout_or_device(cluster):
    scheduler, (w0, w1), kv = cluster
    wrong = [
        (hugepin.InvalidArgumentError, ("segment 0",), [torch.zeros((64, 256)), torch.zeros((64, 256))], "host"),
        (hugepin.InvalidArgumentError, ("strides", "contiguous"),
         list(torch.zeros((2, 64, 512), dtype=torch.bfloat16)[:, :, ::2].unbind(0)), "host"),
        (hugepin.InvalidArgumentError, ("meta",), list(torch.zeros(TP2_KV_SHAPE, dtype=torch.bfloat16,
                                                                   device="meta").unbind(0)), "host"),
        (hugepin.InvalidArgumentError, ("cpu", "GPU backend"), list(kv[0].unbind(0)), hugepin.Backend.GPU),
        (hugepin.InvalidArgumentError, ("(0, 256)",), [kv[0][0][:0], kv[0][1]], "host"),
        (hugepin.InvalidArgumentError, ("segments[1]", "str"), [kv[0][0], "kv"], "host"),
        (hugepin.InvalidArgumentError, ("'tpu'",), list(kv[0].unbind(0)), "tpu"),
        (hugepin.InvalidArgumentError, ("1",), [kv[0][0]], "host"),
    ]
    for kind, fragments, segments, backend in wrong:
        with refused(kind, *fragments):
            w0.set_device_kv(segments, backend)
    with refused(hugepin.InvalidArgumentError, "'cpu'"):
        w0.pin("cpu")
    with refused(hugepin.InvalidArgumentError, "cpu"):
        w0.pin(torch.device("cpu"))
    assert not w0.region.pinned

    job = scheduler.dispatch(hugepin.STORE, [2])  # the engine built first still copies
    pairs = numpy.array([[10 + b, 8 + b] for b in range(4)], dtype=numpy.int64)
    w0.store(job, pairs)
    w1.store(job, pairs)
    assert scheduler.poll(1.0).completed == [job]
    for s in range(2):
        assert torch.equal(w0.host_tensor(s, torch.bfloat16, (128, 256))[8:12], kv[0][s, 10:14])


def test_host_tensors_of_the_wrong_dtype_shape_or_segment(cluster):
    _, (w0, _), _ = cluster
    with refused(hugepin.InvalidArgumentError, "'float'"):
        w0.host_tensor(0, "float")
    with refused(hugepin.InvalidArgumentError, "(3, 7)"):
        w0.host_tensor(0, torch.float32, (3, 7))
    with refused(hugepin.InvalidArgumentError, "(128, 100)"):
        w0.host_tensor(0, torch.float64, (128, 100))
    with refused(hugepin.InvalidArgumentError, "(5,)"):
        w0.host_tensor(None, torch.uint8, (5,))
    with refused(hugepin.OutOfRangeError, "segment 5", "has 2"):
        w0.host_tensor(5)
    with refused(hugepin.OutOfRangeError, "segment -1"):
        w0.buffer(-1)
