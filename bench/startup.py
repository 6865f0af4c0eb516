"""Benchmark: whole-process times of `gpufleet --help`, `validate examples/` and `plan
examples/` against a bare `python -c pass`, and what `plan examples/` spends importing.

Each command runs --rounds times as a fresh process (start-up, imports, work and exit all
counted, as a user or a pre-commit hook sees it); medians are printed. Then one
`python -X importtime` run of `plan examples/` gives the provider SDKs' import time and the
largest imports. Target (performance issue): `plan examples/` <= 2 s on an idle 2-core
machine (it was 4.2 s, whole provider SDKs imported).

    python bench/startup.py [--rounds 7] [--smoke]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = str(ROOT / "examples")
SDKS = ("pulumi_aws", "pulumi_gcp", "pulumi_azure_native")


def commands() -> dict[str, list[str]]:
    py = sys.executable
    return {
        "python -c pass": [py, "-c", "pass"],
        "gpufleet --help": [py, "-m", "gpufleet", "--help"],
        "gpufleet validate examples/": [py, "-m", "gpufleet", "validate", EXAMPLES],
        "gpufleet plan examples/": [py, "-m", "gpufleet", "plan", EXAMPLES],
    }


def timed(cmd: list[str]) -> float:
    start = time.perf_counter()
    done = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                          check=False, cwd=ROOT)
    elapsed = time.perf_counter() - start
    if done.returncode != 0:
        sys.exit(f"bench/startup.py: {' '.join(cmd[1:])} failed ({done.returncode}):\n"
                 f"{done.stderr}")
    return elapsed


def import_times() -> tuple[dict[str, float], list[tuple[float, str]]]:
    """Self import time per provider SDK, and the ten largest imports (cumulative, s)."""
    done = subprocess.run([sys.executable, "-X", "importtime", "-m", "gpufleet", "plan",
                           EXAMPLES], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                          text=True, check=True, cwd=ROOT)
    per_sdk = dict.fromkeys(SDKS, 0.0)
    top: list[tuple[float, str]] = []
    for line in done.stderr.splitlines():
        if not line.startswith("import time:") or "|" not in line or "self [us]" in line:
            continue
        own, cumulative, name = line[len("import time:"):].split("|")
        module = name.strip()
        sdk = module.split(".", 1)[0]
        if sdk in per_sdk:
            per_sdk[sdk] += int(own) / 1e6
        top.append((int(cumulative) / 1e6, name.rstrip()))
    return per_sdk, sorted(top, reverse=True)[:10]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--smoke", action="store_true",
                    help="one round, no target: proves the benchmark still runs (CI)")
    args = ap.parse_args()
    rounds = 1 if args.smoke else args.rounds
    env_note = f"{os.cpu_count()} cores, Python {sys.version.split()[0]}"
    print(f"start-up, whole process, median of {rounds} ({env_note})")
    medians = {}
    for label, cmd in commands().items():
        medians[label] = statistics.median(timed(cmd) for _ in range(rounds))
        print(f"  {label:<30} {medians[label]:6.2f} s")
    per_sdk, top = import_times()
    print("provider SDK imports in `plan examples/` (self time, -X importtime):")
    for sdk, seconds in per_sdk.items():
        print(f"  {sdk:<30} {seconds:6.2f} s")
    print("largest imports (cumulative):")
    for seconds, name in top:
        print(f"  {seconds:6.2f} s {name}")
    plan = medians["gpufleet plan examples/"]
    if not args.smoke:
        print(f"plan examples/: {plan:.2f} s (target <= 2 s): "
              f"{'met' if plan <= 2.0 else 'NOT met'}")


if __name__ == "__main__":
    main()
