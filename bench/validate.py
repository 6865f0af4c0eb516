"""Benchmark: `gpufleet validate` against `check-jsonschema` on the same 200 fleet files.

Generates 200 fleet files (about a quarter invalid), then times each tool as a whole command
(process start included, as a pre-commit hook runs it) several times and prints the medians
and their ratio. Target (issue 60): gpufleet <= 0.2x check-jsonschema.

Both run with their bytecode cached, as installed tools do: check-jsonschema's comes with
its wheel; gpufleet's is written by the warm-up run even where PYTHONDONTWRITEBYTECODE is
set (some CI images set it, and recompiling gpufleet's modules on every run would be
timed against a tool that does not).

    python bench/validate.py [--files 200] [--rounds 7] [--smoke]
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from measured import USER_ENV

ROOT = Path(__file__).resolve().parent.parent
GPUS = ["H100:8", "A100:80GB:8", "B200:8", "L4", "24GB..:2", "A10G,A100", "nvidia:1..4"]
BAD = [
    "  memroy: 1TB\n",            # unknown key (both tools)
    "  gpu: A100::8\n",           # grammar error (gpufleet only)
    "  cpu: 8..1\n",              # range order (gpufleet only)
    "  disk: [100GB]\n",          # wrong type (both tools)
]


def make_files(folder: Path, count: int) -> list[Path]:
    files = []
    for i in range(count):
        text = (
            "# yaml-language-server: $schema=fleet.schema.json\n"
            f"type: fleet\nname: fleet-{i}\nnodes: {1 + i % 8}\n"
            f"placement: {'cluster' if i % 2 else 'any'}\n"
            f"backends: [{['aws', 'gcp', 'azure'][i % 3]}]\n"
            f"spot_policy: {['auto', 'spot', 'on-demand'][i % 3]}\n"
            f"max_price: {10 + i % 50}\n"
            "idle_duration: 2h\n"
            "tags:\n  team: ml\n  project: bench\n"
            "resources:\n"
            f"  gpu: {GPUS[i % len(GPUS)]}\n"
            "  memory: 64GB..\n"
        )
        if i % 4 == 3:
            text += BAD[(i // 4) % len(BAD)]
        path = folder / f"fleet-{i:03d}.dstack.yml"
        path.write_text(text)
        files.append(path)
    return files


ENV = USER_ENV


def timed(cmd: list[str]) -> float:
    start = time.perf_counter()
    subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False,
                   env=ENV)
    return time.perf_counter() - start


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--files", type=int, default=200)
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--smoke", action="store_true",
                    help="10 files, one round: proves the benchmark still runs (CI)")
    args = ap.parse_args()
    if args.smoke:
        args.files, args.rounds = 10, 1
    bindir = Path(sys.executable).parent
    gpufleet = shutil.which("gpufleet", path=str(bindir)) or "gpufleet"
    cjs = shutil.which("check-jsonschema", path=str(bindir)) or "check-jsonschema"
    schema = ROOT / "schemas" / "fleet.schema.json"
    with tempfile.TemporaryDirectory() as tmp:
        files = [str(p) for p in make_files(Path(tmp), args.files)]
        ours = [gpufleet, "validate", *files]
        theirs = [cjs, "--schemafile", str(schema), "--base-uri", schema.as_uri(), *files]
        timed(ours), timed(theirs)  # warm the page cache and .pyc files
        a, b = [], []
        for _ in range(args.rounds):
            a.append(timed(ours))
            b.append(timed(theirs))
    ma, mb = statistics.median(a), statistics.median(b)
    print(f"files: {args.files}, rounds: {args.rounds}")
    print(f"gpufleet validate     median {ma * 1000:8.1f} ms  (schema + grammar + rules, "
          "line:col)")
    print(f"check-jsonschema      median {mb * 1000:8.1f} ms  (schema only, no positions)")
    print(f"ratio gpufleet/check-jsonschema: {ma / mb:.2f}  (target <= 0.20)")


if __name__ == "__main__":
    main()
