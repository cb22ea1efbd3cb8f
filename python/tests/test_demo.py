"""python3 -m hugepin.demo, the TP 2 x PP 2 demo: host memcpy, 4 KiB pages, every byte checked by
the workers; exit status 0 and every rank's region verified."""

import re
import subprocess
import sys


def test_demo_tp2_pp2_host_memcpy():
    done = subprocess.run([sys.executable, "-m", "hugepin.demo", "--tp", "2", "--pp", "2", "--backend", "host",
                           "--page-size", "4K", "--jobs", "12"], capture_output=True, text=True, timeout=240)
    assert done.returncode == 0, done.stderr
    assert "demo: OK" in done.stdout
    assert len(re.findall(r"worker tp \d pp \d .*: \d+ stored chunks verified", done.stdout)) == 4
    counts = re.search(r"(\d+) stores, (\d+) loads; (\d+) chunks evicted", done.stdout)
    stores, loads, evicted = map(int, counts.groups())
    assert stores >= 6 and loads >= 1 and evicted >= 1, done.stdout  # the fence gave chunks back for reuse
    assert re.search(rf"\b{stores + loads} jobs completed, 0 failed", done.stdout), done.stdout


def test_demo_refuses_a_plan_too_small_by_name():
    done = subprocess.run([sys.executable, "-m", "hugepin.demo", "--cpu-bytes", "1K", "--page-size", "4K"],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 1
    assert "cpu_bytes" in done.stderr
