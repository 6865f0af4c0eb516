"""Benchmark: `gpufleet diff` of a large stack export, incremental and full.

Writes N fleets and their offers lock, an export (deployment v3) of the stack the real
program makes from them (about --resources resources), then, in a fresh process per case,
times the whole offline diff (parse the export, validate, lock, offers, plan, the program
for the fleets that must run, comparison) for:

  unchanged  the same YAML            (target <= 2 s: no fleet runs again)
  changed    --changed fleets edited  (target <= 5 s: only those fleets run again)
  full       the same edit, --full    (every fleet runs, as before the input digests)

Imports are done before the clock starts. Prints time, peak RSS and change counts.

    python bench/diff.py [--fleets 20] [--resources 5000] [--changed 1] [--backend gcp|aws]
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

FLEET = {
    "gcp": ("placement: cluster\nbackends: [gcp]\nspot_policy: auto\nresources:\n"
            "  gpu: B200:8\n", 25),
    "aws": ("placement: cluster\nbackends: [aws]\nregions: [us-east-1]\nresources:\n"
            "  gpu: L40S:8\n", 17),
}


def fleet_yaml(i: int, nodes: int, backend: str) -> str:
    return f"type: fleet\nname: bench-{i:02d}\nnodes: {nodes}\n" + FLEET[backend][0]


def child(folder: str, export_file: str, full: bool) -> None:
    import gpufleet.components.aws
    import gpufleet.components.gcp  # noqa: F401
    from gpufleet.components.run.diff import offline_diff
    from gpufleet.input import load_lock, validate_paths
    from gpufleet.offers import load_catalog
    from gpufleet.review import GuardOptions, parse_export

    start = time.perf_counter()
    state = parse_export(Path(export_file).read_text())
    paths = [folder]
    validated = validate_paths(paths)
    lock, _ = load_lock(str(Path(folder) / "gpufleet.lock"))
    report, diags = offline_diff(validated, load_catalog(), paths, state, None, None,
                                 GuardOptions(), lock, locked=True, full=full)
    elapsed = time.perf_counter() - start
    assert report is not None, diags
    ran = sum(1 for n in report.notes if ": run (" in n) if not full else None
    print(json.dumps({"seconds": elapsed, "resources": len(state.resources),
                      "counts": report.counts(), "ran": ran,
                      "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))


def measure(folder: Path, export_file: Path, full: bool = False) -> dict[str, object]:
    args = [sys.executable, __file__, "--child", str(folder), str(export_file)]
    out = subprocess.run(args + (["--full"] if full else []), capture_output=True, text=True)
    if out.returncode != 0:
        raise SystemExit(f"the measured run failed:\n{out.stderr}")
    result: dict[str, object] = json.loads(out.stdout.strip().splitlines()[-1])
    return result


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--fleets", type=int, default=20)
    ap.add_argument("--resources", type=int, default=5000)
    ap.add_argument("--changed", type=int, default=1)
    ap.add_argument("--backend", default="gcp", choices=sorted(FLEET))
    ap.add_argument("--child", nargs=2, help=argparse.SUPPRESS)
    ap.add_argument("--full", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        child(*args.child, args.full)
        return
    from gpufleet.cli import main as gpufleet
    from gpufleet.compile import compile_inputs
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
        data = deployment_v3(run_offline([str(folder)], "bench", None, None, compiled,
                                         record_outputs=True), "bench", "gpufleet")
        made = time.perf_counter() - t
        export_file = Path(tmp) / "export.json"
        export_file.write_text(json.dumps(data))
        size = export_file.stat().st_size // 1024
        unchanged = measure(folder, export_file)
        for i in range(args.changed):  # one node less in each changed fleet
            (folder / f"f{i:02d}.yml").write_text(fleet_yaml(i, nodes - 1, args.backend))
        changed = measure(folder, export_file)
        full = measure(folder, export_file, full=True)
    print(f"backend {args.backend}: {args.fleets} fleets x {nodes} nodes, export of "
          f"{unchanged['resources']} resources ({size} KiB), made in {made:.1f} s")
    print(f"unchanged YAML:            {unchanged['seconds']:.2f} s, peak RSS "
          f"{unchanged['peak_rss_mb']:.0f} MB, fleets run {unchanged['ran']}, "
          f"changes {unchanged['counts']}  (target <= 2 s)")
    print(f"{args.changed} fleet(s) changed:        {changed['seconds']:.2f} s, peak RSS "
          f"{changed['peak_rss_mb']:.0f} MB, fleets run {changed['ran']}, "
          f"changes {changed['counts']}  (target <= 5 s)")
    print(f"same change, --full:       {full['seconds']:.2f} s, peak RSS "
          f"{full['peak_rss_mb']:.0f} MB, changes {full['counts']}")


if __name__ == "__main__":
    main()
