"""scenarios.run_tp2 with CUDA tensors and the GPU backend: each worker pins its region for GPU 0,
its device KV is a CUDA tensor, stores run on the worker's torch stream, and torch sees the region
as pinned memory; and bad input with CUDA tensors (scenarios.check_cuda_tensors). Exits 77 (ctest:
skipped) without a CUDA device; fails when this libhugepin has no CUDA. gpu_check.py runs the same
without pytest."""

import pytest
import torch
from scenarios import check_cuda_tensors, run_tp2


@pytest.fixture(autouse=True, scope="module")
def cuda_device():
    """Ends the run with 77 on a machine without a CUDA device."""
    if not torch.cuda.is_available():
        pytest.exit(f"no CUDA device for torch {torch.__version__}: the GPU offload test needs one", returncode=77)


def test_tp2_offload_gpu(arena):
    run_tp2(arena, "gpu")


def test_cuda_tensors_the_backend_cannot_take(arena):
    check_cuda_tensors(arena)
