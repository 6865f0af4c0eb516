"""`gpufleet diff` gets the program ready in a runner process while it reads the export
(issue 60): the same report and exit code as one process, a runner that fails or is not
needed changes nothing and is never left behind; the preview's seed leaves out what the
skipped fleets hold and nothing the running ones register."""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from exportutil import export, write_export
from test_diff import files

from gpufleet.compile.compiler import compile_inputs
from gpufleet.input.validate import validate_paths
from gpufleet.offers.catalog import load_catalog
from gpufleet.review.diff import Skips, choose_skips, seed_for
from gpufleet.review.state import STACK_TYPE, parse_export

from planutil import ROOT

# `gpufleet ARGS` as the process's own command line (the CLI grants the processors),
# counting forks and what the runner answered; the counts on standard error's last line.
SCRIPT = r"""
import json, os, sys
from gpufleet.components.run import runner
from gpufleet.cli.app import main

seen, real_fork, real_call, parent = {"forks": 0, "answered": [], "calls": []}, os.fork, \
    runner.Runner.call, os.getpid()

def fork():
    if os.environ.get("NO_FORK"):  # as a process limit would
        raise OSError(11, "Resource temporarily unavailable")
    pid = real_fork()
    if pid:
        seen["forks"] += 1
    return pid
os.fork = fork

def call(self, name, *a, **k):
    if os.environ.get("SLOW_EXPORT"):  # as a large export is read: the runner gets ready
        import select
        select.select([self.fds["answers"]], [], [], 60)
    out = real_call(self, name, *a, **k)
    seen["answered"].append(out is not None)
    seen["calls"].append([name, out is not None])
    return out
runner.Runner.call = call

if os.environ.get("FAIL_IN_RUNNER"):  # every call the runner makes raises there
    def failing(*a, **k):
        assert os.getpid() != parent
        raise RuntimeError("the runner fails")
    for name in runner.CALLS:
        runner.CALLS[name] = failing
sys.argv = ["gpufleet", *sys.argv[1:]]
code = main()
try:
    left = os.waitpid(-1, os.WNOHANG) is not None
except ChildProcessError:
    left = False
print(json.dumps({**seen, "code": code, "left": left}), file=sys.stderr)
"""


def _diff(args: list[str], **env: str) -> tuple[str, dict[str, Any]]:
    return _command(["diff", *args], **env)


def _command(args: list[str], **env: str) -> tuple[str, dict[str, Any]]:
    done = subprocess.run([sys.executable, "-c", SCRIPT, *args, "--format", "json"],
                          cwd=ROOT, capture_output=True, text=True, timeout=300,
                          env={**os.environ, "GPUFLEET_CACHE": "off", **env})
    seen: dict[str, Any] = json.loads(done.stderr.strip().splitlines()[-1])
    return done.stdout, seen


def test_a_changed_fleet_is_previewed_by_the_runner_with_the_same_report(
        tmp_path: Path) -> None:
    for folder in ("before", "after", "same"):
        (tmp_path / folder).mkdir()
    state = write_export(tmp_path / "state.json", export(files(tmp_path / "before")))
    edited = files(tmp_path / "after", nodes=2)  # one node less in the GCP fleet
    alone, one = _diff([*edited, "--state", state], GPUFLEET_JOBS="1")
    assert one == {"forks": 0, "answered": [], "calls": [], "code": 7, "left": False}
    report = json.loads(alone)
    assert [c["op"] for c in report["changes"]] == ["delete"]
    helped, seen = _diff([*edited, "--state", state], SLOW_EXPORT="1")
    assert helped == alone and seen["code"] == 7 and not seen["left"]
    assert seen["calls"] == [["seeded", True]] and seen["forks"] >= 1
    # a small export is read before the runner is ready (the command then runs the preview;
    # on a fast enough machine the runner may be ready): the same answer either way
    quick, seen = _diff([*edited, "--state", state])
    assert quick == alone and len(seen["answered"]) == 1 and not seen["left"]
    # a runner whose preview fails: the command runs it itself, with the same answer
    failed, seen = _diff([*edited, "--state", state], FAIL_IN_RUNNER="1", SLOW_EXPORT="1")
    assert failed == alone and seen["answered"] == [False] and not seen["left"]
    # nothing changed: no preview is asked for, the runner is ended, the answer unchanged
    same = files(tmp_path / "same")
    quiet, seen = _diff([*same, "--state", state])
    assert seen == {**seen, "answered": [], "code": 0, "left": False}
    assert quiet == _diff([*same, "--state", state], GPUFLEET_JOBS="1")[0]


def test_the_seed_leaves_out_what_the_skipped_fleets_hold(tmp_path: Path) -> None:
    paths = files(tmp_path)
    state = parse_export(json.dumps(export(paths)))
    compiled = compile_inputs(validate_paths(paths).inputs, load_catalog())
    whole = seed_for(state, Skips())
    assert set(whole) == {r.urn for r in state.resources if r.type != STACK_TYPE}
    skips = choose_skips(compiled, state, full=False)
    assert skips.names == {"a4", "trainer", "gw1"}  # nothing changed: every item skipped
    kept = seed_for(state, Skips(frozenset({"a4"})))
    a4 = next(r.urn for r in state.resources if r.type == "gpufleet:gcp:Fleet")
    by_urn = {r.urn: r for r in state.resources}

    def under_a4(urn: str) -> bool:
        while urn:
            if urn == a4:
                return True
            urn = by_urn[urn].parent if urn in by_urn else ""
        return False
    dropped = set(whole) - set(kept)
    assert dropped and dropped == {u for u in whole if under_a4(u)}
    # what is kept: the other fleet's, the gateway's and the providers at the top
    assert any(":providers:" in u for u in kept)
    assert any("gpufleet:aws:Fleet" in u for u in kept)
    assert kept == {u: whole[u] for u in kept}


