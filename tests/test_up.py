"""`gpufleet up`: the capacity fallback loop.

Why no engine runs here: `pulumi up` needs the Pulumi CLI, its engine, provider plugins and
cloud credentials, none of which can be installed on this machine. The loop is tested
against the Automation API's own types instead: a stand-in for `pulumi.automation.Stack`
that emits `EngineEvent`/`DiagnosticEvent` objects carrying the providers' documented
capacity errors and raises `CommandError(CommandResult(...))` the way `Stack.up` does on a
failed update, or returns an `UpResult` whose `UpdateSummary` says "succeeded". Before every
"update" the stand-in compiles the stack's files exactly as the stack program does, so a lock
the program would refuse fails the test.
"""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from exportutil import export
from pulumi import automation as auto
from pulumi.automation import events as ev

from gpufleet.cli import cli, main
from gpufleet.cli.runs import offline_diff
from gpufleet.compile.compiler import compile_files
from gpufleet.components.run.automation import AutomationStack
from gpufleet.input.validate import load_lock, validate_paths
from gpufleet.live import CAPACITY_ERRORS, UpError, UpOptions, UpPreview, capacity_code, deploy
from gpufleet.offers import load_catalog
from gpufleet.review import GuardOptions, parse_export

from planutil import TEST_KEY, write

A4 = ("type: fleet\nname: a4\nnodes: 2\nplacement: cluster\nbackends: [gcp]\n"
      "spot_policy: auto\nresources:\n  gpu: B200:8\n")
P5 = ("type: fleet\nname: trainer\nnodes: 2\nplacement: cluster\nbackends: [aws]\n"
      "resources:\n  gpu: H100:8\n")
BACKENDS = (f"access:\n  ssh_public_key: {TEST_KEY}\nbackends:\n  - type: gcp\n"
            "    project_id: p1\n    ssh_cidrs: [198.51.100.0/24]\n  - type: aws\n"
            "    ssh_cidrs: [198.51.100.0/24]\n")

# Provider messages as the bridged providers print them (see CAPACITY_ERRORS for sources).
GCP_EXHAUSTED = ("1 error occurred:\n\t* Error waiting for instance to create: The zone "
                 "'projects/p1/zones/{zone}' does not have enough resources available to "
                 "fulfill the request.  Try a different zone, or try again later.")
AWS_NO_CAPACITY = ("creating EC2 Instance: InsufficientInstanceCapacity: We currently do not "
                   "have sufficient p5.48xlarge capacity in the Availability Zone you "
                   "requested (us-east-1a).")


EMPTY_STACK: dict[str, Any] = {"version": 3, "deployment": {"resources": []}}


