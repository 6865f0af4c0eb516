"""Benchmark: `make test` warm, its three steps as the Makefile gives them (ruff, mypy, the
suite on one worker per core), each a whole process timed in turn.

Warm: mypy's cache and the bytecode an earlier run wrote are kept (a first mypy run fills
its cache before the timed one, as a developer's second `make test` has it); the venvs are
installed (the Makefile's install steps are not timed). The commands are read from the
Makefile's `test:` recipe, so this times what CI and the README run. Each step's processor
time is printed beside its wall time (its own and that of every process under it that was
waited for: pytest's workers and the processes its tests start), and their sum: what two
minutes on two cores would have to hold.

    python bench/suite.py [--smoke] [--per-file]

--per-file adds where the suite's processor time goes: each test file's, the test workers'
own and their child processes', and the workers' time spent waiting (bench/pertest.py, a
pytest plugin reading `resource.getrusage` around each test); the figures of stop 76's
note came from it.

--smoke runs the same three commands, the suite narrowed to one small file on one worker
and accounted per file: it proves the recipe still parses and runs, and judges nothing.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shlex
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from measured import USER_ENV, processor_seconds

ROOT = Path(__file__).resolve().parent.parent
TARGET = 120.0  # seconds, issue 60


def recipe() -> list[list[str]]:
    """The `test:` target's command lines, `$(BIN)` as this interpreter's folder."""
    lines = (ROOT / "Makefile").read_text().splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("test:"))
    out = []
    for line in lines[start + 1:]:
        if not line.startswith("\t"):
            break
        out.append(shlex.split(line.strip().replace("$(BIN)", str(Path(sys.executable).parent))))
    return out


def timed(cmd: list[str], env: dict[str, str] | None = None) -> tuple[float, float, str]:
    """Wall seconds, processor seconds (the command's and every process under it that was
    waited for: pytest's workers and their children), standard output."""
    start, before = time.perf_counter(), processor_seconds()
    done = subprocess.run(cmd, cwd=ROOT, env={**USER_ENV, **(env or {})},
                          capture_output=True, text=True, check=False)
    took, used = time.perf_counter() - start, processor_seconds() - before
    if done.returncode != 0:
        sys.exit(f"bench/suite.py: {shlex.join(cmd)} failed ({done.returncode}):\n"
                 f"{done.stdout[-3000:]}{done.stderr[-3000:]}")
    return took, used, done.stdout


def per_file(folder: Path) -> None:
    """The table of bench/pertest.py's records in ``folder``: processor seconds per test
    file, the workers' own and their child processes', and the wall neither filled."""
    tests, ends = [], []
    for path in folder.glob("*.jsonl"):
        lines = [json.loads(line) for line in path.read_text().splitlines()]
        ran = [r for r in lines if r["test"]]
        if ran:  # a process that ran tests (xdist's controller ran none: its children
            tests += ran  # are the workers, counted on their own lines)
            ends += [r for r in lines if not r["test"]]
    files: dict[str, list[float]] = {}
    for r in tests:
        row = files.setdefault(r["test"].split("::", 1)[0], [0.0, 0.0, 0.0, 0])
        row[0] += r["own"]
        row[1] += r["children"]
        row[2] += max(r["wall"] - r["own"] - r["children"], 0.0)
        row[3] += 1
    own, children = sum(e["own"] for e in ends), sum(e["children"] for e in ends)
    outside = children - sum(r[1] for r in files.values())
    print(f"the suite's processor time: {own + children:.0f} s ({own:.0f} s the test "
          f"workers' own, {children:.0f} s their child processes', {outside:.0f} s of it "
          f"reaped outside any test); {sum(r[2] for r in files.values()):.0f} s of the "
          "workers' time waiting")
    print(f"  {'file':<40} {'own s':>7} {'children s':>10} {'waiting s':>9} {'tests':>6}")
    for name, (o, c, w, n) in sorted(files.items(), key=lambda kv: -(kv[1][0] + kv[1][1]))[:20]:
        print(f"  {name:<40} {o:>7.1f} {c:>10.1f} {w:>9.1f} {n:>6}")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--smoke", action="store_true",
                    help="the suite narrowed to tests/test_healthpolicy.py on one worker")
    ap.add_argument("--per-file", action="store_true",
                    help="also each test file's processor time (bench/pertest.py; the smoke "
                         "run always)")
    args = ap.parse_args()
    steps = recipe()
    if args.smoke:
        steps = [[*s[:s.index("-n")], "-n", "0", "-q", "tests/test_healthpolicy.py"]
                 if "pytest" in s else s for s in steps]
    mypy = next((s for s in steps if Path(s[0]).name == "mypy"), None)
    if mypy is not None:
        timed(mypy)  # its cache, as a second run has it
    total = processor = 0.0
    print(f"`make test`'s steps, warm ({'smoke: one small test file' if args.smoke else 'whole'})")
    with tempfile.TemporaryDirectory() as records:
        account = args.smoke or args.per_file
        for cmd in steps:
            env = None
            if "pytest" in cmd and account:
                cmd = [*cmd, "-p", "pertest"]
                env = {"GPUFLEET_PERTEST_DIR": records, "PYTHONPATH": os.pathsep.join(
                    [str(ROOT / "bench"), *filter(None, [USER_ENV.get("PYTHONPATH")])])}
            took, used, out = timed(cmd, env)
            total += took
            processor += used
            passed = re.search(r"(\d+) passed", out)
            name = "pytest" if "pytest" in cmd else Path(cmd[0]).name
            print(f"  {name:<8} {took:7.1f} s, {used:6.1f} processor-s"
                  + (f"  ({passed.group(1)} passed)" if passed else ""))
        print(f"make test, warm: {total:.1f} s (target <= {TARGET:.0f} s)")
        print(f"make test, processor time: {processor:.0f} s on {os.cpu_count()} cores (two "
              f"minutes of two cores: {2 * TARGET:.0f} processor-seconds)")
        if account:
            per_file(Path(records))


if __name__ == "__main__":
    main()
