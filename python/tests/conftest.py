"""Shared fixtures of the package's tests (run by ctest: python/CMakeLists.txt sets PYTHONPATH to
the build tree's copy of the package, and HUGEPIN_* to the programs and paths the tests need)."""

import os
import re

import pytest

import hugepin


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