class FakeStack:
    """Stands in for `pulumi.automation.Stack`: config, the state (`export_stack`), a
    preview with engine events (computed by comparing the program with the state, as the
    engine would), and `up` with engine events."""

    def __init__(self, files: list[str], lock: str, fail: dict[str, int],
                 message: str = GCP_EXHAUSTED, deployed: dict[str, Any] | None = None) -> None:
        self.files, self.lock = files, lock
        self.fail = dict(fail)  # fleet -> how many more updates fail for lack of capacity
        self.message = message
        self.seen: list[dict[str, str]] = []  # per update: fleet -> where the lock put it
        self.deployed = deployed or EMPTY_STACK
        self.previews = 0

    def export_stack(self) -> auto.Deployment:
        return auto.Deployment(version=3, deployment=self.deployed["deployment"])

    def preview(self, on_event: Any = None, **_: Any) -> auto.PreviewResult:
        self.previews += 1
        validated = validate_paths(self.files)
        lock, _ = load_lock(self.lock)
        report, diags = offline_diff(validated, load_catalog(), self.files,
                                     parse_export(json.dumps(self.deployed)), None, None,
                                     GuardOptions(), lock, locked=True, full=True)
        assert report is not None, diags
        for seq, c in enumerate(report.changes):
            md = ev.StepEventMetadata(op=ev.OpType(c.op), urn=c.urn, type=c.type, provider="",
                                      keys=list(c.reasons), diffs=[], detailed_diff=None)
            on_event(ev.EngineEvent(sequence=seq, timestamp=seq,
                                    resource_pre_event=ev.ResourcePreEvent(metadata=md)))
        return auto.PreviewResult("", "", {c.op: 1 for c in report.changes})

    def get_all_config(self) -> dict[str, auto.ConfigValue]:
        return {"gpufleet:files": auto.ConfigValue(json.dumps(self.files)),
                "gpufleet:lock": auto.ConfigValue(self.lock)}

    def up(self, on_output: Any = None, on_event: Any = None) -> auto.UpResult:
        _, compiled = compile_files(self.files, lock_path=self.lock)  # the stack program
        assert compiled is not None and compiled.ok, compiled and compiled.diagnostics
        self.seen.append({p.name: f"{p.zone or p.region} {p.instance_type}"
                          for p in compiled.plans})
        failing = [n for n, left in self.fail.items() if left > 0]
        if failing:
            for seq, name in enumerate(failing):
                self.fail[name] -= 1
                plan = next(p for p in compiled.plans if p.name == name)
                urn = (f"urn:pulumi:dev::gpufleet::gpufleet:{plan.backend}:Fleet$"
                       f"gcp:compute/instance:Instance::{name}-node-0")
                msg = self.message.format(zone=plan.zone)
                on_event(ev.EngineEvent(seq, 0, diagnostic_event=ev.DiagnosticEvent(
                    message=f"{msg}\n", color="never", severity="error", urn=urn)))
            raise auto.errors.CommandError(auto.CommandResult(
                "Updating (dev):\n", "error: update failed\n", 255))
        lock, _ = load_lock(self.lock)
        self.deployed = export(self.files, lock=lock)
        summary = auto.UpdateSummary(kind="update", start_time=dt.datetime(2026, 11, 1),
                                     message="", environment={}, config={},
                                     result="succeeded")
        return auto.UpResult("Update succeeded\n", "", summary, {})


def YES(_preview: UpPreview) -> bool:
    return True


def runner(stack: FakeStack, echo: Any = print) -> AutomationStack:
    """The real Automation API runner of `gpufleet up`, around the stand-in stack."""
    return AutomationStack(stack, "dev", "stacks", echo)


def setup(tmp: Path) -> tuple[list[str], str, str]:
    files = [write(tmp, "backends.yml", BACKENDS), write(tmp, "a4.yml", A4),
             write(tmp, "p5.yml", P5)]
    lock = str(tmp / "gpufleet.lock")
    r = CliRunner().invoke(cli, ["lock", *files])
    assert r.exit_code == 0, r.output
    return files, lock, (tmp / "gpufleet.lock").read_text()


def entry_lines(text: str, name: str) -> str:
    lines = text.splitlines()
    start = lines.index(f"  {name}:")
    end = next((i for i in range(start + 1, len(lines))
                if lines[i].startswith("  ") and not lines[i].startswith("    ")), len(lines))
    return "\n".join(lines[start:end])


def test_two_capacity_errors_then_the_third_offer_is_deployed_and_locked(tmp_path: Path) -> None:
    files, lock, before = setup(tmp_path)
    stack = FakeStack(files, lock, {"a4": 2})
    said: list[str] = []
    result = deploy(runner(stack, said.append), str(tmp_path), UpOptions(3), said.append,
                    YES)
    assert result.succeeded and len(result.attempts) == 3
    zones = [s["a4"] for s in stack.seen]
    assert len(set(zones)) == 3  # three different places, the failed ones skipped
    assert [s["trainer"] for s in stack.seen] == [stack.seen[0]["trainer"]] * 3
    after = Path(lock).read_text()
    assert entry_lines(after, "trainer") == entry_lines(before, "trainer")
    new, _ = load_lock(lock)
    assert new is not None and f"{new.fleets['a4'].zone} a4-highgpu-8g" == zones[2]
    moves = [s for s in said if s.startswith("gpufleet up:")]
    assert len(moves) == 2 and all("does not have enough resources" in s for s in moves)
    assert "-> moving to gcp" in moves[0]
    assert said[0] == "preview: + 52 to create, ~ 0 to update, +- 0 to replace, - 0 to delete"
    assert stack.previews == 3  # a preview before every attempt


