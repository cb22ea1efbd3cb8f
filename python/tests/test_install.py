"""`cmake --install` into a temporary prefix: the package lands in the interpreter's site directory
for that prefix, loads the installed libhugepin (not the build tree's), runs a store through it,
and imports the vLLM plug-in (hugepin.vllm) from there. The site directory for the configured
prefix is one the interpreter searches without PYTHONPATH (for /usr/local and Debian's python3:
/usr/local/lib/python3.11/dist-packages)."""

import os
import site
import subprocess
import sys
import tempfile

from conftest import require_environment

SMOKE = """
import os, sys, numpy, hugepin
assert hugepin.library_path().startswith(sys.argv[1]), hugepin.library_path()
name = f"pytest-install-{os.getpid()}"
plan = hugepin.Plan.from_dict({"tp": 1, "pp": 1, "blocks_per_chunk": 2, "cpu_bytes": 8192, "page_size": "4K",
                               "ranks": [{"tp_rank": 0, "pp_rank": 0, "num_blocks": 4, "bytes_per_block": 256}]})
with hugepin.Scheduler.create(name, plan) as scheduler, hugepin.Worker(name, 0) as worker:
    device = numpy.arange(4 * 256, dtype=numpy.uint8)
    worker.set_device_kv([hugepin.DeviceSegment(device.ctypes.data, 256, 4, 256)], "host")
    job = scheduler.dispatch("store", [1])
    worker.store(job, numpy.array([[3, 2]], dtype=numpy.int64))
    assert worker.wait(job, 5.0)
    region = numpy.frombuffer(worker.buffer(0), dtype=numpy.uint8)
    assert (region[2 * 256:3 * 256] == device[3 * 256:]).all()
    del region
import hugepin.vllm  # the vLLM plug-in, installed with the package (on the stand-in of vLLM's interface here)
assert hugepin.vllm.__file__.startswith(sys.argv[1]) and hugepin.vllm.HugepinOffloadingSpec.get_manager
print("installed", hugepin.__version__, hugepin.library_path())
"""


def test_installed_package_loads_the_installed_library():
    build = require_environment("HUGEPIN_BUILD_DIR")
    relative = require_environment("HUGEPIN_PYTHON_INSTALL_DIR")
    with tempfile.TemporaryDirectory(prefix="hugepin-python-") as prefix:
        install = subprocess.run([require_environment("HUGEPIN_CMAKE"), "--install", build, "--prefix", prefix],
                                 capture_output=True, text=True)
        assert install.returncode == 0, install.stderr
        package = os.path.join(prefix, relative)
        assert os.path.isfile(os.path.join(package, "hugepin", "__init__.py"))
        environment = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "HUGEPIN_LIBRARY")}
        environment["PYTHONPATH"] = package  # the temporary prefix is no site directory
        done = subprocess.run([sys.executable, "-c", SMOKE, prefix], env=environment, capture_output=True, text=True,
                              cwd=prefix, timeout=120)
        assert done.returncode == 0, done.stderr
        assert done.stdout.startswith("installed 0.3.0 " + prefix)


def test_the_configured_prefix_is_searched_without_pythonpath():
    prefix = require_environment("HUGEPIN_INSTALL_PREFIX")
    relative = require_environment("HUGEPIN_PYTHON_INSTALL_DIR")
    target = os.path.normpath(os.path.join(prefix, relative))
    if target not in map(os.path.normpath, site.getsitepackages()):
        raise AssertionError(f"cmake --install puts the package in {target}, which {sys.executable} does not search "
                             f"({site.getsitepackages()}): configure with -DHUGEPIN_PYTHON_INSTALL_DIR")
