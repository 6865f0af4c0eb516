"""`gpufleet replace FLEET NODE...`: exactly those nodes through `pulumi up --replace`.

As for `gpufleet up`, no engine runs here (no Pulumi CLI can be installed): the real
Automation API runner drives a stand-in for `pulumi.automation.Stack` whose preview answers
`replace=[URN...]` the way the engine does (create-replacement, replace and delete-replaced
steps for each URN, engine events of the Automation API's own types), and whose state is
what the stack program creates for these files."""

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

from gpufleet.cli import cli
from gpufleet.components.run.automation import AutomationStack
from gpufleet.input.validate import load_lock
from gpufleet.live import ReplaceError, replace_nodes

from planutil import TEST_KEY, write

BACKENDS = (f"access:\n  ssh_public_key: {TEST_KEY}\nbackends:\n"
            "  - type: gcp\n    project_id: p1\n    ssh_cidrs: [198.51.100.0/24]\n"
            "  - type: aws\n    ssh_cidrs: [198.51.100.0/24]\n"
            "  - type: azure\n    subscription_id: s1\n    tenant_id: t1\n"
            "    regions: [eastus]\n    ssh_cidrs: [198.51.100.0/24]\n")
FLEETS = {
    "a4": "nodes: {n}\nplacement: cluster\nspot_policy: auto\nresources:\n  gpu: B200:8\n"
          "backends: [gcp]\n",
    "p5": "nodes: 2\nplacement: cluster\nresources:\n  gpu: H100:8\nbackends: [aws]\n",
    "nd": "nodes: 2\nplacement: cluster\nresources:\n  gpu: H100:8\nbackends: [azure]\n",
}


def files(tmp: Path, a4_nodes: int = 3) -> list[str]:
    out = [write(tmp, "backends.yml", BACKENDS)]
    out += [write(tmp, f"{n}.yml", f"type: fleet\nname: {n}\n" + body.format(n=a4_nodes))
            for n, body in FLEETS.items()]
    r = CliRunner().invoke(cli, ["lock", *out])
    assert r.exit_code == 0, r.output
    return out


def step(seq: int, op: str, urn: str) -> ev.EngineEvent:
    typ = urn.split("::")[-2].split("$")[-1]
    md = ev.StepEventMetadata(op=ev.OpType(op), urn=urn, type=typ, provider="", keys=[],
                              diffs=[], detailed_diff=None)
    return ev.EngineEvent(sequence=seq, timestamp=seq,
                          resource_pre_event=ev.ResourcePreEvent(metadata=md))


class ReplaceStack:
    """Stands in for `pulumi.automation.Stack`: config, state, and a preview / up that take
    `replace=[URN...]` as the Automation API passes `--replace`."""

    def __init__(self, paths: list[str], deployed: dict[str, Any],
                 extra: tuple[tuple[str, str], ...] = ()) -> None:
        self.paths, self.deployed, self.extra = paths, deployed, extra
        self.previewed: list[list[str]] = []
        self.updated: list[list[str]] = []

    def get_all_config(self) -> dict[str, auto.ConfigValue]:
        return {"gpufleet:files": auto.ConfigValue(json.dumps(self.paths))}

    def export_stack(self) -> auto.Deployment:
        return auto.Deployment(version=3, deployment=self.deployed["deployment"])

    def preview(self, on_event: Any = None, replace: list[str] | None = None,
                **_: Any) -> auto.PreviewResult:
        self.previewed.append(list(replace or []))
        seq = 0
        for urn in replace or []:
            for op in ("create-replacement", "replace", "delete-replaced"):
                on_event(step(seq, op, urn))
                seq += 1
        for op, urn in self.extra:
            on_event(step(seq, op, urn))
            seq += 1
        return auto.PreviewResult("", "", {"replace": len(replace or [])})

    def up(self, on_output: Any = None, on_event: Any = None,
           replace: list[str] | None = None) -> auto.UpResult:
        self.updated.append(list(replace or []))
        summary = auto.UpdateSummary(kind="update", start_time=dt.datetime(2026, 11, 1),
                                     message="", environment={}, config={},
                                     result="succeeded")
        return auto.UpResult("Update succeeded\n", "", summary, {})