def test_plan_and_quota_run_the_program_and_the_rules_in_the_runner() -> None:
    """The runner imports the program while the command compiles; the run and the policy
    pack's rules are sent to it; a runner whose calls fail changes nothing."""
    examples = str(ROOT / "examples")
    alone, one = _command(["plan", examples], GPUFLEET_JOBS="1")
    assert one == {"forks": 0, "answered": [], "calls": [], "code": 0, "left": False}
    helped, seen = _command(["plan", examples])
    assert helped == alone and seen["code"] == 0 and not seen["left"]
    assert seen["calls"] == [["registered", True], ["rules", True]]
    # the runner forks the clouds' parts too: the runner and two parts at least
    assert seen["forks"] >= 1
    failed, seen = _command(["plan", examples], FAIL_IN_RUNNER="1")
    assert failed == alone and not seen["left"]
    assert seen["calls"] == [["registered", False], ["rules", False]]  # not sent: broken
    # no process to be had: the command runs everything itself
    unforked, seen = _command(["plan", examples], NO_FORK="1")
    assert unforked == alone and seen["calls"] == [] and seen["forks"] == 0
    quota_alone, _ = _command(["quota", examples], GPUFLEET_JOBS="1")
    quota, seen = _command(["quota", examples])
    assert quota == quota_alone and seen["calls"] == [["registered", True]]


class _FakeRunner:
    """Stands in for a runner: records the calls and whether it was ended."""

    def __init__(self) -> None:
        self.calls: list[str] = []
        self.closed = False

    def call(self, name: str, *args: Any, **kw: Any) -> Any:
        self.calls.append(name)
        return None  # as a runner that failed: the command makes the call itself

    def close(self) -> None:
        self.closed = True


def test_a_run_of_more_nodes_than_the_cache_keeps_stays_in_the_command(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """Its records would cost more to send back than the runner saves: the runner is ended
    and the program runs in the command; a small run is sent (and made here when the
    runner fails it)."""
    from gpufleet.cli import runcache, runs
    from gpufleet.compile.runs import Registered, RunInputs
    from gpufleet.components.run import plan

    made: list[int] = []
    monkeypatch.setattr(plan, "registered", lambda run, compiled, progress=None, jobs=1: (
        made.append(sum(p.nodes for p in compiled.plans)) or Registered(())))
    compiled = compile_inputs(validate_paths(files(tmp_path)).inputs, load_catalog())
    big = dataclasses.replace(compiled, plans=tuple(
        dataclasses.replace(p, nodes=runcache.MAX_NODES) for p in compiled.plans))
    fake = _FakeRunner()
    monkeypatch.setattr(runs, "_RUNNER", [fake])
    runs._program()(RunInputs(()), compiled)
    assert fake.calls == ["registered"] and not fake.closed  # sent; it failed: made here
    runs._program()(RunInputs(()), big)
    assert fake.calls == ["registered"] and fake.closed
    assert made == [sum(p.nodes for p in compiled.plans), 2 * runcache.MAX_NODES]


def test_a_preview_the_runner_does_not_take_ends_it(monkeypatch: pytest.MonkeyPatch,
                                                     tmp_path: Path) -> None:
    """A seed over what is sent, or a runner that did not answer: the runner is ended
    before the command runs the preview itself (its processor goes to the run's parts)."""
    from gpufleet.cli import runs
    from gpufleet.compile.runs import RunInputs
    from gpufleet.components.run import diff as run_diff
    from gpufleet.components.run import runner
    from gpufleet.review import GuardOptions

    made: list[int] = []
    monkeypatch.setattr(run_diff, "run_seeded", lambda run, compiled, seed, project, jobs=1: (
        made.append(len(seed)) or ()))
    got: dict[str, Any] = {}
    monkeypatch.setattr(runs.pipeline, "diff", lambda validated, run, state, guards, seeded,
                        full: got.update(seeded=seeded) or (None, []))
    monkeypatch.setattr(runner, "MAX_SENT", 2)
    paths = files(tmp_path)
    validated = validate_paths(paths)
    runs.offline_diff(validated, load_catalog(), paths, parse_export(json.dumps(export(paths))),
                      None, None, GuardOptions())
    compiled = compile_inputs(validated.inputs, load_catalog())
    small, large = {"a": ("i", {})}, {k: ("i", {}) for k in "abc"}
    for seed, calls in ((small, ["seeded"]), (large, [])):
        fake = _FakeRunner()
        monkeypatch.setattr(runs, "_RUNNER", [fake])
        got["seeded"](RunInputs(()), compiled, seed, "p")
        assert fake.calls == calls and fake.closed
    assert made == [1, 3]
