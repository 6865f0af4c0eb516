"""Benchmark: `make test` warm, its three steps as the Makefile gives them (ruff, mypy, the
suite on one worker per core), each a whole process timed in turn.

Warm: mypy's cache and the bytecode an earlier run wrote are kept (a first mypy run fills
its cache before the timed one, as a developer's second `make test` has it); the venvs are
installed (the Makefile's install steps are not timed). The commands are read from the
Makefile's `test:` recipe, so this times what CI and the README run.

    python bench/suite.py [--smoke]

--smoke runs the same three commands, the suite narrowed to one small file on one worker:
it proves the recipe still parses and runs, and judges nothing.
"""

from __future__ import annotations

import argparse
import re
import shlex
import subprocess
import sys
import time
from pathlib import Path

from measured import USER_ENV

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


def timed(cmd: list[str]) -> tuple[float, str]:
    start = time.perf_counter()
    done = subprocess.run(cmd, cwd=ROOT, env=USER_ENV, capture_output=True, text=True,
                          check=False)
    took = time.perf_counter() - start
    if done.returncode != 0:
        sys.exit(f"bench/suite.py: {shlex.join(cmd)} failed ({done.returncode}):\n"
                 f"{done.stdout[-3000:]}{done.stderr[-3000:]}")
    return took, done.stdout


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--smoke", action="store_true",
                    help="the suite narrowed to tests/test_healthpolicy.py on one worker")
    args = ap.parse_args()
    steps = recipe()
    if args.smoke:
        steps = [[*s[:s.index("-n")], "-n", "0", "-q", "tests/test_healthpolicy.py"]
                 if "pytest" in s else s for s in steps]
    mypy = next((s for s in steps if Path(s[0]).name == "mypy"), None)
    if mypy is not None:
        timed(mypy)  # its cache, as a second run has it
    total = 0.0
    print(f"`make test`'s steps, warm ({'smoke: one small test file' if args.smoke else 'whole'})")
    for cmd in steps:
        took, out = timed(cmd)
        total += took
        passed = re.search(r"(\d+) passed", out)
        name = "pytest" if "pytest" in cmd else Path(cmd[0]).name
        print(f"  {name:<8} {took:7.1f} s" + (f"  ({passed.group(1)} passed)" if passed else ""))
    print(f"make test, warm: {total:.1f} s (target <= {TARGET:.0f} s)")


if __name__ == "__main__":
    main()