def urn_of(deployed: dict[str, Any], name: str, typ: str) -> str:
    return next(r["urn"] for r in deployed["deployment"]["resources"]
                if r["urn"].endswith(f"::{name}") and r["type"] == typ)


@pytest.fixture
def stack(tmp_path: Path) -> ReplaceStack:
    paths = files(tmp_path)
    lock, _ = load_lock(str(tmp_path / "gpufleet.lock"))
    return ReplaceStack(paths, export(paths, lock=lock))


def runner(stack: ReplaceStack, lines: list[str]) -> AutomationStack:
    return AutomationStack(stack, "dev", "stacks", lines.append)


GCE = "gcp:compute/instance:Instance"


def test_exactly_the_named_nodes_are_replaced(stack: ReplaceStack, tmp_path: Path) -> None:
    lines: list[str] = []
    urn = urn_of(stack.deployed, "a4-node-1", GCE)
    shown = replace_nodes(runner(stack, lines), str(tmp_path), "a4", ["1"], lines.append,
                          lambda _p: True)
    assert shown.nodes == ("a4-node-1",) and shown.urns == (urn,)
    assert stack.previewed == [[urn]] and stack.updated == [[urn]]
    assert [(c.op, c.name) for c in shown.changes] == [("replace", "a4-node-1")]
    assert f"  urn: {urn}" in lines
    # two nodes by name, in the order given, and one preview and update for both
    stack.previewed.clear()
    stack.updated.clear()
    both = replace_nodes(runner(stack, lines), str(tmp_path), "a4", ["a4-node-2", "a4-node-0"],
                         lines.append, lambda _p: True)
    assert both.nodes == ("a4-node-2", "a4-node-0") and stack.updated == [list(both.urns)]


def test_dry_run_previews_and_changes_nothing(stack: ReplaceStack, tmp_path: Path) -> None:
    lines: list[str] = []
    replace_nodes(runner(stack, lines), str(tmp_path), "p5", ["p5-node-0"], lines.append,
                  lambda _p: pytest.fail("no question in a dry run"), dry_run=True)
    assert stack.updated == [] and len(stack.previewed) == 1
    assert lines[0] == "replace in fleet p5: p5-node-0"
    assert "preview: 1 change(s)" in lines


def test_a_preview_that_touches_anything_else_is_refused(tmp_path: Path) -> None:
    paths = files(tmp_path)
    lock, _ = load_lock(str(tmp_path / "gpufleet.lock"))
    deployed = export(paths, lock=lock)
    other = urn_of(deployed, "p5-node-0", "aws:ec2/instance:Instance")
    stack = ReplaceStack(paths, deployed, extra=(("update", other),))
    lines: list[str] = []
    with pytest.raises(ReplaceError, match="not exactly these replacements") as e:
        replace_nodes(runner(stack, lines), str(tmp_path), "a4", ["a4-node-0"], lines.append,
                      lambda _p: True)
    assert "update p5-node-0" in str(e.value) and stack.updated == []


