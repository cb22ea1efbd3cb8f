#!/usr/bin/env python3
"""Summarizes runs of `hugepin bench offload --json` against issue 16's targets.

Each argument is the JSON of one run (a file, or - for standard input). Runs are grouped by what
they were asked (backend, TP x PP, jobs in flight, --time-every, --collect-every-us, poll
intervals: the fields every run's JSON carries), so that runs with and without an option are not
mixed; a LABEL=FILE argument also groups by LABEL, for what the JSON cannot say (MPS running,
a different build). For each group and each block size and mix, the range over its runs of:

  % OF CE   the protocol row's GB/s as a share of the copy engine row of the same run
  OVH p50 / p99, LANDED p99, SEEN p99   microseconds, from the timed jobs (- when none)
  CPU/JOB/RANK   the scheduler's CPU inside the protocol's calls, per job and rank
  LATE BUSY %    of the timed jobs' SEEN at or above its p99, the share the scheduler thread spent
                 outside its collect calls (busy elsewhere, not waiting for the report)
  AFTER TO %     of those jobs, the share seen by a collect call whose wait ran out (its whole
                 timeout passed: nothing woke the scheduler for them; waking per job only)
  RQ WAIT        the scheduler thread's time runnable but not running, us per job
  TIMEOUTS       collect calls whose wait ran out (waking per job)
(the last four from the JSON's scheduler_stalls; - in runs from before it), and per group the
machines' steal time over the rows, a share of all their CPU time (idle included), and how
hugepin's waits on the report gate ended, summed (the JSON's gate_waits).

and then, per group, how many protocol rows met each target:
  hugepin >= 90% of the copy engine; hugepin's overhead p99 <= 100 us; hugepin's overhead p99
  below the engine way's of the same run; hugepin's CPU <= 1 us per job and rank.

Usage: offload_targets.py [LABEL=]RUN.json ...   (standard library only; exit 1 on unreadable input)
"""

from __future__ import annotations

import json
import sys
from collections import defaultdict

# What a run was asked, from its JSON: runs that differ here are summarized apart.
GROUP_KEYS = ("backend", "gpus", "tp", "pp", "jobs_in_flight", "chunks_per_job", "time_every", "collect_every_us",
              "collect_timeout_us", "wait_slack_us", "poll_us", "completion_poll_us", "spin", "keep_free")
MIX_ORDER = {"mixed": 0, "store": 1, "load": 2}


def load(argument: str) -> tuple[str, dict]:
    label, _, path = argument.rpartition("=") if "=" in argument and not argument.startswith("-") else ("", "", argument)
    try:
        text = sys.stdin.read() if path == "-" else open(path, encoding="utf-8").read()
        run = json.loads(text[text.index("{"):])  # a rank's warnings may precede the JSON
    except (OSError, ValueError) as error:
        raise SystemExit(f"offload_targets: {path}: {error}") from None
    if run.get("benchmark") != "offload" or "rows" not in run:
        raise SystemExit(f"offload_targets: {path}: not the JSON of `hugepin bench offload --json`")
    return label, run


def span(values: list[float], digits: int) -> str:
    if not values:
        return "-"
    low, high = (f"{value:.{digits}f}" for value in (min(values), max(values)))
    if low == high:
        return low
    return f"{low} to {high}" if low.startswith("-") or high.startswith("-") else f"{low}-{high}"


def group_name(label: str, run: dict) -> str:
    asked = ", ".join(f"{key} {run.get(key)}" for key in GROUP_KEYS if key in run)
    return f"{label}: {asked}" if label else asked


