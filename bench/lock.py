"""Benchmark: `gpufleet lock` writing a lock from scratch against re-running it on the lock
it wrote (nothing to change). Target (performance issue): the re-run does no more work than
the first run (ratio <= 1.0); it used to render the lock three times and pick every fleet's
offer again.

Each case is a fresh process (start-up included), timed --rounds times; medians printed.

    python bench/lock.py [--fleets 20] [--rounds 7] [--smoke]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from measured import USER_ENV

SHAPES = [("gcp", "B200:8"), ("aws", "H100:8"), ("gcp", "L4"), ("azure", "A100:80GB:8"),
          ("aws", "L40S:8")]
ENV = USER_ENV


def write_fleets(folder: Path, count: int) -> None:
    for i in range(count):
        (folder / f"f{i:02d}.yml").write_text(
            f"type: fleet\nname: bench-{i:02d}\nnodes: {1 + i % 4}\nspot_policy: auto\n"
            f"backends: [{SHAPES[i % len(SHAPES)][0]}]\nresources:\n"
            f"  gpu: {SHAPES[i % len(SHAPES)][1]}\n")


def timed(folder: Path) -> float:
    cmd = [sys.executable, "-m", "gpufleet", "lock", str(folder)]
    start = time.perf_counter()
    done = subprocess.run(cmd, capture_output=True, text=True, env=ENV, check=False)
    elapsed = time.perf_counter() - start
    if done.returncode != 0:
        raise SystemExit(f"gpufleet lock failed ({done.returncode}):\n{done.stderr}")
    return elapsed


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--fleets", type=int, default=20)
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--smoke", action="store_true",
                    help="3 fleets, one round: proves the benchmark still runs (CI)")
    args = ap.parse_args()
    if args.smoke:
        args.fleets, args.rounds = 3, 1
    fresh, again = [], []
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        write_fleets(folder, args.fleets)
        lock = folder / "gpufleet.lock"
        timed(folder)  # warm: bytecode and the page cache
        for _ in range(args.rounds):
            lock.unlink()
            fresh.append(timed(folder))
            written = lock.read_bytes()
            again.append(timed(folder))
            assert lock.read_bytes() == written, "the re-run changed an up-to-date lock"
    a, b = statistics.median(fresh), statistics.median(again)
    print(f"fleets: {args.fleets}, rounds: {args.rounds}")
    print(f"lock from scratch     median {a * 1000:7.1f} ms")
    print(f"re-run, up to date    median {b * 1000:7.1f} ms")
    print(f"ratio re-run/fresh: {b / a:.2f}  (target <= 1.00)")


if __name__ == "__main__":
    main()
