"""Benchmark: `gpufleet diff` of a large stack export, incremental and full.

Writes N fleets and their offers lock, an export (deployment v3) of the stack the real
program makes from them (about --resources resources), then times the whole command,
`gpufleet diff FOLDER --state EXPORT --locked --format json`, as a fresh process per case
(start-up and imports included, as CI runs it), the median of --rounds, for:

  unchanged  the same YAML            (target <= 1 s: no fleet runs, no Pulumi SDK import)
  changed    --changed fleets edited  (target <= 1.5 s: only those fleets run again)
  full       the same edit, --full    (target <= 3 s: every fleet runs, nodes derived)

Prints time, peak RSS, the fleets run and change counts of each.

    python bench/diff.py [--fleets 20] [--resources 5000] [--changed 1] [--backend gcp|aws]
                         [--rounds 3] [--smoke]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import cast

from measured import USER_ENV, run_measured

FLEET = {
    "gcp": ("placement: cluster\nbackends: [gcp]\nspot_policy: auto\nresources:\n"
            "  gpu: B200:8\n", 25),
    "aws": ("placement: cluster\nbackends: [aws]\nregions: [us-east-1]\nresources:\n"
            "  gpu: L40S:8\n", 17),
}
ENV = USER_ENV


def fleet_yaml(i: int, nodes: int, backend: str) -> str:
    return f"type: fleet\nname: bench-{i:02d}\nnodes: {nodes}\n" + FLEET[backend][0]


def measure(folder: Path, export_file: Path, full: bool = False, rounds: int = 1
            ) -> dict[str, object]:
    """``rounds`` `gpufleet diff` processes: the median wall time, the peak RSS of the
    median one, what the report says (the same every round)."""
    runs = sorted((measure_once(folder, export_file, full) for _ in range(rounds)),
                  key=lambda m: cast(float, m["seconds"]))
    return runs[len(runs) // 2]


def measure_once(folder: Path, export_file: Path, full: bool = False) -> dict[str, object]:
    """One `gpufleet diff` process: wall time, its own peak RSS, what the report says."""
    cmd = [sys.executable, "-m", "gpufleet", "diff", str(folder), "--state",
           str(export_file), "--locked", "--format", "json"] + (["--full"] if full else [])
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        m = run_measured(cmd, stdout=out, stderr=err, env=ENV)
        out.seek(0)
        err.seek(0)
        if m.code not in (0, 7):  # 7: changes found
            raise SystemExit(f"the measured run failed ({m.code}):\n{err.read().decode()}")
        report = json.loads(out.read())
    notes = report["notes"]
    return {"seconds": m.seconds, "peak_rss_mb": m.peak_mb,
            "counts": report["summary"], "ran": sum(": run (" in n for n in notes),
            "resources": sum(report["summary"].values())}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--fleets", type=int, default=20)
    ap.add_argument("--resources", type=int, default=5000)
    ap.add_argument("--changed", type=int, default=1)
    ap.add_argument("--backend", default="gcp", choices=sorted(FLEET))
    ap.add_argument("--rounds", type=int, default=3, help="processes per case (the median)")
    ap.add_argument("--smoke", action="store_true",
                    help="3 fleets, 120 resources, one round: proves the benchmark still runs")
    args = ap.parse_args()
    if args.smoke:
        args.fleets, args.resources, args.rounds = 3, 120, 1
    from gpufleet.cli import main as gpufleet
    from gpufleet.compile import compile_inputs
    from gpufleet.compile.runs import RunInputs
    from gpufleet.components.run.harness import deployment_v3
    from gpufleet.components.run.plan import run_offline
    from gpufleet.input import load_lock, validate_paths
    from gpufleet.offers import load_catalog

    fixed = FLEET[args.backend][1]
    nodes = max(1, args.resources // args.fleets - fixed)
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp) / "fleets"
        folder.mkdir()
        for i in range(args.fleets):
            (folder / f"f{i:02d}.yml").write_text(fleet_yaml(i, nodes, args.backend))
        assert gpufleet(["lock", str(folder)]) == 0
        lock, _ = load_lock(str(folder / "gpufleet.lock"))
        t = time.perf_counter()
        compiled = compile_inputs(validate_paths([str(folder)]).inputs, load_catalog(), None,
                                  lock, locked=True)
        data = deployment_v3(run_offline(RunInputs((str(folder),), stack="bench"), compiled,
                                         record_outputs=True), "bench", "gpufleet")
        made = time.perf_counter() - t
        export_file = Path(tmp) / "export.json"
        export_file.write_text(json.dumps(data))
        size = export_file.stat().st_size // 1024
        measure(folder, export_file)  # warm: bytecode and the page cache
        unchanged = measure(folder, export_file, rounds=args.rounds)
        for i in range(args.changed):  # one node less in each changed fleet
            (folder / f"f{i:02d}.yml").write_text(fleet_yaml(i, nodes - 1, args.backend))
        changed = measure(folder, export_file, rounds=args.rounds)
        full = measure(folder, export_file, full=True, rounds=args.rounds)
    print(f"backend {args.backend}: {args.fleets} fleets x {nodes} nodes, median of "
          f"{args.rounds} processes per case, export of "
          f"{unchanged['resources']} resources ({size} KiB), made in {made:.1f} s")
    print(f"unchanged YAML:            {unchanged['seconds']:.2f} s, peak RSS "
          f"{unchanged['peak_rss_mb']:.0f} MB, fleets run {unchanged['ran']}, "
          f"changes {unchanged['counts']}  (target <= 1 s)")
    print(f"{args.changed} fleet(s) changed:        {changed['seconds']:.2f} s, peak RSS "
          f"{changed['peak_rss_mb']:.0f} MB, fleets run {changed['ran']}, "
          f"changes {changed['counts']}  (target <= 1.5 s)")
    print(f"same change, --full:       {full['seconds']:.2f} s, peak RSS "
          f"{full['peak_rss_mb']:.0f} MB, fleets run all, changes {full['counts']}  "
          "(target <= 3 s)")


if __name__ == "__main__":
    main()