def test_fallback_exhausted_lists_every_attempt(tmp_path: Path) -> None:
    files, lock, _ = setup(tmp_path)
    stack = FakeStack(files, lock, {"a4": 5})
    with pytest.raises(UpError) as err:
        deploy(runner(stack), str(tmp_path), UpOptions(2), print, YES)
    text = str(err.value)
    assert "no capacity after 3 attempt(s) (--fallback 2)" in text
    assert [ln.strip() for ln in text.splitlines() if ln.strip().startswith("attempt")] == \
        ["attempt 1: capacity", "attempt 2: capacity", "attempt 3: capacity"]
    assert text.count("does not have enough resources") == 3
    assert "succeeded" not in text


def test_only_capacity_errors_move_a_fleet(tmp_path: Path) -> None:
    files, lock, before = setup(tmp_path)
    stack = FakeStack(files, lock, {"a4": 1},
                      message="googleapi: Error 403: Quota 'GPUS_ALL_REGIONS' exceeded. "
                              "Limit: 8.0 globally., quotaExceeded")
    with pytest.raises(UpError, match="not a lack of capacity; nothing was moved"):
        deploy(runner(stack), str(tmp_path), UpOptions(3), print, YES)
    assert Path(lock).read_text() == before and len(stack.seen) == 1


def test_aws_capacity_error_moves_only_the_aws_fleet(tmp_path: Path) -> None:
    files, lock, before = setup(tmp_path)
    stack = FakeStack(files, lock, {"trainer": 1}, message=AWS_NO_CAPACITY)
    result = deploy(runner(stack), str(tmp_path), UpOptions(1), print, YES)
    assert result.succeeded
    after = Path(lock).read_text()
    assert entry_lines(after, "a4") == entry_lines(before, "a4")
    assert entry_lines(after, "trainer") != entry_lines(before, "trainer")


def test_an_update_that_did_not_succeed_is_not_reported_as_deployed(tmp_path: Path) -> None:
    files, lock, _ = setup(tmp_path)

    class Cancelled(FakeStack):
        def up(self, on_output: Any = None, on_event: Any = None) -> auto.UpResult:
            res = super().up(on_output, on_event)
            res.summary.result = "failed"
            return res
    with pytest.raises(UpError, match="attempt 1: failed"):
        deploy(runner(Cancelled(files, lock, {})), str(tmp_path), UpOptions(1), print,
               YES)


def test_capacity_codes_match_whole_codes_of_their_own_cloud() -> None:
    assert capacity_code("aws", "error: InsufficientInstanceCapacity: none left") == \
        "InsufficientInstanceCapacity"
    assert capacity_code("aws", "UnsupportedOperation: not here") is None
    assert capacity_code("aws", "Unsupported: p5.48xlarge is not supported in us-east-1e") \
        == "Unsupported"
    assert capacity_code("azure", 'Code="SkuNotAvailable" Message="..."') == "SkuNotAvailable"
    assert capacity_code("azure", 'Code="ZonalAllocationFailed"') == "ZonalAllocationFailed"
    assert capacity_code("gcp", "InsufficientInstanceCapacity") is None
    assert capacity_code("gcp", "code: ZONE_RESOURCE_POOL_EXHAUSTED_WITH_DETAILS") == \
        "ZONE_RESOURCE_POOL_EXHAUSTED_WITH_DETAILS"
    full = "instance-operations/launch/insufficient-capacity"
    assert capacity_code("lambda", f"Lambda API: {full}: Not enough capacity") == full
    assert {c.backend for c in CAPACITY_ERRORS} == {"aws", "gcp", "azure", "lambda"}
    assert all(c.source for c in CAPACITY_ERRORS)


