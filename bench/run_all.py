"""Every benchmark, one after the other, and one table of their headline figures.

    python bench/run_all.py            # full sizes: about 12 minutes on 2 cores
    python bench/run_all.py --smoke    # tiny sizes, no target judged (what CI runs)

Each benchmark is its own script (see bench/README.md for what each compares against); this
runs each in a fresh process, reads the figures it prints with the patterns in BENCHES (the
test suite runs every script in --smoke mode and checks the same patterns, so neither the
scripts nor this table can rot unnoticed), and prints one row per figure with its target.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

BENCH = Path(__file__).resolve().parent


@dataclass(frozen=True)
class Figure:
    """One headline figure: the pattern that reads it from the script's output (its first
    group is the number), how it is shown, and the target it is judged against."""

    label: str
    pattern: str
    unit: str
    target: str
    met: Callable[[float], bool]


@dataclass(frozen=True)
class Bench:
    script: str
    compares: str
    figures: tuple[Figure, ...]


BENCHES = (
    Bench("startup.py", "a bare `python -c pass`", (
        Figure("plan examples/, whole process, warm (cached run)",
               r"gpufleet plan examples/ \(warm\)\s+([\d.]+) s", "s", "<= 1.2 s",
               lambda v: v <= 1.2),
        Figure("plan examples/, whole process, cold (the program runs, each cloud's part "
               "in a process; the SDKs' type indexes a first run wrote are read)",
               r"gpufleet plan examples/ \(cold\)\s+([\d.]+) s", "s", "<= 1.2 s",
               lambda v: v <= 1.2),
        Figure("plan examples/, whole process, cold, in one process (GPUFLEET_JOBS=1: no "
               "cloud's part forked)", r"gpufleet plan examples/ \(cold, 1 job\)\s+([\d.]+) s",
               "s", "-", lambda v: True),
        Figure("plan examples/, whole process, first run after installing (writes the "
               "SDKs' type indexes and its run entry)",
               r"gpufleet plan examples/ \(first run\)\s+([\d.]+) s", "s", "-",
               lambda v: True),
        Figure("quota examples/, whole process, cold",
               r"gpufleet quota examples/ \(cold\)\s+([\d.]+) s", "s", "<= 1 s",
               lambda v: v <= 1.0),
        Figure("quota examples/, whole process, warm",
               r"gpufleet quota examples/ \(warm\)\s+([\d.]+) s", "s", "<= 1 s",
               lambda v: v <= 1.0),
        Figure("health (examples' fleets, local dstack server), whole process",
               r"gpufleet health\s+([\d.]+) s", "s", "<= 1 s", lambda v: v <= 1.0),
        Figure("export skypilot (examples), whole process",
               r"gpufleet export skypilot\s+([\d.]+) s", "s", "<= 1 s", lambda v: v <= 1.0),
        Figure("validate examples/, whole process",
               r"gpufleet validate examples/\s+([\d.]+) s", "s", "-", lambda v: True),
    )),
    Bench("validate.py", "check-jsonschema on the same 200 files", (
        Figure("validate / check-jsonschema", r"ratio gpufleet/check-jsonschema: ([\d.]+)",
               "x", "<= 0.20", lambda v: v <= 0.20),
    )),
    Bench("plan.py", "the bare Pulumi SDK registering the same resources", (
        Figure("plan / SDK floor, 1,000 nodes, whole processes",
               r"ratio at [\d,]+ nodes: ([\d.]+)x", "x", "<= 0.15", lambda v: v <= 0.15),
        Figure("every node registered / SDK floor with its dependencies, 1,000 nodes, "
               "whole processes",
               r"every node at [\d,]+ nodes: ([\d.]+)x the floor \(the program", "x",
               "<= 1.1", lambda v: v <= 1.1),
        Figure("gpufleet plan, every node registered / SDK floor with its dependencies, "
               "1,000 nodes, whole processes",
               r"gpufleet plan with every node registered \(the program, its policy rules and "
               r"its JSON\) at [\d,]+ nodes: ([\d.]+)x", "x", "-", lambda v: True),
        Figure("every node registered / SDK floor with its dependencies, 1,000 nodes, "
               "in-process",
               r"every node at [\d,]+ nodes, in-process: ([\d.]+)x", "x", "-",
               lambda v: True),
        Figure("16,000-node fleet, whole process", r"whole process: ([\d.]+) s, peak", "s",
               "<= 10 s", lambda v: v <= 10.0),
        Figure("16,000-node fleet, peak RSS", r"whole process: [\d.]+ s, peak RSS (\d+) MB",
               "MB", "<= 400 MB", lambda v: v <= 400),
    )),
    Bench("diff.py", "itself: unchanged, one fleet changed, --full (20 fleets, 5,000 "
          "resources)", (
        Figure("diff, unchanged YAML", r"unchanged YAML:\s+([\d.]+) s", "s", "<= 1 s",
               lambda v: v <= 1.0),
        Figure("diff, one fleet changed", r"fleet\(s\) changed:\s+([\d.]+) s", "s",
               "<= 1.5 s", lambda v: v <= 1.5),
        Figure("diff, --full", r"--full:\s+([\d.]+) s", "s", "<= 3 s", lambda v: v <= 3.0),
    )),
    Bench("lock.py", "`gpufleet lock` writing the lock from scratch", (
        Figure("lock re-run / fresh", r"ratio re-run/fresh: ([\d.]+)", "x", "<= 1.00",
               lambda v: v <= 1.0),
    )),
    Bench("offers.py", "its own target per fleet", (
        Figure("offer selection, median per fleet", r"100-fleet file: median ([\d.]+) ms",
               "ms", "<= 20 ms", lambda v: v <= 20.0),
    )),
    Bench("fuzz.py", "no internal error, no input over 2 s", (
        Figure("fuzz internal errors", r"internal errors \(exit 3\): (\d+)", "", "0",
               lambda v: v == 0),
        Figure("fuzz slowest input", r"slowest input: ([\d.]+) s", "s", "<= 2 s",
               lambda v: v <= 2.0),
    )),
    Bench("lambda_boot.py", "Lambda's launch limit: (nodes - 1) x 12 s + one boot", (
        Figure("Lambda fleet up / floor, 100 nodes", r"launch, then wait / floor: ([\d.]+)x",
               "x", "<= 1.10", lambda v: v <= 1.10),
        Figure("Lambda fleet up, speed-up", r"create-waits: ([\d.]+)x", "x", "-",
               lambda v: True),
    )),
    Bench("suite.py", "its target: `make test` warm on 2 cores, no test dropped", (
        Figure("make test, warm (ruff, mypy, the suite on one worker per core)",
               r"make test, warm: ([\d.]+) s", "s", "<= 120 s", lambda v: v <= 120.0),
        Figure("make test, processor time (every process of its three steps)",
               r"make test, processor time: ([\d.]+) s", "s", "-", lambda v: True),
    )),
    Bench("hostile.py", "no pass on bad evidence, no internal error, bounded bombs", (
        Figure("alias bomb, worst process", r"worst ([\d.]+) s and \d+ MB", "s", "<= 2 s",
               lambda v: v <= 2.0),
        Figure("alias bomb, worst memory", r"worst [\d.]+ s and (\d+) MB", "MB", "<= 200 MB",
               lambda v: v <= 200),
    )),
)


def run(bench: Bench, smoke: bool) -> tuple[str, float]:
    """The script's output (it must exit 0) and how long it took."""
    start = time.perf_counter()
    done = subprocess.run([sys.executable, str(BENCH / bench.script),
                           *(["--smoke"] if smoke else [])], capture_output=True, text=True,
                          check=False)
    took = time.perf_counter() - start
    if done.returncode != 0:
        raise SystemExit(f"bench/{bench.script} failed ({done.returncode}):\n"
                         f"{done.stdout[-2000:]}{done.stderr[-2000:]}")
    return done.stdout, took


