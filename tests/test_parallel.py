"""An offline run in a process per cloud's part (issue 60): the parts are what the program
builds with no reference between them, and the joined result is the whole run's, byte for
byte; a part that fails, or a process with another thread, runs the whole program in one
process. The forks happen in a fresh process of one thread (a test worker has others)."""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest
from test_buckets import _files as bucket_files

from gpufleet.cli import processors, runs
from gpufleet.compile import Compiled
from gpufleet.compile.compiler import compile_inputs
from gpufleet.compile.runs import Registered, RunInputs
from gpufleet.components.run import parallel, plan
from gpufleet.components.run.harness import Registration, RunResult
from gpufleet.input.validate import validate_paths
from gpufleet.offers.catalog import load_catalog

from planutil import ROOT

EXAMPLES = str(ROOT / "examples")

# Compiles the files (argv[1], JSON), then for each mode runs the program split (jobs 2),
# compares it with the whole run (made after the first mode), and prints what it saw:
# whether the two agree (resources, exports in order, invokes), how many processes forked,
# whether any child is left unreaped. Mode "seeded": `gpufleet diff`'s preview over the
# state a whole run leaves, its first fleet edited.
SCRIPT = r"""
import dataclasses, json, os, sys
from gpufleet.compile.compiler import compile_inputs
from gpufleet.compile.runs import RunInputs
from gpufleet.components.run import parallel, plan
from gpufleet.input.validate import validate_paths
from gpufleet.offers.catalog import load_catalog

paths = json.loads(sys.argv[1])
compiled = compile_inputs(validate_paths(paths).inputs, load_catalog())
run = RunInputs(tuple(paths))
forks, parent, real_fork, real_run = [], os.getpid(), os.fork, plan.run_offline

refuse = []

def counted():
    if refuse:  # as a process limit would
        raise OSError(11, "Resource temporarily unavailable")
    pid = real_fork()
    if pid:
        forks.append(pid)
    return pid
os.fork = counted

def doc(r):
    return {"resources": list(r.resources), "exports": list(r.exports.items()),
            "invokes": sorted(json.dumps(i, sort_keys=True) for i in r.invokes)}

def failing(where):
    calls = []
    def run_offline(*a, **k):
        calls.append(1)
        here = "child" if os.getpid() != parent else "parent"
        if where == "killed" and here == "child":  # dies sending nothing (OOM-killed, ...)
            os.kill(os.getpid(), 9)
        if here == where and (here == "child" or len(calls) == 1):
            raise RuntimeError("a part that fails")
        return real_run(*a, **k)
    return run_offline

ran = []

def counted_run(real):  # the runs this process makes: 1 when the parts' join is used
    def run(*a, **k):
        ran.append(1)
        return real(*a, **k)
    return run

def seeded():
    from gpufleet.components.run import diff
    from gpufleet.components.run.diff import run_seeded
    real_preview = diff._preview
    state = plan.run_offline(run, compiled, record_outputs=True)
    seed = {r.urn: (r.id, r.outputs) for r in state.registrations}
    before = {r.urn: r.inputs for r in state.registrations}
    first = compiled.plans[0]
    edited = dataclasses.replace(compiled, plans=(dataclasses.replace(
        first, disk_gib=first.disk_gib + 1), *compiled.plans[1:]))
    del forks[:], ran[:]
    diff._preview = counted_run(real_preview)
    split = run_seeded(run, edited, seed, "gpufleet", jobs=2)
    runs = len(ran)
    diff._preview = real_preview
    same = split == run_seeded(run, edited, seed, "gpufleet")
    return {"same": same, "forks": len(forks), "left": False, "resources": len(split),
            "runs": runs,
            "edited": sum(r["inputs"] != before.get(r["urn"]) for r in split)}

out, whole = {"parts": parallel.plan_parts(compiled, 2)}, None
for mode in sys.argv[2:]:  # "ok" first: its children load their SDKs, as a plan's do
    refuse[:] = [True] if mode == "nofork" else []
    if mode == "seeded":
        out[mode] = seeded()
        continue
    plan.run_offline = counted_run(real_run if mode in ("ok", "nofork") else failing(mode))
    del forks[:], ran[:]
    split = doc(plan.registered(run, compiled, jobs=2))
    runs = len(ran)
    plan.run_offline = real_run
    whole = whole or doc(plan.registered(run, compiled))
    try:
        left = os.waitpid(-1, os.WNOHANG) is not None
    except ChildProcessError:
        left = False
    out[mode] = {"same": split == whole, "forks": len(forks), "left": left,
                 "resources": len(whole["resources"]), "runs": runs}
print(json.dumps(out))
"""


