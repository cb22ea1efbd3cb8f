"""The per-call overhead benchmark (python/bench/call_overhead.py with the C timer library
call_timer.c) runs, on few calls: a table row per pair count and call, every figure measured
(positive), C and both Python columns present. No timing is asserted."""

import os
import re
import subprocess
import sys

from conftest import require_environment

BENCH = os.path.join(os.path.dirname(__file__), "..", "bench", "call_overhead.py")


def test_the_table_has_every_row_with_c_and_python_figures():
    program = require_environment("HUGEPIN_CALL_TIMER")
    done = subprocess.run([sys.executable, BENCH, "--c-timer", program, "--iterations", "20", "--pairs", "64,4096"],
                          capture_output=True, text=True, timeout=240)
    assert done.returncode == 0, done.stderr
    rows = [line.split() for line in done.stdout.splitlines() if re.match(r"\s*\d+\s+(store|load)\s", line)]
    assert [(row[0], row[1]) for row in rows] == [("64", "store"), ("64", "load"), ("4096", "store"),
                                                  ("4096", "load")]
    for row in rows:
        medians = [float(row[i]) for i in (2, 4, 6)]  # C, numpy, torch: "median (p90)" each
        assert all(value > 0 for value in medians), row
