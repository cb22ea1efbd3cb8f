"""test_offload_tp2.py with CUDA tensors and the GPU backend: each worker pins its region for GPU 0,
its device KV is a CUDA tensor, stores run on the worker's torch stream, and torch sees the region
as pinned memory. Exits 77 (skipped) without a CUDA device; fails when this libhugepin has no CUDA.
Bad input with CUDA tensors: pairs on the GPU, device KV on the CPU for the GPU backend."""

import numpy
import pytest
import torch
from conftest import TP2_KV_SHAPE, tp2_plan_input
from test_bad_input import refused
from test_offload_tp2 import run_tp2

import hugepin


@pytest.fixture(autouse=True, scope="module")
def cuda_device():
    """Ends the run with 77 (ctest: skipped) on a machine without a CUDA device."""
    if not torch.cuda.is_available():
        pytest.exit(f"no CUDA device for torch {torch.__version__}: the GPU offload test needs one", returncode=77)


def test_tp2_offload_gpu(arena):
    run_tp2(arena, "gpu")


def test_cuda_tensors_the_backend_cannot_take(arena):
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
        stream = torch.cuda.Stream()
        worker.store(job, torch.from_numpy(pairs), stream)
        assert worker.wait(job, 10.0)
        assert [r.error for r in worker.finished()] == [0]