def _in_fresh_process(paths: list[str], *modes: str) -> dict[str, Any]:
    done = subprocess.run([sys.executable, "-c", SCRIPT, json.dumps(paths), *modes],
                          cwd=ROOT, capture_output=True, text=True, timeout=300,
                          env={**os.environ, "GPUFLEET_CACHE": "off"})
    assert done.returncode == 0, done.stderr[-3000:]
    result: dict[str, Any] = json.loads(done.stdout.splitlines()[-1])
    return result


def _compiled(paths: list[str]) -> Compiled:
    return compile_inputs(validate_paths(paths).inputs, load_catalog())


def test_the_examples_split_by_cloud_and_join_to_the_whole_run() -> None:
    seen = _in_fresh_process([EXAMPLES], "ok", "child", "killed", "parent", "nofork",
                             "seeded")
    parts = seen["parts"]
    assert sorted(c for p in parts for c in p) == ["aws", "azure", "gcp", "lambda"]
    assert len(parts) >= 2
    ok = seen["ok"]
    assert ok["same"] and ok["forks"] == len(parts) - 1 and not ok["left"]
    assert ok["runs"] == 1 and seen["seeded"]["runs"] == 1 and seen["child"]["runs"] == 2
    assert ok["resources"] > 100
    # a child whose part raises or that is killed, and this process's own part raising: the
    # whole program runs here instead, with the same result, and no child is left behind
    for failed in (seen["child"], seen["killed"], seen["parent"]):
        assert failed["same"] and failed["forks"] == len(parts) - 1 and not failed["left"]
    # no process to be had: one process, the same result
    assert seen["nofork"]["same"] and seen["nofork"]["forks"] == 0
    # `gpufleet diff`'s preview over a state: the same split, the edited fleet's nodes differ
    diff = seen["seeded"]
    assert diff["same"] and diff["forks"] == len(parts) - 1 and diff["resources"] > 100
    assert diff["edited"] > 0


def test_clouds_a_bucket_or_mount_reaches_run_in_one_part(tmp_path: Path) -> None:
    """The fleet (AWS) mounts an R2, an S3 and a GCS bucket: AWS, GCP and R2 are one part (the
    buckets' grants name the fleet's role); the Azure bucket no fleet reads is another."""
    paths = bucket_files(tmp_path)
    compiled = _compiled(paths)
    assert sorted(parallel.groups(compiled)) == ["aws", "azure"]
    [azure] = [p for p in parallel.plan_parts(compiled, 2) if p == ["azure"]]
    part = parallel.subset(compiled, set(azure))
    assert [b.name for b in part.buckets] == ["acmeblobs"] and not part.plans
    seen = _in_fresh_process(paths, "ok")
    assert seen["ok"]["same"] and seen["ok"]["forks"] == 1 and not seen["ok"]["left"]


def test_parts_cover_the_plans_once_and_one_processor_keeps_one_part() -> None:
    compiled = _compiled([EXAMPLES])
    assert parallel.plan_parts(compiled, 1) == [sorted(parallel.groups(compiled))]
    parts = parallel.plan_parts(compiled, 2)
    subsets = [parallel.subset(compiled, set(p)) for p in parts]
    names = [p.name for s in subsets for p in s.plans]
    assert sorted(names) == sorted(p.name for p in compiled.plans)
    gateways = [g.name for s in subsets for g in s.gateways]
    assert sorted(gateways) == sorted(g.name for g in compiled.gateways)
    assert parallel.export_order(compiled) == [
        *[p.name for p in compiled.plans], *[f"gateway-{g.name}" for g in compiled.gateways],
        *[f"volume-{v.name}" for v in compiled.volumes]]  # the examples hold no filesystem waits
    # one cloud only: nothing to split
    gcp = parallel.subset(compiled, {"gcp"})
    assert parallel.plan_parts(gcp, 4) == [["gcp"]]


def _reg(urn: str) -> Registration:
    return Registration(urn=urn, type="t", name=urn, parent="", custom=True, provider="",
                        inputs={})


def test_joined_refuses_parts_that_met_and_orders_the_exports_as_the_program() -> None:
    compiled = _compiled([EXAMPLES])
    order = parallel.export_order(compiled)
    half = len(order) // 2
    a = RunResult([_reg("u1")], {k: k for k in order[half:]}, [("tok", {"a": 1})])
    b = RunResult([_reg("u2")], {k: k for k in order[:half]}, [])
    both = parallel.joined(compiled, [a, b])
    assert both is not None and list(both.exports) == order
    assert [r.urn for r in both.registrations] == ["u1", "u2"] and len(both.invokes) == 1
    # what two halves of a cloud's part both register (its provider) alike: kept once;
    # one URN with different values: the whole program runs instead
    again = parallel.joined(compiled, [a, RunResult([_reg("u1"), _reg("u2")], b.exports, [])])
    assert again is not None and [r.urn for r in again.registrations] == ["u1", "u2"]
    other = dataclasses.replace(_reg("u1"), inputs={"region": "elsewhere"})
    assert parallel.joined(compiled, [a, RunResult([other], b.exports, [])]) is None
    assert parallel.joined(compiled, [a]) is None  # an export missing