def read(figure: Figure, output: str) -> float:
    found = re.search(figure.pattern, output)
    if found is None:
        raise SystemExit(f"no figure '{figure.label}' in the output (pattern "
                         f"{figure.pattern!r}):\n{output[-2000:]}")
    return float(found.group(1))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--smoke", action="store_true",
                    help="tiny sizes; the figures are shown but no target is judged")
    args = ap.parse_args()
    rows = []
    for bench in BENCHES:
        load = os.getloadavg()[0]  # the machine's load as the script starts: the figure's
        output, took = run(bench, args.smoke)  # context (a busy machine runs slower)
        print(f"bench/{bench.script}: {took:.0f} s", file=sys.stderr)
        for fig in bench.figures:
            value = read(fig, output)
            verdict = "-" if args.smoke or fig.target == "-" else \
                ("met" if fig.met(value) else "NOT MET")
            rows.append((fig.label, f"{value:g} {fig.unit}".strip(), fig.target, verdict,
                         f"{load:.2f}", bench.script))
    head = ("figure", "measured", "target", "verdict", "load", "script")
    widths = [max(len(r[i]) for r in rows) for i in range(len(head))]
    widths = [max(w, len(h)) for w, h in zip(widths, head, strict=True)]
    for row in (head, *rows):
        print("  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip())
    if args.smoke:
        print("(smoke sizes: the figures prove the scripts run, they measure nothing)")


if __name__ == "__main__":
    main()
