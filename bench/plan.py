"""Benchmark: `gpufleet plan` against the bare Pulumi SDK floor, per fleet size.

For each size, a child process runs the whole offline plan (validate, offers, plan, the
stack program under mocks, JSON rendering) on one fleet of N nodes; another child replays
the very same registrations (same count, types, names, parents and inputs) through the
bare SDK (the generated provider classes and plain ComponentResources) under the same mock
monitor, without gpufleet. Both children import everything first and do two untimed
warm-up runs of the same work at 10 nodes (the SDK fills per-class type caches on first
use), then time the real run. Each size is measured --rounds times; medians are printed.
gpufleet registers a fleet's first nodes and derives the others (components/run/derive.py,
proven byte-identical by tests/test_derived_nodes.py); the floor registers every one.
Targets (performance issue): below 0.2x the floor at 1,000 nodes. Then one --big fleet
(default 16,000 AWS L4 nodes, no floor: it would register every node) is planned whole,
start-up included: within 10 s and 400 MB.

    python bench/plan.py [--backend gcp|aws|azure] [--sizes 10,100,1000] [--big 16000]
                         [--smoke]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from measured import run_measured

# Shapes that scale to 5,000 nodes: GCP A4 (10 NICs per node) in a cluster; AWS g6e (one
# ENA; 5,000 p5 nodes x 32 interfaces would not fit one subnet, which plan refuses); Azure
# plain VMs (a scale set is one resource whatever its size, and caps at 300 nodes).
FLEETS = {
    "gcp": "placement: cluster\nbackends: [gcp]\nspot_policy: auto\nresources:\n"
           "  gpu: B200:8\n",
    "aws": "placement: cluster\nbackends: [aws]\nregions: [us-east-1]\nresources:\n"
           "  gpu: L40S:8\n",
    "azure": "backends: [azure]\nregions: [eastus]\nresources:\n  gpu: T4:1\n",
}
BACKENDS_FILE = ("backends:\n  - type: azure\n    ssh_public_key: ssh-ed25519 AAAAbench bench\n")


def fleet_file(folder: Path, backend: str, nodes: int) -> str:
    path = folder / f"{backend}-{nodes}.yml"
    path.write_text(f"type: fleet\nname: bench\nnodes: {nodes}\n" + FLEETS[backend]
                    + "---\n" + BACKENDS_FILE)
    return str(path)


WARMUP_NODES, WARMUP_RUNS = 10, 2
NODE = re.compile(r"-node-(\d+)$")


def child_gpufleet(path: str, dump: str, backend: str) -> dict[str, Any]:
    import gpuhunt  # noqa: F401  (imports are not per-node work: warm them, as for the floor)
    import jsonschema  # noqa: F401
    import referencing  # noqa: F401

    from gpufleet.cli.runs import build_report
    from gpufleet.input.validate import validate_paths
    from gpufleet.offers.catalog import load_catalog
    from gpufleet.views.plan import render_plan_json

    warm(f"gpufleet.components.{backend}")  # only this backend's SDK, as for the floor
    small = str(Path(path).with_name("warmup.yml"))
    Path(small).write_text(re.sub(r"^nodes: \d+$", f"nodes: {WARMUP_NODES}",
                                  Path(path).read_text(), count=1, flags=re.M))
    for _ in range(WARMUP_RUNS):
        report, _ = build_report(validate_paths([small]), load_catalog(), [small], "bench",
                                 None, None)
        assert report is not None

    start = time.perf_counter()
    validated = validate_paths([path])
    report, diags = build_report(validated, load_catalog(), [path], "bench", None, None)
    assert report is not None, diags
    render_plan_json(report)
    elapsed = time.perf_counter() - start
    if dump:
        Path(dump).write_text(json.dumps(list(report.resources)))
    return {"seconds": elapsed, "resources": len(report.resources)}


BIG_FLEET = "backends: [aws]\nregions: [us-east-1]\nresources:\n  gpu: L4\n"


def big(folder: Path, nodes: int) -> dict[str, Any]:
    """`gpufleet plan --format json` of one fleet of ``nodes``, the whole process timed."""
    path = folder / "big"
    path.mkdir()
    (path / "fleet.dstack.yml").write_text(f"type: fleet\nname: big\nnodes: {nodes}\n"
                                           + BIG_FLEET)
    (path / "backends.yml").write_text("access:\n  ssh_public_key: ssh-ed25519 AAAAbench bench\n"
                                       "backends:\n  - type: aws\n")
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    with tempfile.TemporaryFile() as out:
        m = run_measured([sys.executable, "-m", "gpufleet", "plan", "--format", "json",
                          str(path)], stdout=out, stderr=subprocess.DEVNULL, env=env)
        if m.code != 0:
            raise SystemExit(f"gpufleet plan of {nodes} nodes failed")
        out.seek(0)
        resources = len(json.loads(out.read())["resources"])
    return {"seconds": m.seconds, "peak_rss_mb": m.peak_mb, "resources": resources}


def _snake(name: str) -> str:
    return "".join(f"_{c.lower()}" if c.isupper() else c for c in name)


def resource_class(token: str) -> Any:
    """`gcp:compute/instance:Instance` -> pulumi_gcp.compute.Instance (the generated class)."""
    import importlib

    pkg, mod, cls = token.split(":")
    module = importlib.import_module(f"pulumi_{pkg.replace('-', '_')}.{mod.split('/')[0]}"
                                     if mod not in ("index", "") else
                                     f"pulumi_{pkg.replace('-', '_')}")
    return getattr(module, cls)


def warm(module: str) -> None:
    """Import a component module and the provider submodules it uses, outside the timing."""
    import importlib
    import re

    mod = importlib.import_module(module)
    first = Path(str(mod.__file__))  # a package: every module of its folder
    files = sorted(first.parent.glob("*.py")) if first.name == "__init__.py" else [first]
    src = "\n".join(f.read_text() for f in files)
    pkg = {"gcp": "pulumi_gcp", "aws": "pulumi_aws", "azure": "pulumi_azure_native"}[
        module.rsplit(".", 1)[1]]
    alias = {"pulumi_gcp": "gcp", "pulumi_aws": "aws", "pulumi_azure_native": "azure_native"}
    subs = set(re.findall(rf"\b{alias[pkg]}\.([a-z_0-9]+)\.", src))
    for line in re.findall(rf"^from {pkg} import (.+)$", src, re.M):
        subs.update(s.strip() for s in line.split(","))
    for sub in sorted(subs):
        lazy = importlib.import_module(f"{pkg}.{sub}")
        getattr(lazy, "__all__", None)  # SDK submodules load on first attribute access


def child_floor(dump: str) -> dict[str, Any]:
    import pulumi

    from gpufleet.components.run import harness

    regs = json.loads(Path(dump).read_text())
    regs.sort(key=lambda r: (r["urn"].count("$"), r["urn"]))  # parents first
    classes = {r["type"]: resource_class(r["type"]) for r in regs
               if r["custom"] and not r["type"].startswith("pulumi:providers:")}
    providers = {r["type"]: resource_class(r["type"].split(":")[-1] + ":index:Provider")
                 for r in regs if r["type"].startswith("pulumi:providers:")}

    def replay(regs: list[dict[str, Any]]) -> None:
        made: dict[str, pulumi.Resource] = {}
        for r in regs:
            parent = made.get(r["parent"])
            kwargs = {_snake(k): v for k, v in r["inputs"].items()}
            if r["type"] in providers:
                made[r["urn"]] = providers[r["type"]](r["name"], **kwargs)
            elif r["custom"]:
                prov = made.get(r["provider"].rsplit("::", 1)[0])
                opts = pulumi.ResourceOptions(parent=parent, provider=prov)
                made[r["urn"]] = classes[r["type"]](r["name"], opts=opts, **kwargs)
            else:
                opts = pulumi.ResourceOptions(parent=parent)
                made[r["urn"]] = pulumi.ComponentResource(r["type"], r["name"], None, opts)

    warmup = [r for r in regs
              if not (m := NODE.search(r["name"])) or int(m.group(1)) < WARMUP_NODES]
    for _ in range(WARMUP_RUNS):
        harness.run_program(lambda: replay(warmup), {}, harness.StrictMocks({}),
                            stack="bench")
    start = time.perf_counter()
    run = harness.run_program(lambda: replay(regs), {}, harness.StrictMocks({}),
                              stack="bench")
    elapsed = time.perf_counter() - start
    assert len(run.registrations) == len(regs)
    return {"seconds": elapsed, "resources": len(regs)}


def measure(args: list[str]) -> dict[str, Any]:
    out = subprocess.run([sys.executable, __file__, *args], capture_output=True, text=True,
                         check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--backend", default="gcp", choices=sorted(FLEETS))
    ap.add_argument("--sizes", default="10,100,1000")
    ap.add_argument("--big", type=int, default=16000,
                    help="nodes of the one fleet planned whole, without a floor (0: none)")
    ap.add_argument("--smoke", action="store_true",
                    help="10 nodes, one round, a 100-node --big: proves the benchmark runs")
    ap.add_argument("--rounds", type=int, default=3,
                    help="measurements per size up to 1,000 nodes (larger sizes: 1)")
    ap.add_argument("--child", nargs="*", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        kind, *rest = args.child
        result = child_gpufleet(*rest) if kind == "gpufleet" else child_floor(*rest)
        result["peak_rss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        print(json.dumps(result))
        return
    if args.smoke:
        args.sizes, args.rounds, args.big = "10", 1, 100
    sizes = [int(s) for s in args.sizes.split(",")]
    print(f"backend {args.backend}: one fleet of N nodes")
    print(f"{'nodes':>6} {'resources':>9} {'gpufleet s':>10} {'floor s':>8} {'ratio':>6} "
          f"{'ms/node':>8} {'RSS MB':>7} {'floor RSS':>9}")
    per_node = {}
    ratios = {}
    with tempfile.TemporaryDirectory() as tmp:
        for n in sizes:
            path = fleet_file(Path(tmp), args.backend, n)
            dump = os.path.join(tmp, f"regs-{n}.json")
            rounds = args.rounds if n <= 1000 else 1
            runs = [(measure(["--child", "gpufleet", path, dump, args.backend]),
                     measure(["--child", "floor", dump])) for _ in range(rounds)]
            ours = {k: statistics.median(r[0][k] for r in runs)
                    for k in ("seconds", "resources", "peak_rss_mb")}
            floor = {k: statistics.median(r[1][k] for r in runs)
                     for k in ("seconds", "peak_rss_mb")}
            per_node[n] = ours["seconds"] / n * 1000
            ratios[n] = ours["seconds"] / floor["seconds"]
            print(f"{n:>6} {ours['resources']:>9.0f} {ours['seconds']:>10.2f} "
                  f"{floor['seconds']:>8.2f} {ours['seconds'] / floor['seconds']:>6.2f} "
                  f"{per_node[n]:>8.2f} {ours['peak_rss_mb']:>7.0f} "
                  f"{floor['peak_rss_mb']:>9.0f}")
    flat = [v for k, v in per_node.items() if k >= 100]
    if len(flat) > 1:
        mean = sum(flat) / len(flat)
        print(f"time per node from 100 up: {min(flat):.2f}..{max(flat):.2f} ms, mean "
              f"{mean:.2f}: flat is no longer the aim, derived nodes cost less each")
    largest = max(ratios)
    print(f"ratio at {largest:,} nodes: {ratios[largest]:.2f}x the floor (target < 0.20 at "
          "1,000)")
    if args.big:
        with tempfile.TemporaryDirectory() as tmp:
            b = big(Path(tmp), args.big)
        print(f"one fleet of {args.big:,} nodes ({b['resources']:,} resources), whole "
              f"process: {b['seconds']:.2f} s, peak RSS {b['peak_rss_mb']:.0f} MB "
              "(target <= 10 s, 400 MB)")


if __name__ == "__main__":
    main()
