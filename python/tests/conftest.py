"""Shared fixtures of the package's tests (run by ctest: python/CMakeLists.txt sets PYTHONPATH to
the build tree's copy of the package, and HUGEPIN_* to the programs and paths the tests need)."""

import os
import re

import pytest

import hugepin

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


@pytest.fixture
def arena(request):
    """A name for this test's arena, destroyed afterwards if the test left it behind."""
    name = "pytest-{}-{}".format(os.getpid(), re.sub(r"[^A-Za-z0-9]", "", request.node.name)[:40])
    yield name
    try:
        hugepin.destroy_arena(name)
    except hugepin.NotFoundError:
        pass


def require_environment(name: str) -> str:
    """A path ctest passes in the environment; a clear failure when run some other way."""
    value = os.environ.get(name)
    if not value:
        pytest.fail(f"{name} is not set: run this test through ctest (ctest --test-dir build -R python_)")
    return value
