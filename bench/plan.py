"""Benchmark: `gpufleet plan` against the bare Pulumi SDK floor, per fleet size.

One fleet of N nodes (a folder with its fleet file and backends file, which `gpufleet
validate` accepts: the children check it) is planned three ways and compared with the
floor, a program that registers the very same resources (same count, types, names, parents
and inputs: replayed from gpufleet's run) through the bare SDK (the generated provider
classes and plain ComponentResources) under the same mock monitor, without gpufleet:

  derived     what `gpufleet plan` does: a fleet's first nodes registered, the others
              derived from them (components/run/derive.py, proven byte-identical by
              tests/test_derived_nodes.py); the floor registers every one;
  every node  every node registered (derivation off), so the ratio is gpufleet's own
              overhead per resource: as whole processes, the program `pulumi up` runs
              (stacks/__main__.py on a locked copy of the folder: files, lock and key from
              the stack config) is the judged figure, `gpufleet plan` with every node
              registered (the program, its policy rules and the JSON) is printed beside it.

In-process, per size: each child imports everything and does two untimed warm-up runs at
10 nodes (the SDK fills per-class type caches on first use; the floor gets the same), then
clears every cache of gpufleet's own (catalog, offers, schemas: as a single run has them
cold) and times validate, offers, the program under mocks and the JSON. Whole processes, at
the largest size: `gpufleet plan --format json`, the stack program, the plan pipeline with
every node registered, and the floor's program, each a fresh process timed from its start
to its exit, each with the cyclic collector off (as `gpufleet plan` runs: a one-shot
command turns it off; the floor with it on took 0.3-0.9 s more at 1,000 nodes) and each
exiting without the interpreter's last collections (as gpufleet's CLI and its program on
`pulumi up`'s path exit, ``gpufleet.exiting``; the floor with them took 1.0 s more),
cold as a user's next plan of new inputs is: no run cached, the provider SDKs' type indexes
an earlier run wrote (bench/measured.py's `cold_env`; the first run's cost is
bench/startup.py's "first run"). Medians of --rounds. Targets (issue 60): derived <= 0.15x
the floor at 1,000 nodes as whole processes; every node <= 1.1x. Then one --big fleet
(default 16,000 AWS L4 nodes, no floor) is planned whole: within 10 s and 400 MB.

    python bench/plan.py [--backend gcp|aws|azure] [--sizes 10,100,1000] [--big 16000]
                         [--rounds 3] [--smoke]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from measured import USER_ENV, cold_env, forget_runs, run_measured

ROOT = Path(__file__).resolve().parent.parent

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
BACKENDS = {
    "gcp": "  - type: gcp\n    project_id: bench-project\n",
    "aws": "  - type: aws\n",
    "azure": "  - type: azure\n    subscription_id: 00000000-0000-0000-0000-000000000000\n"
             "    tenant_id: 00000000-0000-0000-0000-000000000000\n",
}
ACCESS = "access:\n  ssh_public_key: ssh-ed25519 AAAAbench bench\nbackends:\n"
OFF = {**USER_ENV, "GPUFLEET_CACHE": "off"}  # the in-process children: no cache at all
# the whole processes: a cold run as a user's next plan of new inputs has it
# (measured.cold_env: no run cached, the SDKs' type indexes a first run wrote; it writes its
# run entry as a user's does); main() sets its folder
COLD = dict(OFF)


def fleet_folder(root: Path, backend: str, nodes: int) -> str:
    """A folder `gpufleet plan` reads: the fleet file and the backends file."""
    path = root / f"{backend}-{nodes}"
    path.mkdir()
    (path / "fleet.dstack.yml").write_text(f"type: fleet\nname: bench\nnodes: {nodes}\n"
                                           + FLEETS[backend])
    (path / "backends.yml").write_text(ACCESS + BACKENDS[backend])
    return str(path)


WARMUP_NODES, WARMUP_RUNS = 10, 2
NODE = re.compile(r"-node-(\d+)$")


def clear_caches() -> None:
    """Every functools cache of gpufleet's modules emptied: the timed run finds the
    catalog, offer tables and schemas as a single run does, cold."""
    for name, module in list(sys.modules.items()):
        if name.startswith("gpufleet") and module is not None:
            for value in list(vars(module).values()):
                if callable(getattr(value, "cache_clear", None)):
                    value.cache_clear()


def gpufleet_report(folder: str, every_node: bool) -> Any:
    """The plan report of ``folder`` through the CLI's own path (validation must pass),
    with every node registered when ``every_node``."""
    from functools import partial

    from gpufleet.cli.runcache import cached
    from gpufleet.cli.runs import _components, build_report
    from gpufleet.compile.runs import RunInputs
    from gpufleet.components.run import plan as offline_plan
    from gpufleet.components.run.policy import run_rules
    from gpufleet.input.validate import validate_paths
    from gpufleet.offers.catalog import load_catalog
    from gpufleet.review import pipeline

    validated = validate_paths([folder])
    errors = [d for d in validated.diagnostics if d.is_error]
    assert not errors, [d.message for d in errors]
    if not every_node:
        report, diags = build_report(validated, load_catalog(), [folder], "bench", None, None)
    else:
        run = RunInputs((folder,), load_catalog(), None, None, "bench", None, False, {})
        program = cached(lambda: partial(offline_plan.registered, sample=False),
                         _components())
        report, diags = pipeline.plan(validated, run, program, run_rules)
    assert report is not None, [d.message for d in diags]
    return report


def child_gpufleet(folder: str, dump: str, every: str) -> dict[str, Any]:
    """In-process: warm imports and SDK type caches at 10 nodes, clear gpufleet's caches,
    time the plan (validate, offers, program, JSON)."""
    import gpuhunt  # noqa: F401  (imports are not per-node work: warm them, as for the floor)

    from gpufleet.views.plan import render_plan_json

    small = Path(folder).with_name("warmup")
    if not small.exists():
        small.mkdir()
        for f in Path(folder).iterdir():
            (small / f.name).write_text(re.sub(r"^nodes: \d+$", f"nodes: {WARMUP_NODES}",
                                               f.read_text(), count=1, flags=re.M))
    for _ in range(WARMUP_RUNS):
        gpufleet_report(str(small), every == "every")
    clear_caches()
    start = time.perf_counter()
    report = gpufleet_report(folder, every == "every")
    render_plan_json(report)
    elapsed = time.perf_counter() - start
    if dump:
        Path(dump).write_text(json.dumps(list(report.resources)))
    return {"seconds": elapsed, "resources": len(report.resources)}


def child_every_node_process(folder: str) -> None:
    """Whole process: `gpufleet plan --format json` with every node registered, in the
    process `gpufleet plan` has (a one-shot command: the cyclic collector off, as
    gpufleet.cli.app.main turns it off; the floor's and the program's processes turn it off
    too, so the three are timed alike)."""
    import gc

    from gpufleet.cli.app import ONE_SHOT
    from gpufleet.views.plan import render_plan_json

    if "plan" in ONE_SHOT:
        gc.disable()
    sys.stdout.write(render_plan_json(gpufleet_report(folder, True)))


def locked_copy(folder: str) -> str:
    """``folder`` and its `gpufleet lock`, in a folder beside it: what `pulumi up` reads
    (the stack program takes each fleet's offer from the lock only)."""
    locked = f"{folder}-locked"
    shutil.copytree(folder, locked)
    subprocess.run([sys.executable, "-m", "gpufleet", "lock", locked], check=True,
                   capture_output=True, env=OFF)
    return locked


def child_program_process(folder: str, dump: str) -> None:
    """Whole process: the stack program as `pulumi up` runs it (stacks/__main__.py: the
    files and the lock named by the stack config, validated and compiled in the program,
    every node registered), under the floor's mock monitor, the collector off as in the
    other whole processes; it must register what the floor replays (``dump``)."""
    import gc

    gc.disable()
    from gpufleet.compile.runs import RunInputs
    from gpufleet.components.run.plan import run_offline

    # no compiled plans: the program reads its stack config and compiles, as under `pulumi up`
    run = run_offline(RunInputs((folder,), stack="bench"))
    assert sorted(r.urn for r in run.registrations) == sorted(r["urn"]
                                                              for r in _registrations(dump))


BIG_FLEET = "backends: [aws]\nregions: [us-east-1]\nresources:\n  gpu: L4\n"


def big(folder: Path, nodes: int) -> dict[str, Any]:
    """`gpufleet plan --format json` of one fleet of ``nodes``, the whole process timed."""
    path = folder / "big"
    path.mkdir()
    (path / "fleet.dstack.yml").write_text(f"type: fleet\nname: big\nnodes: {nodes}\n"
                                           + BIG_FLEET)
    (path / "backends.yml").write_text(ACCESS + BACKENDS["aws"])
    with tempfile.TemporaryFile() as out:
        forget_runs(COLD)
        m = run_measured([sys.executable, "-m", "gpufleet", "plan", "--format", "json",
                          str(path)], stdout=out, stderr=subprocess.DEVNULL, env=COLD)
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


def _floor_classes(regs: list[dict[str, Any]]) -> tuple[dict[str, Any], dict[str, Any]]:
    classes = {r["type"]: resource_class(r["type"]) for r in regs
               if r["custom"] and not r["type"].startswith("pulumi:providers:")}
    providers = {r["type"]: resource_class(r["type"].split(":")[-1] + ":index:Provider")
                 for r in regs if r["type"].startswith("pulumi:providers:")}
    return classes, providers


def replay(regs: list[dict[str, Any]], classes: dict[str, Any],
           providers: dict[str, Any], wired: bool = False) -> None:
    """The floor's program: each registration made with the bare SDK's own class. With
    ``wired``, each input that came from other resources is passed as an Output of those
    resources (resolving to the same value), as a program that builds them together
    passes it: the SDK then waits for them as it does in gpufleet's program."""
    import pulumi

    made: dict[str, pulumi.Resource] = {}
    for r in regs:
        parent = made.get(r["parent"])
        kwargs = {_snake(k): v for k, v in r["inputs"].items()}
        for prop, urns in (r.get("property_dependencies") or {}).items() if wired else ():
            deps = [made[u].urn for u in urns if u in made]
            if deps and prop in r["inputs"]:
                kwargs[_snake(prop)] = pulumi.Output.all(*deps).apply(
                    lambda _, value=r["inputs"][prop]: value)
        if r["type"] in providers:
            made[r["urn"]] = providers[r["type"]](r["name"], **kwargs)
        elif r["custom"]:
            prov = made.get(r["provider"].rsplit("::", 1)[0])
            opts = pulumi.ResourceOptions(parent=parent, provider=prov)
            made[r["urn"]] = classes[r["type"]](r["name"], opts=opts, **kwargs)
        else:
            opts = pulumi.ResourceOptions(parent=parent)
            made[r["urn"]] = pulumi.ComponentResource(r["type"], r["name"], None, opts)


def _floor_run(regs: list[dict[str, Any]], classes: dict[str, Any],
               providers: dict[str, Any], wired: bool = False) -> int:
    from gpufleet.components.run import harness

    run = harness.run_program(lambda: replay(regs, classes, providers, wired), {},
                              harness.StrictMocks({}), stack="bench")
    return len(run.registrations)


def _registrations(dump: str) -> list[dict[str, Any]]:
    regs: list[dict[str, Any]] = json.loads(Path(dump).read_text())
    regs.sort(key=lambda r: (r["urn"].count("$"), r["urn"]))  # parents first
    return regs


def child_floor(dump: str, kind: str = "literal") -> dict[str, Any]:
    """In-process: the same warm-ups as gpufleet's child, then the timed replay."""
    regs = _registrations(dump)
    classes, providers = _floor_classes(regs)
    warmup = [r for r in regs
              if not (m := NODE.search(r["name"])) or int(m.group(1)) < WARMUP_NODES]
    for _ in range(WARMUP_RUNS):
        _floor_run(warmup, classes, providers, kind == "wired")
    start = time.perf_counter()
    count = _floor_run(regs, classes, providers, kind == "wired")
    elapsed = time.perf_counter() - start
    assert count == len(regs)
    return {"seconds": elapsed, "resources": len(regs)}


def child_floor_process(dump: str, kind: str = "literal") -> None:
    """Whole process: a bare-SDK program, importing each service as such a program does
    (`gcp.compute.Instance`: the service package whole), registering every resource; the
    cyclic collector off, as in gpufleet's whole processes (with it on, the floor took
    0.3-0.9 s more at 1,000 nodes, which flattered gpufleet's ratios), and its exit without
    the interpreter's last collections, as gpufleet's program and CLI exit
    (``gpufleet.exiting``: 1.0 s of the floor's 6.4 s at 1,000 nodes, which any program
    can skip so; timed with them, the floor would flatter gpufleet's ratio as much)."""
    import atexit
    import gc

    gc.disable()
    atexit.register(gc.freeze)
    regs = _registrations(dump)
    classes, providers = _floor_classes(regs)
    assert _floor_run(regs, classes, providers, kind == "wired") == len(regs)


def measure(args: list[str]) -> dict[str, Any]:
    out = subprocess.run([sys.executable, __file__, *args], capture_output=True, text=True,
                         check=True, env=OFF)
    return json.loads(out.stdout.strip().splitlines()[-1])


def whole(args: list[str]) -> float:
    """Seconds of one fresh process, start to exit (it must exit 0)."""
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        forget_runs(COLD)
        m = run_measured(args, stdout=out, stderr=err, env=COLD)
        if m.code != 0:
            err.seek(0)
            raise SystemExit(f"{' '.join(args[:5])} failed ({m.code}):\n"
                             f"{err.read().decode()[-2000:]}")
    return m.seconds


def in_process(folder: str, dump: str, rounds: int) -> dict[str, float]:
    """Medians of the in-process children: derived, every node, the floor."""
    runs = [(measure(["--child", "gpufleet", folder, dump, "derived"]),
             measure(["--child", "gpufleet", folder, "", "every"]),
             measure(["--child", "floor", dump, "literal"]),
             measure(["--child", "floor", dump, "wired"])) for _ in range(rounds)]
    return {"resources": runs[0][0]["resources"],
            "derived": statistics.median(r[0]["seconds"] for r in runs),
            "every": statistics.median(r[1]["seconds"] for r in runs),
            "floor": statistics.median(r[2]["seconds"] for r in runs),
            "wired": statistics.median(r[3]["seconds"] for r in runs),
            "rss": statistics.median(r[0]["peak_rss_mb"] for r in runs)}


def whole_processes(folder: str, dump: str, rounds: int, warm: bool = True
                    ) -> dict[str, float]:
    """Medians of fresh processes: `gpufleet plan --format json`, every node, the floor
    (``warm``: after a first, untimed plan; a smoke run's figures are not judged)."""
    py = sys.executable
    cmds = {"derived": [py, "-m", "gpufleet", "plan", "--format", "json", folder],
            "every": [py, __file__, "--child", "every-process", folder],
            "program": [py, __file__, "--child", "program-process", locked_copy(folder), dump],
            "floor": [py, __file__, "--child", "floor-process", dump, "literal"],
            "wired": [py, __file__, "--child", "floor-process", dump, "wired"]}
    times: dict[str, list[float]] = {k: [] for k in cmds}
    if warm:
        whole(cmds["derived"])  # a first run writes the SDKs' type indexes, as Python its .pyc
    for _ in range(rounds):
        for label, cmd in cmds.items():
            times[label].append(whole(cmd))
    return {k: statistics.median(v) for k, v in times.items()}


def run_child(kind: str, rest: list[str]) -> None:
    if kind == "every-process":
        child_every_node_process(*rest)
        return
    if kind == "program-process":
        child_program_process(*rest)
        return
    if kind == "floor-process":
        child_floor_process(*rest)
        return
    result = child_gpufleet(*rest) if kind == "gpufleet" else child_floor(*rest)
    result["peak_rss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(json.dumps(result))


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
        run_child(args.child[0], args.child[1:])
        return
    if args.smoke:
        args.sizes, args.rounds, args.big = "10", 1, 100
    sizes = [int(s) for s in args.sizes.split(",")]
    with tempfile.TemporaryDirectory() as cache:
        COLD.update(cold_env(Path(cache)))
        if not args.smoke:  # the three clouds' indexes (a smoke run's figures are not judged)
            run_measured([sys.executable, "-m", "gpufleet", "plan", str(ROOT / "examples")],
                         stdout=subprocess.DEVNULL, env=COLD)
        measure_all(args, sizes)


def measure_all(args: argparse.Namespace, sizes: list[int]) -> None:
    print(f"backend {args.backend}: one fleet of N nodes; in-process (warm imports, "
          "gpufleet's caches cold)")
    print(f"{'nodes':>6} {'resources':>9} {'derived s':>9} {'every s':>8} {'floor s':>8} "
          f"{'wired s':>8} {'derived/floor':>13} {'every/wired':>11} {'RSS MB':>7}")
    with tempfile.TemporaryDirectory() as tmp:
        for n in sizes:
            folder = fleet_folder(Path(tmp), args.backend, n)
            dump = os.path.join(tmp, f"regs-{n}.json")
            f = in_process(folder, dump, args.rounds if n <= 1000 else 1)
            print(f"{n:>6} {f['resources']:>9.0f} {f['derived']:>9.2f} {f['every']:>8.2f} "
                  f"{f['floor']:>8.2f} {f['wired']:>8.2f} "
                  f"{f['derived'] / f['floor']:>13.2f} {f['every'] / f['wired']:>11.2f} "
                  f"{f['rss']:>7.0f}")
        n = max(sizes)
        w = whole_processes(folder, dump, args.rounds, warm=not args.smoke)
    print(f"whole processes at {n:,} nodes (fresh, no run cached, the collector off in "
          f"each): gpufleet plan {w['derived']:.2f} s, the program `pulumi up` runs "
          f"{w['program']:.2f} s, gpufleet plan with every node registered "
          f"{w['every']:.2f} s, bare-SDK floor {w['floor']:.2f} s (inputs as literals), "
          f"{w['wired']:.2f} s (inputs from other resources as their Outputs)")
    print(f"ratio at {n:,} nodes: {w['derived'] / w['floor']:.2f}x the floor (gpufleet plan, "
          "whole processes, the literal floor; target <= 0.15 at 1,000)")
    print(f"every node at {n:,} nodes: {w['program'] / w['wired']:.2f}x the floor (the "
          "program `pulumi up` runs, whole processes, the floor with its dependencies; "
          f"target <= 1.1 at 1,000); {w['program'] / w['floor']:.2f}x the literal floor")
    print(f"gpufleet plan with every node registered (the program, its policy rules and its "
          f"JSON) at {n:,} nodes: {w['every'] / w['wired']:.2f}x the floor with its "
          "dependencies, whole processes")
    print(f"every node at {n:,} nodes, in-process: {f['every'] / f['wired']:.2f}x the floor "
          f"with its dependencies, {f['every'] / f['floor']:.2f}x the literal one (gpufleet's "
          "own overhead per resource)")
    if args.big:
        with tempfile.TemporaryDirectory() as tmp:
            b = big(Path(tmp), args.big)
        print(f"one fleet of {args.big:,} nodes ({b['resources']:,} resources), whole "
              f"process: {b['seconds']:.2f} s, peak RSS {b['peak_rss_mb']:.0f} MB "
              "(target <= 10 s, 400 MB)")


if __name__ == "__main__":
    main()