def _many_fleets(folder: Path, count: int, backend: str, nodes: int = 3) -> list[str]:
    sys.path.insert(0, str(ROOT / "bench"))
    from diff import fleet_yaml

    folder.mkdir(exist_ok=True)
    for i in range(count):
        (folder / f"f{i:02d}.yml").write_text(fleet_yaml(i, nodes, backend))
    return [str(folder)]


def test_many_fleets_of_one_cloud_split_in_two_and_join_to_the_whole_run(
        tmp_path: Path) -> None:
    """Twelve AWS fleets: the cloud's part in two halves, each registering the region's
    provider and key pair alike (kept once); plan and diff preview as the whole run's."""
    paths = _many_fleets(tmp_path / "fleets", 12, "aws")
    compiled = _compiled(paths)
    assert parallel.plan_parts(compiled, 2) == [["aws#0"], ["aws#1"]]
    halves = [parallel.subset(compiled, {u}) for u in ("aws#0", "aws#1")]
    assert [[p.name for p in h.plans] for h in halves] == [
        [p.name for p in compiled.plans[:6]], [p.name for p in compiled.plans[6:]]]
    seen = _in_fresh_process(paths, "ok", "child", "seeded")
    for mode in ("ok", "child", "seeded"):
        assert seen[mode]["same"] and seen[mode]["forks"] == 1, (mode, seen[mode])
    # the halves' join is what came back (this process ran its own half only); a half
    # that failed: the whole program ran here after it
    assert seen["ok"]["runs"] == 1 and seen["seeded"]["runs"] == 1
    assert seen["child"]["runs"] == 2
    assert seen["seeded"]["edited"] > 0
    # fewer fleets: a half would not pay for its second load of the cloud's SDK
    few = _compiled(_many_fleets(tmp_path / "few", 6, "aws"))
    assert parallel.plan_parts(few, 2) == [["aws"]]
    assert parallel.plan_parts(compiled, 1) == [["aws"]]


def test_only_fleets_nothing_reaches_move_to_a_half(tmp_path: Path) -> None:
    """A fleet with a filesystem, a bucket mount, a joined network, or a gateway or bucket
    reader naming it, stays in the half that runs the rest of its cloud."""
    compiled = _compiled([EXAMPLES])
    assert parallel.shardable(compiled) == ["dev-l4", "a3mega", "lambda-h100", "a100-any"]
    named = dataclasses.replace(compiled, gateways=(dataclasses.replace(
        compiled.gateways[0], fleet="dev-l4"),))
    assert "dev-l4" not in parallel.shardable(named)
    mounting = _compiled(bucket_files(tmp_path))
    assert parallel.shardable(mounting) == []
    # the examples' groups are not split: a half of any cloud would cost more than it saves
    assert not [u for p in parallel.plan_parts(compiled, 2) for u in p
                if parallel.SHARD in u]


def test_no_fork_while_another_thread_runs(monkeypatch: pytest.MonkeyPatch) -> None:
    def no_fork() -> int:
        raise AssertionError("forked beside another thread")
    monkeypatch.setattr(os, "fork", no_fork)
    stop = threading.Event()
    other = threading.Thread(target=stop.wait)
    other.start()
    try:
        assert parallel.run_parts(_compiled([EXAMPLES]), lambda part: pytest.fail("ran"),
                                  2) is None
    finally:
        stop.set()
        other.join()


def test_the_cli_grants_processors_and_refuses_a_bad_count(
        monkeypatch: pytest.MonkeyPatch) -> None:
    asked: list[int] = []

    def registered(run: object, compiled: object, progress: object = None,
                   jobs: int = 1) -> Registered:
        asked.append(jobs)
        return Registered(())
    monkeypatch.setattr(plan, "registered", registered)
    monkeypatch.setattr(processors, "_GRANTED", [])
    assert processors.jobs() == 1  # the library: one process
    runs._program()(RunInputs(()), _compiled([EXAMPLES]))
    monkeypatch.setenv(processors.ENV, "3")
    processors.grant()
    assert processors.jobs() == 3
    runs._program()(RunInputs(()), _compiled([EXAMPLES]))
    assert asked == [1, 3]
    for bad in ("0", "two", "-1"):
        monkeypatch.setenv(processors.ENV, bad)
        with pytest.raises(Exception, match="whole number of processors"):
            processors.grant()
    monkeypatch.delenv(processors.ENV)
    processors.grant()
    assert processors.jobs() == processors.available() >= 1
    done = subprocess.run([sys.executable, "-m", "gpufleet", "plan", EXAMPLES], cwd=ROOT,
                          capture_output=True, text=True, timeout=60,
                          env={**os.environ, processors.ENV: "many"})
    assert done.returncode == 2 and "GPUFLEET_JOBS='many'" in done.stderr
    assert not done.stdout
