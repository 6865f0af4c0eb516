"""The run cache (issue 60): a plan of inputs and code it has planned before answers without
running the stack program or importing a provider SDK, with the same output; a changed
input, a changed source file or a bad entry is a miss, never a wrong answer."""

from __future__ import annotations

import dataclasses
import json
import marshal
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from gpufleet.cli import runcache
from gpufleet.compile.compiler import compile_inputs
from gpufleet.compile.runs import RunInputs
from gpufleet.input.validate import validate_paths
from gpufleet.offers.catalog import load_catalog

ROOT = Path(__file__).resolve().parent.parent
PLAN = """import sys
from gpufleet.cli.app import main
try:
    code = main(sys.argv[1:])
except SystemExit as e:
    code = e.code
print("SDK-LOADED" if "pulumi_gcp" in sys.modules else "SDK-NOT-LOADED", file=sys.stderr)
print("POLICY-LOADED" if "pulumi_policy" in sys.modules else "POLICY-NOT-LOADED",
      file=sys.stderr)
sys.exit(code)
"""


def _plan(cache: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", PLAN, "plan", *args], cwd=ROOT, text=True,
                          capture_output=True, timeout=300, env={
                              **os.environ, "GPUFLEET_CACHE": "on",
                              "GPUFLEET_CACHE_DIR": str(cache), **env})