def test_a_lambda_node_is_replaced_with_its_wait_and_nothing_else(tmp_path: Path) -> None:
    """A Lambda node's `<node>-ready` (its wait for `active`) takes the new instance's id:
    the engine replaces it with the node, which the preview may show; another node's is
    still refused."""
    paths = [write(tmp_path, "backends.yml", f"access:\n  ssh_public_key: {TEST_KEY}\n"
                   "backends:\n  - type: lambda\n    regions: [us-east-1]\n"
                   "    ssh_cidrs: [198.51.100.0/24]\n"),
             write(tmp_path, "lam.yml", "type: fleet\nname: lam\nnodes: 2\nresources:\n"
                   "  gpu: H100:8\nbackends: [lambda]\n")]
    r = CliRunner().invoke(cli, ["lock", *paths])
    assert r.exit_code == 0, r.output
    lock, _ = load_lock(str(tmp_path / "gpufleet.lock"))
    deployed = export(paths, lock=lock)
    ready = "pulumi-python:dynamic/lambda:InstanceReady"
    node = urn_of(deployed, "lam-node-1", "pulumi-python:dynamic/lambda:Instance")
    for wait, ok in (("lam-node-1-ready", True), ("lam-node-0-ready", False)):
        stack = ReplaceStack(paths, deployed, extra=(("replace", urn_of(deployed, wait,
                                                                        ready)),))
        lines: list[str] = []
        if ok:
            shown = replace_nodes(runner(stack, lines), str(tmp_path), "lam", ["1"],
                                  lines.append, lambda _p: True)
            assert shown.urns == (node,) and stack.updated == [[node]]
        else:
            with pytest.raises(ReplaceError, match="replace lam-node-0-ready"):
                replace_nodes(runner(stack, lines), str(tmp_path), "lam", ["1"],
                              lines.append, lambda _p: True)
            assert stack.updated == []


def test_unknown_undeployed_and_scale_set_nodes_are_refused_before_any_preview(
        tmp_path: Path) -> None:
    paths = files(tmp_path, a4_nodes=2)
    lock, _ = load_lock(str(tmp_path / "gpufleet.lock"))
    stack = ReplaceStack(paths, export(paths, lock=lock))
    lines: list[str] = []
    with pytest.raises(ReplaceError, match="fleet a4 has no node 'a4-node-7'; its nodes: "
                                           "a4-node-0, a4-node-1"):
        replace_nodes(runner(stack, lines), str(tmp_path), "a4", ["a4-node-7"], lines.append,
                      lambda _p: True)
    with pytest.raises(ReplaceError, match=r"is a scale set on azure.*through the cloud's API"):
        replace_nodes(runner(stack, lines), str(tmp_path), "nd", ["0"], lines.append,
                      lambda _p: True)
    with pytest.raises(ReplaceError, match="the stack's files have no fleet 'zz'"):
        replace_nodes(runner(stack, lines), str(tmp_path), "zz", ["0"], lines.append,
                      lambda _p: True)
    # the YAML grew a node the stack has not created yet
    grown = files(tmp_path, a4_nodes=3)
    stack.paths = grown
    with pytest.raises(ReplaceError, match="not deployed: a4-node-2"):
        replace_nodes(runner(stack, lines), str(tmp_path), "a4", ["2"], lines.append,
                      lambda _p: True)
    assert stack.previewed == [] and stack.updated == []


