"""Hostile inputs, class by class, many more than CI runs, with the figures the issue asks
for: how many inputs per class, how each exited, and the worst time and memory.

Classes: nccl-tests logs with unreadable fields or several runs (never a pass), stack
exports (random JSON and mutated real exports: never an internal error), and alias / merge
bombs (each validated in its own process: time and peak memory of that process).

    python bench/hostile.py [--examples 2000] [--bombs 200] [--seed 1] [--smoke]
"""

from __future__ import annotations

import argparse
import json
import random
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

from measured import run_measured

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))


def logs(n: int, rnd: random.Random) -> None:
    from test_acceptance import log
    from test_hostile import A4_EXPECTATION

    from gpufleet.evidence import parse_log, verdict

    tokens = ["lots", "nan", "inf", "-5", "1e308", "7_00", "0x10", "\u0663\u0660", "", "-",
              "+1", "9" * 5000, "1,000", "\u00bd", "1.2.3", "NaN", "1E3"]
    codes: Counter[int] = Counter()
    worst = 0.0
    for _ in range(n):
        lines = log(rnd.choice([4.2, 700.0])).splitlines()
        rows = [i for i, ln in enumerate(lines) if ln[:12].strip().isdigit()]
        i = rnd.choice(rows)
        fields = lines[i].split()
        fields[5 + rnd.randrange(8)] = rnd.choice(tokens) or "?"
        lines[i] = "  ".join(fields)
        if rnd.random() < 0.3:  # and sometimes a second run after it
            lines += log(700.0).splitlines()
        start = time.perf_counter()
        codes[verdict(parse_log("\n".join(lines)), A4_EXPECTATION).code] += 1
        worst = max(worst, time.perf_counter() - start)
    print(f"logs:    {n} inputs, exit codes {dict(sorted(codes.items()))} (a 0 would be a "
          f"pass on unreadable evidence), worst {worst * 1000:.1f} ms")


def exports(n: int, rnd: random.Random) -> None:
    from exportutil import export
    from test_hostile import paths_in, put, run

    from planutil import EXAMPLES, SHARED

    files = [str(EXAMPLES / "fleets" / "gcp-a4.dstack.yml"), *SHARED]
    real = export(files)
    places = paths_in(real)
    values = [None, 5, -1, "x", [], {}, True, 1.5, "9" * 50, {"4dabf18193072939515e22adb298388d":
              "1b47061264138c4ac30d75fd1eb44270", "plaintext": 5},
              {"4dabf18193072939515e22adb298388d": None}, [[[[[]]]]]]
    codes: Counter[int] = Counter()
    worst = 0.0
    folder = Path(tempfile.mkdtemp())
    for k in range(n):
        data = put(real, rnd.choice(places), rnd.choice(values))
        path = folder / "state.json"
        path.write_text(json.dumps(data))
        args = (["diff", "--state", str(path), *files, "--full"] if k % 2 else
                ["export", "dstack", "--state", str(path), "--out", str(folder / "o"),
                 "--force"])
        start = time.perf_counter()
        code, _ = run(*args)
        worst = max(worst, time.perf_counter() - start)
        codes[code] += 1
    print(f"exports: {n} inputs (diff and export dstack), exit codes "
          f"{dict(sorted(codes.items()))} (3 would be an internal error), worst {worst:.2f} s")


def bombs(n: int, rnd: random.Random) -> None:
    folder = Path(tempfile.mkdtemp())
    worst_time, worst_rss = 0.0, 0.0
    codes: Counter[int] = Counter()
    for k in range(n):
        levels, width, merge = rnd.randint(2, 12), rnd.randint(5, 200), rnd.random() < 0.5
        if merge:
            lines = ["a0: &a0 {" + ", ".join(f"k{j}: v" for j in range(width)) + "}"]
            lines += [f"a{i}: &a{i} {{<<: *a{i - 1}, " + ", ".join(
                f"m{j}: *a{i - 1}" for j in range(width)) + "}" for i in range(1, levels + 1)]
        else:
            lines = ["a0: &a0 [" + ", ".join(["x"] * width) + "]"]
            lines += [f"a{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * width) + "]"
                      for i in range(1, levels + 1)]
        path = folder / f"bomb{k}.yml"
        path.write_text("\n".join(lines) + "\n")
        m = run_measured([sys.executable, "-m", "gpufleet", "validate", str(path)],
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        worst_time = max(worst_time, m.seconds)
        worst_rss = max(worst_rss, m.peak_mb)
        codes[m.code] += 1
    print(f"bombs:   {n} alias/merge bombs, each in its own process: exit codes "
          f"{dict(sorted(codes.items()))}, worst {worst_time:.2f} s and "
          f"{worst_rss:.0f} MB (the whole process, Python included)")


def plain() -> None:
    """Plain YAML (no aliases) up to the 10 MB cap: the parse budget refuses what holds more
    than 100,000 values before composing it (each file in its own process)."""
    folder = Path(tempfile.mkdtemp())
    for mb, keys in ((0.5, 45_000), (1, 90_000), (9.9, 900_000)):
        path = folder / f"plain-{mb}.yml"
        path.write_text("type: fleet\nname: big\nnodes: 1\ntags:\n" + "".join(
            f"  key{i:07d}: value\n" for i in range(keys))[:int(mb * 1e6)])
        m = run_measured([sys.executable, "-m", "gpufleet", "validate", str(path)],
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        print(f"plain:   {path.stat().st_size / 1e6:.1f} MB of plain YAML: exit {m.code} in "
              f"{m.seconds:.2f} s, {m.peak_mb:.0f} MB (the whole process)")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--examples", type=int, default=2000)
    ap.add_argument("--bombs", type=int, default=200)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--smoke", action="store_true",
                    help="a few inputs of each kind: proves the benchmark still runs (CI)")
    args = ap.parse_args()
    if args.smoke:
        args.examples, args.bombs = 8, 4
    rnd = random.Random(args.seed)
    logs(args.examples, rnd)
    exports(args.examples // 4, rnd)
    bombs(args.bombs, rnd)
    plain()


if __name__ == "__main__":
    main()