def summarize(runs: list[tuple[str, dict]]) -> str:
    groups: dict[str, list[dict]] = defaultdict(list)
    for label, run in runs:
        groups[group_name(label, run)].append(run)
    out = []
    for name, members in groups.items():
        cells: dict[tuple, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
        met = defaultdict(lambda: [0, 0])  # target -> [rows met, rows counted]
        steal: list[float] = []
        gate: dict[str, int] = defaultdict(int)  # hugepin's sleeps on the report gate, summed
        for run in members:
            rows = {(r["block_bytes"], r["mix"], r["path"]): r for r in run["rows"]}
            for (block, mix, path), row in rows.items():
                if path == "copy engine":
                    continue
                ceiling = rows.get((block, mix, "copy engine"))
                cell = cells[(block, mix, path)]
                share = 100 * row["gb_per_second"] / ceiling["gb_per_second"] if ceiling else None
                if share is not None:
                    cell["share"].append(share)
                timed = row.get("overhead_us") is not None
                if timed:
                    cell["ovh50"].append(row["overhead_us"]["p50"])
                    cell["ovh99"].append(row["overhead_us"]["p99"])
                    cell["landed99"].append(row["landed_us"]["p99"])
                    cell["seen99"].append(row["seen_us"]["p99"])
                cell["cpu"].append(row["scheduler_cpu_us_per_job_rank"])
                stalls = row.get("scheduler_stalls")
                if stalls is not None:
                    for key, column, scale in (("late_seen_busy_share", "busy", 100),
                                               ("late_seen_after_timeout_share", "aftertimeout", 100),
                                               ("run_queue_wait_us_per_job", "rqwait", 1),
                                               ("collect_timeouts", "timeouts", 1)):
                        if stalls[key] is not None:  # null: not measured (no timed job, step mode)
                            cell[column].append(scale * stalls[key])
                    steal.append(100 * stalls["steal_share"])
                    for key, value in (stalls.get("gate_waits") or {}).items():
                        gate[key] += value
                if path != "hugepin":
                    continue
                if share is not None:
                    met["at least 90% of the copy engine"][0] += share >= 90
                    met["at least 90% of the copy engine"][1] += 1
                if timed:
                    met["overhead p99 at most 100 us"][0] += row["overhead_us"]["p99"] <= 100
                    met["overhead p99 at most 100 us"][1] += 1
                    other = rows.get((block, mix, "engine way"))
                    if other is not None and other.get("overhead_us") is not None:
                        met["overhead p99 below the engine way's"][0] += (
                            row["overhead_us"]["p99"] < other["overhead_us"]["p99"])
                        met["overhead p99 below the engine way's"][1] += 1
                met["scheduler CPU at most 1 us per job and rank"][0] += row["scheduler_cpu_us_per_job_rank"] <= 1
                met["scheduler CPU at most 1 us per job and rank"][1] += 1
        out.append(f"{name} ({len(members)} run{'s' if len(members) != 1 else ''})")
        header = ("BLOCK", "MIX", "PATH", "% OF CE", "OVH p50", "OVH p99", "LANDED p99", "SEEN p99", "CPU/JOB/RANK",
                  "LATE BUSY %", "AFTER TO %", "RQ WAIT", "TIMEOUTS")
        table = [header]
        for (block, mix, path) in sorted(cells, key=lambda k: (k[0], MIX_ORDER.get(k[1], 9), k[2] != "hugepin")):
            c = cells[(block, mix, path)]
            table.append((f"{block // 1024} KiB", mix, path, span(c["share"], 1), span(c["ovh50"], 0),
                          span(c["ovh99"], 0), span(c["landed99"], 0), span(c["seen99"], 0), span(c["cpu"], 2),
                          span(c["busy"], 0), span(c["aftertimeout"], 0), span(c["rqwait"], 2),
                          span(c["timeouts"], 0)))
        widths = [max(len(row[i]) for row in table) for i in range(len(header))]
        for row in table:
            out.append("  " + "  ".join(text.ljust(width) for text, width in zip(row, widths)).rstrip())
        for target, (yes, counted) in met.items():
            out.append(f"  hugepin rows with {target}: {yes} of {counted}")
        if steal:
            out.append(f"  steal time over the protocol rows: {span(steal, 2)}% of the machine's CPU time")
        if gate:
            out.append(f"  hugepin's waits on the report gate: {gate['waits']}, of which {gate['timed_out']} timed out, "
                       f"{gate['woken_late']} woken late, {gate['no_wake']} met at the timer with no wake asked for yet")
        out.append("")
    return "\n".join(out)


def main(arguments: list[str]) -> int:
    if not arguments or arguments[0] in ("-h", "--help"):
        print(__doc__.strip())
        return 0 if arguments else 1
    print(summarize([load(argument) for argument in arguments]), end="")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