def test_the_cli_documents_itself_and_asks_first(
        stack: ReplaceStack, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import gpufleet.components.run.automation as automation

    text = CliRunner().invoke(cli, ["replace", "--help"]).output
    assert "pulumi up --replace" in text and "--dry-run" in text and "redeployed" in text
    monkeypatch.setattr("shutil.which", lambda _name: "/usr/bin/pulumi")
    monkeypatch.setattr(automation.auto, "select_stack", lambda **_: stack)
    args = ["replace", "a4", "a4-node-0", "--stack", "dev", "--cwd", str(tmp_path)]
    r = CliRunner().invoke(cli, args)
    assert r.exit_code == 2 and "asks first" in r.output and stack.updated == []
    r = CliRunner().invoke(cli, [*args, "--dry-run"])
    assert r.exit_code == 0 and "urn:" in r.output and stack.updated == []
    r = CliRunner().invoke(cli, [*args, "--yes"])
    assert r.exit_code == 0, r.output
    assert "replaced a4-node-0 in stack dev" in r.output and len(stack.updated) == 1
    r = CliRunner().invoke(cli, ["replace", "a4", "a4-node-9", "--stack", "dev", "--cwd",
                                 str(tmp_path), "--yes"])
    assert r.exit_code == 1 and "has no node 'a4-node-9'" in r.output


class Answer:
    def __init__(self, status: int, body: Any, headers: dict[str, str] | None = None) -> None:
        self.status_code, self._body, self.headers = status, body, headers or {}

    def json(self) -> Any:
        return self._body


class ArmSession:
    """Answers ARM's REST calls from recorded shapes (Virtual Machine Scale Set VMs - List,
    with a nextLink page; Redeploy: 202 and an Azure-AsyncOperation to poll)."""

    def __init__(self, vmss: str, final: str = "Succeeded") -> None:
        base = f"https://management.azure.com{vmss}"
        self.list_url = f"{base}/virtualMachines?api-version=2024-07-01"
        self.page2 = f"{self.list_url}&$skiptoken=2"
        self.redeploy_url = f"{base}/redeploy?api-version=2024-07-01"
        self.op = ("https://management.azure.com/providers/Microsoft.Compute/locations/"
                   "eastus/operations/op-1?api-version=2024-07-01")
        self.final = final
        self.posts: list[tuple[str, Any]] = []
        self.polls = 0

    @staticmethod
    def vm(i: int) -> dict[str, Any]:
        return {"instanceId": str(i), "name": f"nd-vmss_{i}",
                "properties": {"osProfile": {"computerName": f"nd-vmss{i:06d}"}}}

    def get(self, url: str, timeout: float = 0) -> Answer:
        if url == self.list_url:
            return Answer(200, {"value": [self.vm(0)], "nextLink": self.page2})
        if url == self.page2:
            return Answer(200, {"value": [self.vm(1)]})
        if url == self.op:
            self.polls += 1
            return Answer(200, {"status": "InProgress" if self.polls < 2 else self.final})
        return Answer(404, {"error": {"code": "NotFound"}})

    def post(self, url: str, json: Any = None, timeout: float = 0) -> Answer:
        self.posts.append((url, json))
        if url != self.redeploy_url:
            return Answer(404, {})
        return Answer(202, None, {"Azure-AsyncOperation": self.op})


def test_a_scale_set_instance_is_redeployed_onto_a_new_host(
        stack: ReplaceStack, tmp_path: Path) -> None:
    from gpufleet.backends.azure.live import ScaleSetApi

    vmss = next(r["id"] for r in stack.deployed["deployment"]["resources"]
                if r["type"] == "azure-native:compute:VirtualMachineScaleSet")
    session = ArmSession(vmss)
    api = ScaleSetApi(session, sleep=lambda _s: None)
    lines: list[str] = []
    # by computer name (what `hostname` and the burn-in report show) and by instance id
    shown = replace_nodes(runner(stack, lines), str(tmp_path), "nd", ["nd-vmss000001", "0"],
                          lines.append, lambda _p: True, scale_sets=lambda _backend: api)
    assert shown.nodes == ("nd-vmss_1", "nd-vmss_0")
    assert session.posts == [(session.redeploy_url, {"instanceIds": ["1", "0"]})]
    assert session.polls == 2  # followed the operation to its end
    assert stack.previewed == [] and stack.updated == []  # Pulumi's state is not touched
    assert "moved to a new host" in lines[1]
    # a dry run lists and does not redeploy; an unknown instance is refused
    session.posts.clear()
    replace_nodes(runner(stack, lines), str(tmp_path), "nd", ["1"], lines.append,
                  lambda _p: pytest.fail("no question"), dry_run=True,
                  scale_sets=lambda _backend: api)
    assert session.posts == []
    with pytest.raises(ReplaceError, match="has no instance 'nd-vmss_7'; its instances: "
                                           "nd-vmss_0, nd-vmss_1"):
        replace_nodes(runner(stack, lines), str(tmp_path), "nd", ["nd-vmss_7"], lines.append,
                      lambda _p: True, scale_sets=lambda _backend: api)
    failing = ScaleSetApi(ArmSession(vmss, final="Failed"), sleep=lambda _s: None)
    with pytest.raises(ReplaceError, match="redeploy ended Failed"):
        replace_nodes(runner(stack, lines), str(tmp_path), "nd", ["0"], lines.append,
                      lambda _p: True, scale_sets=lambda _backend: failing)