def test_up_without_the_pulumi_cli_exits_2(monkeypatch: pytest.MonkeyPatch,
                                         capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setattr("shutil.which", lambda _name: None)
    assert main(["up", "--stack", "dev"]) == 2
    err = capsys.readouterr().err
    assert "the Pulumi CLI is not installed" in err and "deployed" not in err


# --- preview, question, guards, running fleets ---------------------------------------------

def deployed_stack(tmp: Path, fail: dict[str, int], message: str = GCP_EXHAUSTED
                   ) -> tuple[FakeStack, list[str], str, str]:
    """A stack where both fleets already run (the state holds their nodes)."""
    files, lock, text = setup(tmp)
    loaded, _ = load_lock(lock)
    stack = FakeStack(files, lock, fail, message, deployed=export(files, lock=loaded))
    return stack, files, lock, text


def test_nothing_changes_until_the_preview_is_confirmed(tmp_path: Path) -> None:
    files, lock, before = setup(tmp_path)
    stack = FakeStack(files, lock, {})
    shown: list[UpPreview] = []

    def no(preview: UpPreview) -> bool:
        shown.append(preview)
        return False
    with pytest.raises(UpError, match="not confirmed; nothing was changed"):
        deploy(runner(stack), str(tmp_path), UpOptions(1), print, no)
    assert stack.seen == [] and Path(lock).read_text() == before
    counts = shown[0].report.counts()
    assert counts["create"] == 52 and counts["replace"] == counts["delete"] == 0
    assert shown[0].costs.before == 0 and shown[0].costs.after > 0


def test_an_unchanged_stack_is_not_updated(tmp_path: Path) -> None:
    stack, _, _, _ = deployed_stack(tmp_path, {})
    said: list[str] = []
    result = deploy(runner(stack), str(tmp_path), UpOptions(), said.append, YES)
    assert result.unchanged and stack.seen == []
    assert said[0] == "preview: + 0 to create, ~ 0 to update, +- 0 to replace, - 0 to delete"


def test_the_guards_stop_before_the_update(tmp_path: Path) -> None:
    stack, _, _, _ = deployed_stack(tmp_path, {})
    write(tmp_path, "p5.yml", P5.replace("nodes: 2", "nodes: 1"))
    said: list[str] = []
    with pytest.raises(UpError, match="1 instance\\(s\\) would be replaced or deleted; the "
                                      "limit is 0"):
        deploy(runner(stack), str(tmp_path), UpOptions(max_instances=0), said.append, YES)
    assert stack.seen == []
    assert "nodes replaced or deleted: 1: trainer-node-1" in said
    with pytest.raises(UpError, match="over --max-cost-per-hour 1"):
        deploy(runner(stack), str(tmp_path), UpOptions(max_cost_per_hour=1), print, YES)
    assert stack.seen == []


def test_a_fleet_with_running_nodes_is_never_moved_without_allow_move(tmp_path: Path) -> None:
    stack, _, lock, _ = deployed_stack(tmp_path, {"trainer": 1}, AWS_NO_CAPACITY)
    write(tmp_path, "p5.yml", P5.replace("nodes: 2", "nodes: 3"))  # a scale-up fails
    before = Path(lock).read_text()
    with pytest.raises(UpError) as err:
        deploy(runner(stack), str(tmp_path), UpOptions(3), print, YES)
    text = str(err.value)
    assert "fleet 'trainer' runs 2 node(s), and moving it would replace them all" in text
    assert "--allow-move trainer" in text
    assert text.count("would work: aws ") >= 1 and "replaces its 2 running node(s)" in text
    assert Path(lock).read_text() == before
    stack.fail = {"trainer": 1}
    result = deploy(runner(stack), str(tmp_path), UpOptions(3, frozenset({"trainer"})), print,
                    YES)
    assert result.succeeded
    after = Path(lock).read_text()
    assert entry_lines(after, "trainer") != entry_lines(before, "trainer")
    assert entry_lines(after, "a4") == entry_lines(before, "a4")


def test_the_cli_asks_on_a_terminal_and_needs_yes_without_one(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import gpufleet.components.run.automation as automation

    files, lock, _ = setup(tmp_path)
    stack = FakeStack(files, lock, {})
    monkeypatch.setattr("shutil.which", lambda _name: "/usr/bin/pulumi")
    monkeypatch.setattr(automation.auto, "select_stack", lambda **_: stack)
    r = CliRunner().invoke(cli, ["up", "--stack", "dev", "--cwd", str(tmp_path)])
    assert r.exit_code == 2 and "asks first" in r.output and stack.previews == 0
    monkeypatch.setattr("gpufleet.cli.live.interactive", lambda: True)
    r = CliRunner().invoke(cli, ["up", "--stack", "dev", "--cwd", str(tmp_path),
                                 "--skip-preflight"], input="n\n")
    assert r.exit_code == 1 and "perform this update?" in r.output
    assert "not confirmed" in r.output and stack.seen == []
    r = CliRunner().invoke(cli, ["up", "--stack", "dev", "--cwd", str(tmp_path), "--yes",
                                 "--skip-preflight"])
    assert r.exit_code == 0, r.output
    assert "preview: + 52 to create" in r.output and "deployed stack dev" in r.output
