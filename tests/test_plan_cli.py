"""`gpufleet plan` end to end: offline, exit codes, the JSON contract, Markdown, --out, and
that it runs the same program `stacks/__main__.py` runs."""

from __future__ import annotations

import json
import re
import runpy
from pathlib import Path

import pytest
from click.testing import CliRunner

from gpufleet.cli import cli, main
from gpufleet.components.run import harness, offline

from planutil import EXAMPLES, ROOT, SHARED, stack_config, write

EXAMPLE_LOCK = str(EXAMPLES / "gpufleet.lock")

A4 = str(EXAMPLES / "fleets" / "gcp-a4.dstack.yml")


def test_plan_text_for_the_a4_example() -> None:
    r = CliRunner().invoke(cli, ["plan", A4, *SHARED])
    assert r.exit_code == 0, r.output
    out = r.output
    assert "offer:    gcp us-west2 / us-west2-c  a4-highgpu-8g  8xB200  spot" in out
    assert "fabric:   roce x8; 10 NIC(s) per node (2 GVNIC + 8 MRDMA)" in out
    assert re.search(r"gcp:compute/subnetwork:Subnetwork +10\n", out)
    assert "offline plan" in out
    assert "+ gcp:compute/instance:Instance  a4-node-1" not in out  # the tree: --expand
    lines = r.stdout.splitlines()
    assert lines[4].startswith("plan: + ") and lines[5].startswith("cost: $0.00/h -> ")
    assert next(i for i, x in enumerate(lines) if x.startswith("bill: ")) < 40
    expanded = CliRunner().invoke(cli, ["plan", "--expand", A4, *SHARED]).output
    assert "+ gcp:compute/instance:Instance  a4-node-1" in expanded


def test_plan_json_contract() -> None:
    r = CliRunner().invoke(cli, ["plan", "--format", "json", "--stack", "prod", A4, *SHARED])
    assert r.exit_code == 0, r.output
    data = json.loads(r.stdout)
    fleet = data["fleets"][0]
    for key in ("name", "file", "backend", "region", "zone", "instance_type", "nodes", "spot",
                "price_per_hour"):
        assert key in fleet
    assert (fleet["name"], fleet["backend"], fleet["nodes"], fleet["spot"]) == (
        "a4", "gcp", 2, True)
    res = data["resources"]
    assert all(set(x) >= {"urn", "type", "name", "parent", "inputs"} for x in res)
    assert all(x["urn"].startswith("urn:pulumi:prod::gpufleet::") for x in res)
    node = next(x for x in res if x["name"] == "a4-node-0")
    assert node["urn"] == ("urn:pulumi:prod::gpufleet::gpufleet:gcp:Fleet$"
                           "gcp:compute/instance:Instance::a4-node-0")
    assert "machineType" in node["inputs"] and "networkInterfaces" in node["inputs"]
    # 26 + the bastion, its address and rule + the example filesystem (its range, peering,
    # instance and the node rule admitting its servers)
    assert data["summary"]["resources"] == len(res) == 33


def test_plan_markdown_has_mermaid_topology() -> None:
    r = CliRunner().invoke(cli, ["plan", "--format", "markdown", A4])
    assert r.exit_code == 0, r.output
    assert "```mermaid" in r.output and "flowchart LR" in r.output
    assert "| `a4` | gcp | us-west2 / us-west2-c | `a4-highgpu-8g` |" in r.output


def test_plan_out_is_written_atomically(tmp_path: Path) -> None:
    out = tmp_path / "plan.json"
    r = CliRunner().invoke(cli, ["plan", "--format", "json", "--out", str(out), A4])
    assert r.exit_code == 0 and json.loads(out.read_text())["fleets"][0]["name"] == "a4"
    assert [p.name for p in tmp_path.iterdir()] == ["plan.json"]
    # A failing plan leaves the earlier file untouched.
    bad = write(tmp_path, "bad.yml", "type: fleet\nname: x1\nnodes: 1\nresources:\n"
                "  gpu: H100::8\n")
    before = out.read_text()
    r = CliRunner().invoke(cli, ["plan", "--out", str(out), bad])
    assert r.exit_code == 1 and out.read_text() == before


def test_plan_no_offer_exits_1_without_traceback(tmp_path: Path,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    f = write(tmp_path, "f.yml", "type: fleet\nname: x1\nnodes: 1\nbackends: [gcp]\n"
              "resources:\n  gpu: B200:8\n")
    assert main(["plan", f]) == 1
    err = capsys.readouterr().err
    assert "error[O001]" in err and "Traceback" not in err


def test_stacks_main_runs_the_same_program(monkeypatch: pytest.MonkeyPatch) -> None:
    config = stack_config([A4, *SHARED], None, None, EXAMPLE_LOCK)

    def via_stacks() -> None:
        runpy.run_path(str(ROOT / "stacks" / "__main__.py"), run_name="__main__")

    from gpufleet.components import program
    a = harness.run_program(program.main, config,
                            harness.StrictMocks(offline.INVOKES, offline.outputs))
    b = harness.run_program(via_stacks, config,
                            harness.StrictMocks(offline.INVOKES, offline.outputs))
    assert [r.to_json() for r in a.sorted()] == [r.to_json() for r in b.sorted()]
    assert a.exports == b.exports
    nodes = a.exports["a4"]["nodes"]
    assert [n["name"] for n in nodes] == ["a4-node-0", "a4-node-1"]
    # Addresses are computed by the cloud: offline they are placeholders that say so.
    assert [n["private_ip"] for n in nodes] == ["mock-private-ip-of-a4-node-0-nic0",
                                                "mock-private-ip-of-a4-node-1-nic0"]
    assert a.exports["a4"]["bastion"]["address"] == "mock-address-of-a4-bastion-ip"


def test_strict_mocks_refuse_unknown_invokes_and_next_run_still_works() -> None:
    from gpufleet.components import program
    config = stack_config([A4, *SHARED], None, None, EXAMPLE_LOCK)
    empty = harness.StrictMocks({}, offline.outputs)
    # The existing-network lookups need invokes; with none mocked the run must fail loudly.
    with pytest.raises(Exception, match="un-mocked invoke"):
        harness.run_program(program.main, stack_config([A4], None, None, EXAMPLE_LOCK), empty)
    ok = harness.run_program(program.main, config,
                             harness.StrictMocks(offline.INVOKES, offline.outputs))
    assert len(ok.registrations) == 33


def test_program_aborts_on_invalid_input(tmp_path: Path) -> None:
    from gpufleet.components import program
    bad = write(tmp_path, "bad.yml", "type: fleet\nname: x1\nnodes: -3\n")
    with pytest.raises(Exception, match="min cannot be negative"):
        harness.run_program(program.main, stack_config([bad], None, None),
                            harness.StrictMocks(offline.INVOKES, offline.outputs))
