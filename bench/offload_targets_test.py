#!/usr/bin/env python3
"""offload_targets.py on real runs: two runs of `hugepin bench offload --json` on the host backend
(one labelled apart), summarized; a third asked otherwise, summarized apart; and input that is not
such a run, refused by name.

Usage: offload_targets_test.py HUGEPIN   (the CLI; ctest passes it)
"""

import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
SUMMARIZER = os.path.join(HERE, "offload_targets.py")


def run(*arguments: str) -> subprocess.CompletedProcess:
    return subprocess.run(arguments, capture_output=True, text=True, timeout=120)


def main() -> int:
    hugepin = sys.argv[1]
    with tempfile.TemporaryDirectory() as folder:
        paths = []
        for i in range(2):
            done = run(hugepin, "bench", "offload", "--backend", "host", "--seconds", "0.2", "--blocks", "16K",
                       "--cpu-bytes", "256M", "--mixes", "store", "--json")
            assert done.returncode == 0, done.stderr
            paths.append(os.path.join(folder, f"run{i}.json"))
            with open(paths[-1], "w", encoding="utf-8") as out:
                out.write(done.stdout)
        both = run(sys.executable, SUMMARIZER, *paths)
        assert both.returncode == 0, both.stderr
        lines = both.stdout.splitlines()
        assert lines[0].startswith("backend host, gpus 0, tp 2, pp 2, jobs_in_flight 8") and lines[0].endswith(
            "(2 runs)"), lines[0]
        assert any(line.split()[:4] == ["16", "KiB", "store", "hugepin"] for line in lines), both.stdout
        assert any(line.split()[:5] == ["16", "KiB", "store", "engine", "way"] for line in lines), both.stdout
        for target in ("at least 90% of the copy engine", "overhead p99 at most 100 us",
                       "overhead p99 below the engine way's", "scheduler CPU at most 1 us per job and rank"):
            assert any(line.strip().startswith(f"hugepin rows with {target}: ") and line.endswith(" of 2")
                       for line in lines), (target, both.stdout)

        header = next(line for line in lines if line.split()[:3] == ["BLOCK", "MIX", "PATH"])
        assert header.split()[-9:] == ["LATE", "BUSY", "%", "AFTER", "TO", "%", "RQ", "WAIT", "TIMEOUTS"], header
        assert any(line.strip().startswith("steal time over the protocol rows: ") for line in lines), both.stdout
        assert any(line.strip().startswith("hugepin's waits on the report gate: ") for line in lines), both.stdout

        apart = run(sys.executable, SUMMARIZER, paths[0], f"other={paths[1]}")
        assert apart.returncode == 0, apart.stderr
        assert apart.stdout.count("(1 run)") == 2 and "other: backend host" in apart.stdout, apart.stdout

        # Runs asked differently are summarized apart without a label: here, the scheduler's timeout.
        shorter = run(hugepin, "bench", "offload", "--backend", "host", "--seconds", "0.2", "--blocks", "16K",
                      "--cpu-bytes", "256M", "--mixes", "store", "--collect-timeout-us", "500", "--json")
        assert shorter.returncode == 0, shorter.stderr
        paths.append(os.path.join(folder, "shorter.json"))
        with open(paths[-1], "w", encoding="utf-8") as out:
            out.write(shorter.stdout)
        unlabelled = run(sys.executable, SUMMARIZER, paths[0], paths[2])
        assert unlabelled.returncode == 0, unlabelled.stderr
        assert unlabelled.stdout.count("(1 run)") == 2 and "collect_timeout_us 500.0," in unlabelled.stdout, \
            unlabelled.stdout

        wrong = os.path.join(folder, "wrong.json")
        with open(wrong, "w", encoding="utf-8") as out:
            out.write('{"benchmark": "ring", "rows": []}')
        refused = run(sys.executable, SUMMARIZER, wrong)
        assert refused.returncode != 0 and "wrong.json: not the JSON of `hugepin bench offload --json`" in \
            refused.stderr, refused
    print("offload_targets_test: OK")
    return 0


if __name__ == "__main__":
    sys.exit(main())
