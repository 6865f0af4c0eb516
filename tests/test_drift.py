"""`gpufleet drift`: the translation of engine events into the change report, and the
behaviour without a Pulumi CLI.

Why events are built by hand: the drift command needs the Pulumi CLI and a real stack,
which CI cannot have. The Automation API hands `on_event` callbacks instances of its own
event classes (`pulumi.automation.events`); building those same classes here tests the
translation against the exact types the CLI's event stream is parsed into.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from click.testing import CliRunner
from pulumi.automation import events as ev

from gpufleet.cli import cli
from gpufleet.live import changes_from_events, merge
from gpufleet.review.changes import guard

FLEET = "urn:pulumi:prod::gpufleet::gpufleet:gcp:Fleet::a4"
NET = "urn:pulumi:prod::gpufleet::gpufleet:gcp:Fleet$gpufleet:gcp:Network::a4-net"
FW = ("urn:pulumi:prod::gpufleet::gpufleet:gcp:Fleet$gpufleet:gcp:Network$"
      "gcp:compute/firewall:Firewall::a4-ssh")
NODE = "urn:pulumi:prod::gpufleet::gpufleet:gcp:Fleet$gcp:compute/instance:Instance::a4-node-1"
SUBNET = ("urn:pulumi:prod::gpufleet::gpufleet:gcp:Fleet$gpufleet:gcp:Network$"
          "gcp:compute/subnetwork:Subnetwork::a4-subnet")


def state(urn: str, typ: str, parent: str, inputs: dict | None = None,
          outputs: dict | None = None) -> ev.StepEventStateMetadata:
    return ev.StepEventStateMetadata(type=typ, urn=urn, id=f"{urn.rsplit('::', 1)[1]}-id",
                                     parent=parent, provider="", custom=True, protect=False,
                                     inputs=inputs or {}, outputs=outputs or {})


def pre(seq: int, op: ev.OpType, urn: str, typ: str, old: ev.StepEventStateMetadata | None,
        new: ev.StepEventStateMetadata | None, detailed: dict | None = None,
        keys: list[str] | None = None) -> ev.EngineEvent:
    md = ev.StepEventMetadata(op=op, urn=urn, type=typ, provider="", old=old, new=new,
                              keys=keys, diffs=list(detailed or {}),
                              detailed_diff=detailed)
    return ev.EngineEvent(sequence=seq, timestamp=seq,
                          resource_pre_event=ev.ResourcePreEvent(metadata=md))


def parent_events() -> list[ev.EngineEvent]:
    fleet = state(FLEET, "gpufleet:gcp:Fleet", "")
    net = state(NET, "gpufleet:gcp:Network", FLEET)
    return [pre(1, ev.OpType.SAME, FLEET, "gpufleet:gcp:Fleet", fleet, fleet),
            pre(2, ev.OpType.SAME, NET, "gpufleet:gcp:Network", net, net)]


def test_refresh_events_become_out_of_band_edits() -> None:
    fw_old = state(FW, "gcp:compute/firewall:Firewall", NET,
                   outputs={"sourceRanges": ["203.0.113.0/24"]})
    fw_new = state(FW, "gcp:compute/firewall:Firewall", NET,
                   outputs={"sourceRanges": ["0.0.0.0/0"]})
    node = state(NODE, "gcp:compute/instance:Instance", FLEET)
    events = [*parent_events(),
              pre(3, ev.OpType.UPDATE, FW, "gcp:compute/firewall:Firewall", fw_old, fw_new,
                  {"sourceRanges[0]": ev.PropertyDiff(ev.DiffKind.UPDATE, False)}),
              pre(4, ev.OpType.DELETE, NODE, "gcp:compute/instance:Instance", node, None),
              pre(5, ev.OpType.REFRESH, SUBNET, "gcp:compute/subnetwork:Subnetwork",
                  None, None)]
    changes = changes_from_events(events, "refresh")  # ordered by URN
    assert [(c.name, c.op, c.klass) for c in changes] == [
        ("a4-node-1", "delete", "deleted out of band"),
        ("a4-ssh", "update", "out-of-band edit")]
    fw = changes[1]
    assert fw.owner == "a4"
    assert [(p.path, p.old, p.new, p.kind) for p in fw.properties] == [
        ("sourceRanges[0]", "203.0.113.0/24", "0.0.0.0/0", "update")]
    assert "pulumi refresh" in fw.action
    assert changes[0].yaml_key == "nodes"


def test_preview_events_become_pending_changes_and_replacements_collapse() -> None:
    old = state(SUBNET, "gcp:compute/subnetwork:Subnetwork", NET,
                inputs={"ipCidrRange": "10.1.0.0/19"})
    new = state(SUBNET, "gcp:compute/subnetwork:Subnetwork", NET,
                inputs={"ipCidrRange": "10.2.0.0/19"})
    diff = {"ipCidrRange": ev.PropertyDiff(ev.DiffKind.UPDATE_REPLACE, True)}
    events = [*parent_events(),
              pre(3, ev.OpType.CREATE_REPLACEMENT, SUBNET, "gcp:compute/subnetwork:Subnetwork",
                  old, new, diff, ["ipCidrRange"]),
              pre(4, ev.OpType.REPLACE, SUBNET, "gcp:compute/subnetwork:Subnetwork", old, new,
                  diff, ["ipCidrRange"]),
              pre(5, ev.OpType.DELETE_REPLACED, SUBNET, "gcp:compute/subnetwork:Subnetwork",
                  old, new, diff, ["ipCidrRange"])]
    changes = changes_from_events(events, "preview")
    assert len(changes) == 1
    c = changes[0]
    assert (c.op, c.klass, c.yaml_key, c.reasons) == (
        "replace", "pending program change", "cidr (backends file)", ("ipCidrRange",))
    assert [(p.old, p.new, p.kind) for p in c.properties] == [
        ("10.1.0.0/19", "10.2.0.0/19", "update-replace")]
    assert guard(changes, ("replace",), (), None) == [
        "replace of network a4-subnet (gcp:compute/subnetwork:Subnetwork) is forbidden"]


def test_merge_keeps_out_of_band_edit_and_new_pending_ops() -> None:
    node = state(NODE, "gcp:compute/instance:Instance", FLEET)
    refresh = changes_from_events(
        [pre(1, ev.OpType.DELETE, NODE, "gcp:compute/instance:Instance", node, None)], "refresh")
    preview = changes_from_events(
        [pre(1, ev.OpType.CREATE, NODE, "gcp:compute/instance:Instance", None, node)], "preview")
    merged = merge(refresh, preview)
    assert [(c.op, c.klass) for c in merged] == [("delete", "deleted out of band"),
                                                 ("create", "pending program change")]


def test_drift_without_the_pulumi_cli_exits_2(tmp_path: Path,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))  # an empty folder: no `pulumi` anywhere
    r = CliRunner().invoke(cli, ["drift", "--stack", "prod", "--cwd", str(tmp_path)])
    assert r.exit_code == 2
    assert "the Pulumi CLI is not installed" in r.output
    assert "Traceback" not in r.output
    assert os.environ["PATH"] == str(tmp_path)