def test_a_second_plan_answers_from_the_cache_with_the_same_output(tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    cold = _plan(cache, "examples/")
    assert cold.returncode == 0 and "SDK-LOADED" in cold.stderr, cold.stderr[-2000:]
    [entry] = (cache / "runs").glob("*.run")
    assert stat.S_IMODE(entry.stat().st_mode) == 0o600
    assert stat.S_IMODE((cache / "runs").stat().st_mode) == 0o700
    assert "POLICY-LOADED" in cold.stderr and len(list((cache / "policies").glob("*"))) == 1
    warm = _plan(cache, "examples/")
    assert warm.returncode == 0 and "SDK-NOT-LOADED" in warm.stderr
    assert "POLICY-NOT-LOADED" in warm.stderr  # the rules' findings cached too
    assert warm.stdout == cold.stdout
    as_json = [_plan(cache, "examples/", "--format", "json").stdout for _ in range(2)]
    assert as_json[0] == as_json[1] and json.loads(as_json[0])["resources"]
    # off: nothing read, nothing written
    off = _plan(tmp_path / "off", "examples/", GPUFLEET_CACHE="off")
    assert "SDK-LOADED" in off.stderr and not (tmp_path / "off").exists()
    assert off.stdout == cold.stdout


def _compiled(paths: list[str]) -> object:
    return compile_inputs(validate_paths(paths).inputs, load_catalog())


def test_a_changed_input_or_source_file_is_another_key(tmp_path: Path) -> None:
    fleet = ROOT / "examples" / "fleets"
    run = RunInputs((str(fleet),))
    compiled = _compiled([str(ROOT / "examples")])
    code = tmp_path / "components"
    code.mkdir()
    (code / "a.py").write_text("x = 1\n")
    first = runcache.run_key(run, compiled, [code])  # type: ignore[arg-type]
    assert runcache.run_key(run, compiled, [code]) == first  # type: ignore[arg-type]
    (code / "a.py").write_text("x = 22\n")  # an edit without a version bump
    assert runcache.run_key(run, compiled, [code]) != first  # type: ignore[arg-type]
    other = RunInputs((str(fleet),), stack="prod")
    assert runcache.run_key(other, compiled, [code]) != first  # type: ignore[arg-type]


def _entry_bytes(bad: object, key: str) -> bytes:
    """A damaged entry: bytes as they are, an object marshalled with "K" as the key."""
    if isinstance(bad, bytes):
        return bad
    return marshal.dumps(json.loads(json.dumps(bad).replace('"K"', json.dumps(key))))


GOOD_RUN = {"key": "K", "python": sys.implementation.cache_tag, "resources": [{"urn": "u"}],
            "invokes": [], "exports": {}}
BAD_RUNS = [b"", b"\x00garbage", marshal.dumps(GOOD_RUN)[:-3], marshal.dumps([GOOD_RUN]),
            b'{"key": "K"}', {**GOOD_RUN, "key": "other"}, {**GOOD_RUN, "python": "cpython-20"},
            {**GOOD_RUN, "resources": "nope"}, {**GOOD_RUN, "invokes": [["tok"]]}]


@pytest.mark.parametrize("bad", BAD_RUNS)
def test_a_bad_entry_is_a_miss_and_is_replaced(tmp_path: Path, bad: object) -> None:
    """An entry that is not a whole run of its key written by this Python (empty, garbage,
    cut short, JSON, another key or Python, a field of the wrong shape) is a miss and is
    written again; of old entries the newest KEEP stay, and earlier versions' go."""
    from gpufleet.compile.runs import Registered

    calls: list[int] = []

    def program(run: RunInputs, compiled: object, progress: object = None) -> Registered:
        calls.append(1)
        return Registered(({"urn": "u", "type": "t"},), (("tok", {"a": 1}),), {"x": 1})

    os.environ["GPUFLEET_CACHE"] = "on"
    os.environ["GPUFLEET_CACHE_DIR"] = str(tmp_path)
    try:
        run, compiled = RunInputs(("f.yml",)), _compiled([str(ROOT / "examples")])
        key = runcache.run_key(run, compiled, [runcache._ROOT])  # type: ignore[arg-type]
        (tmp_path / "runs").mkdir()
        entry = tmp_path / "runs" / f"{key}.run"
        entry.write_bytes(_entry_bytes(bad, key))
        legacy = tmp_path / "runs" / f"{key}.json"  # an entry of an earlier version
        legacy.write_text("{}")
        cached = runcache.cached(lambda: program)  # type: ignore[arg-type, return-value]
        first = cached(run, compiled)  # type: ignore[arg-type]
        assert calls == [1] and first.resources == ({"urn": "u", "type": "t"},)
        again = cached(run, compiled)  # type: ignore[arg-type]
        assert calls == [1] and again == first  # read back from the rewritten entry
        assert not legacy.exists()
        for i in range(runcache.KEEP + 3):  # older entries go
            (tmp_path / "runs" / f"old{i}.run").write_bytes(b"")
        cached(RunInputs(("g.yml",)), compiled)  # type: ignore[arg-type]
        assert len(list((tmp_path / "runs").glob("*.run"))) == runcache.KEEP
    finally:
        os.environ["GPUFLEET_CACHE"] = "off"
        os.environ.pop("GPUFLEET_CACHE_DIR")


def _subjects() -> list[object]:
    from gpufleet.compile.runs import PolicySubject

    bucket = {"urn": "urn:pulumi:dev::gpufleet::aws:s3/bucketV2:BucketV2::b", "name": "b",
              "type": "aws:s3/bucketV2:BucketV2", "inputs": {"bucket": "b"}}
    return [PolicySubject(bucket, "f", "f.yml", {"fleet": "f"})]


FINDING = {"subject": 0, "rule": "r", "level": "mandatory", "message": "m", "remediation": ""}
POLICY = {"key": "K", "python": sys.implementation.cache_tag, "findings": [FINDING]}


@pytest.mark.parametrize("bad", [b"{", {**POLICY, "findings": [{**FINDING, "subject": 7}]},
                                 {**POLICY, "findings": [{"subject": 0}]},
                                 {**POLICY, "findings": [{**FINDING, "subject": True}]},
                                 {**POLICY, "findings": {}}, {**POLICY, "key": "other"}])
def test_policy_findings_are_cached_per_subjects_and_levels_and_a_bad_entry_is_a_miss(
        tmp_path: Path, bad: object) -> None:
    """The rules run (and pulumi-policy loads) only for subjects and levels not checked
    before by the same code; an entry that does not read back whole as findings of its
    key (another key, a subject index out of range, a missing field) is a miss."""
    from gpufleet.compile.runs import Finding

    calls: list[dict[str, str]] = []

    def rules(subjects: object, levels: dict[str, str]) -> list[Finding]:
        calls.append(dict(levels))
        return [Finding(0, "r", levels.get("r", "advisory"), "found", "fix it")]

    os.environ["GPUFLEET_CACHE"] = "on"
    os.environ["GPUFLEET_CACHE_DIR"] = str(tmp_path)
    try:
        subjects = _subjects()
        key = runcache.policy_key(subjects, {}, [runcache._ROOT])  # type: ignore[arg-type]
        (tmp_path / "policies").mkdir()
        (tmp_path / "policies" / f"{key}.run").write_bytes(_entry_bytes(bad, key))
        cached = runcache.cached_policies(lambda: rules)  # type: ignore[arg-type, return-value]
        first = cached(subjects, {})  # type: ignore[arg-type]
        assert calls == [{}] and first == [Finding(0, "r", "advisory", "found", "fix it")]
        assert cached(subjects, {}) == first and len(calls) == 1  # type: ignore[arg-type]
        raised = cached(subjects, {"r": "mandatory"})  # type: ignore[arg-type]
        assert len(calls) == 2 and raised[0].level == "mandatory"
        other = [dataclasses.replace(subjects[0], config={"fleet": "g"})]  # type: ignore[type-var]
        cached(other, {})  # type: ignore[arg-type]
        assert len(calls) == 3
        os.environ["GPUFLEET_CACHE"] = "off"
        cached(subjects, {})  # type: ignore[arg-type]
        assert len(calls) == 4
    finally:
        os.environ["GPUFLEET_CACHE"] = "off"
        os.environ.pop("GPUFLEET_CACHE_DIR")


def test_the_policy_key_of_the_last_runs_records_stands_on_its_run_key(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """Subjects whose resources are the very records of the run the cache last answered are
    keyed by that run's key and their positions (no JSON of the records); the same content
    in other objects, another run or another config is another key, and findings cached
    under one are never read for another."""
    from gpufleet.compile.runs import Finding, Registered

    monkeypatch.setenv("GPUFLEET_CACHE", "on")
    monkeypatch.setenv("GPUFLEET_CACHE_DIR", str(tmp_path))
    subjects = _subjects()
    run = Registered((subjects[0].resource,), (), {})
    programs: list[int] = []

    def program(*_: object) -> Registered:
        programs.append(1)
        return run

    compiled = _compiled([str(ROOT / "examples")])
    runcache.cached(lambda: program)(RunInputs((str(ROOT / "examples"),)),  # type: ignore[arg-type, return-value]
                                     compiled)
    roots = [runcache._ROOT]
    linked = runcache.policy_key(subjects, {}, roots)  # type: ignore[arg-type]
    copied = [dataclasses.replace(subjects[0], resource=json.loads(json.dumps(  # type: ignore[type-var]
        subjects[0].resource)))]
    assert runcache.policy_key(copied, {}, roots) != linked  # type: ignore[arg-type]
    other = [dataclasses.replace(subjects[0], config={"fleet": "g"})]  # type: ignore[type-var]
    assert runcache.policy_key(other, {}, roots) not in (linked, runcache.policy_key(  # type: ignore[arg-type]
        copied, {}, roots))  # type: ignore[arg-type]
    assert runcache.policy_key(subjects, {"r": "mandatory"}, roots) != linked  # type: ignore[arg-type]
    calls: list[int] = []

    def rules(found: object, levels: object) -> list[Finding]:
        calls.append(1)
        return [Finding(0, "r", "advisory", "found", "fix it")]

    checked = runcache.cached_policies(lambda: rules)  # type: ignore[arg-type, return-value]
    assert checked(subjects, {}) == checked(subjects, {})  # type: ignore[arg-type]
    assert len(calls) == 1 and (tmp_path / "policies" / f"{linked}.run").exists()
    checked(copied, {})  # type: ignore[arg-type]  # same content, not the run's objects
    assert len(calls) == 2
    runcache._remember("another run", Registered(run.resources, (), {}))
    assert runcache.policy_key(subjects, {}, roots) != linked  # type: ignore[arg-type]
    assert programs == [1]
