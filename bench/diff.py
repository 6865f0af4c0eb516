"""Benchmark: `gpufleet diff` of a large stack export.

Writes an export (deployment v3) of a stack of N resources made by the real program, then,
in a fresh process, times the whole offline diff of the unchanged YAML against it (parse,
validate, offers, plan, the program under seeded mocks, comparison) and prints time, peak
RSS and the change counts. Target (drift issue): <= 5 s for a 5,000-resource export.

    python bench/diff.py [--resources 5000] [--backend gcp|aws]
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


def child(yaml_file: str, export_file: str) -> None:
    import gpufleet.components.aws
    import gpufleet.components.gcp  # noqa: F401
    from gpufleet.input.validate import validate_paths
    from gpufleet.offers.catalog import load_catalog
    from gpufleet.review.diff import GuardOptions, offline_diff
    from gpufleet.review.state import parse_export

    start = time.perf_counter()
    state = parse_export(Path(export_file).read_text())
    validated = validate_paths([yaml_file])
    report, diags = offline_diff(validated, load_catalog(), [yaml_file], state, None, None,
                                 GuardOptions())
    elapsed = time.perf_counter() - start
    assert report is not None, diags
    print(json.dumps({"seconds": elapsed, "resources": len(state.resources),
                      "counts": report.counts(),
                      "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--resources", type=int, default=5000)
    ap.add_argument("--backend", default="gcp", choices=sorted(FLEET))
    ap.add_argument("--child", nargs=2, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        child(*args.child)
        return
    from gpufleet.components.harness import deployment_v3
    from gpufleet.review.plan import run_offline

    body, fixed = FLEET[args.backend]
    nodes = max(1, args.resources - fixed)
    with tempfile.TemporaryDirectory() as tmp:
        yaml_file = Path(tmp) / "fleet.yml"
        yaml_file.write_text(f"type: fleet\nname: bench\nnodes: {nodes}\n" + body)
        t = time.perf_counter()
        data = deployment_v3(run_offline([str(yaml_file)], "bench", None, None,
                                         record_outputs=True), "bench", "gpufleet")
        made = time.perf_counter() - t
        export_file = Path(tmp) / "export.json"
        export_file.write_text(json.dumps(data))
        out = subprocess.run([sys.executable, __file__, "--child", str(yaml_file),
                              str(export_file)], capture_output=True, text=True, check=True)
        result = json.loads(out.stdout.strip().splitlines()[-1])
    print(f"backend {args.backend}: export of {result['resources']} resources "
          f"({len(json.dumps(data)) // 1024} KiB), made in {made:.1f} s")
    print(f"gpufleet diff: {result['seconds']:.2f} s, peak RSS {result['peak_rss_mb']:.0f} MB, "
          f"changes {result['counts']}  (target <= 5 s)")


if __name__ == "__main__":
    main()
