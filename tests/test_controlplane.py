"""`control_plane` in the backends file: the dstack server on a fleet's bastion, its port open
to `allow` only, the URL in the stack outputs and the export, and nothing else moved."""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

import pytest
from exportutil import export, write_export

from gpufleet.cli import main
from gpufleet.compile import render_server
from gpufleet.input import validate_paths
from gpufleet.views.plan import render_plan_text

from planutil import TEST_KEY, by_type, named, plan_files, write

BACKENDS = (f"access:\n  ssh_public_key: {TEST_KEY}\nbackends:\n"
            "  - type: gcp\n    project_id: p1\n    ssh_cidrs: [203.0.113.0/24]\n"
            "  - type: aws\n    ssh_cidrs: [203.0.113.0/24]\n"
            "  - type: azure\n    subscription_id: s1\n    tenant_id: t1\n"
            "    regions: [eastus]\n    ssh_cidrs: [203.0.113.0/24]\n")
FLEETS = {
    "a4": "nodes: 2\nplacement: cluster\nspot_policy: auto\nresources:\n  gpu: B200:8\n"
          "backends: [gcp]\n",
    "p5": "nodes: 2\nplacement: cluster\nresources:\n  gpu: H100:8\nbackends: [aws]\n",
    "nd": "nodes: 2\nplacement: cluster\nresources:\n  gpu: H100:8\nbackends: [azure]\n",
}


def files(tmp: Path, control: str = "") -> list[str]:
    tmp.mkdir(parents=True, exist_ok=True)
    out = [write(tmp, "backends.yml", BACKENDS + control)]
    out += [write(tmp, f"{n}.yml", f"type: fleet\nname: {n}\n{body}")
            for n, body in FLEETS.items()]
    return out


def own(report: Any, fleet: str) -> list[dict[str, Any]]:
    return [r for r in report.resources if r["name"].startswith(f"{fleet}-")
            or r["name"] == fleet]


@pytest.mark.parametrize("fleet", ["a4", "p5", "nd"])
def test_the_server_is_reached_through_ssh_from_allow_only_and_no_other_fleet_moves(
        tmp_path: Path, fleet: str) -> None:
    plain = plan_files(files(tmp_path / "plain"))
    report = plan_files(files(tmp_path / "cp", f"control_plane:\n  fleet: {fleet}\n"
                              "  allow: [198.51.100.0/24]\n"))
    plan = next(f for f in report.fleets if f.name == fleet)
    assert plan.access is not None and plan.access.bastion is not None
    bastion = plan.access.bastion
    assert bastion.server is not None and bastion.server.port == 3000
    assert bastion.instance_type == {"a4": "e2-medium", "p5": "t3.medium",
                                     "nd": "Standard_B2s"}[fleet]
    script = render_server(bastion.server)
    name = f"{fleet}-bastion"
    if fleet == "a4":
        [rule] = [r for r in by_type(report, "gcp:compute/firewall:Firewall")
                  if r["name"] == "a4-bastion-dstack"]
        assert rule["inputs"]["sourceRanges"] == ["198.51.100.0/24"]
        assert rule["inputs"]["allows"] == [{"protocol": "tcp", "ports": ["22"]}]
        assert rule["inputs"]["targetTags"] == [named(report, name, "gcp:compute/instance:"
                                                      "Instance")["inputs"]["tags"][0]]
        vm = named(report, name, "gcp:compute/instance:Instance")["inputs"]
        assert vm["metadata"]["startup-script"] == script
    elif fleet == "p5":
        sg = named(report, "p5-bastion-sg", "aws:ec2/securityGroup:SecurityGroup")["inputs"]
        ports = {(r["fromPort"], tuple(r["cidrBlocks"])) for r in sg["ingress"]}
        assert ports == {(22, ("203.0.113.0/24",)), (22, ("198.51.100.0/24",))}
        vm = named(report, name, "aws:ec2/instance:Instance")["inputs"]
        assert base64.b64decode(vm["userDataBase64"]).decode() == script
        assert vm["userDataReplaceOnChange"] is True
    else:
        nsg = named(report, "nd-bastion-nsg",
                    "azure-native:network:NetworkSecurityGroup")["inputs"]
        rules = {(r["destinationPortRanges"][0], tuple(r["sourceAddressPrefixes"]))
                 for r in nsg["securityRules"]}
        assert rules == {("22", ("203.0.113.0/24",)), ("22", ("198.51.100.0/24",))}
        vm = named(report, name, "azure-native:compute:VirtualMachine")["inputs"]
        assert base64.b64decode(vm["osProfile"]["customData"]).decode() == script
    # the server listens on the loopback only: no plain HTTP on a public address
    assert "--host 127.0.0.1 --port 3000" in script and "0.0.0.0" not in script
    # nothing opens the port to the internet, and every other fleet is byte-identical
    assert "0.0.0.0/0" not in json.dumps([r for r in own(report, fleet)
                                           if "dstack" in r["name"]])
    for other in FLEETS:
        if other != fleet:
            assert own(report, other) == own(plain, other)
    text = render_plan_text(report)
    assert "control plane: dstack 0.22.5 server on the bastion's 127.0.0.1:3000, reached " \
           "through an SSH tunnel from 198.51.100.0/24" in text


@pytest.mark.parametrize(("control", "code", "message"), [
    ("control_plane:\n  fleet: nope\n", "B015", "control_plane.fleet 'nope' names no fleet"),
    ("control_plane:\n  fleet: a4\n  allow: [0.0.0.0/0]\n", "B014",
     "opens the dstack server to the whole internet"),
    ("control_plane:\n  fleet: a4\n  allow: [not-a-range]\n", "B014", "is not a CIDR range"),
    ("control_plane:\n  fleet: a4\n  allow: []\n", "B017",
     "the dstack server's port would be open to no one"),
    ("control_plane:\n  port: 3000\n", "S007", "is not valid under any of the given schemas"),
])
def test_a_control_plane_that_cannot_be_built_is_refused_where_it_is_written(
        tmp_path: Path, control: str, code: str, message: str,
        capsys: pytest.CaptureFixture[str]) -> None:
    paths = files(tmp_path, control)
    assert main(["plan", *paths]) == 1
    err = capsys.readouterr().err
    assert f"error[{code}]" in err and message in err and "backends.yml:" in err, err


def test_public_nodes_have_no_bastion_to_host_the_server(tmp_path: Path) -> None:
    backends = BACKENDS.replace("    project_id: p1\n", "    project_id: p1\n"
                                "    public_ips: true\n")
    paths = [write(tmp_path, "backends.yml", backends + "control_plane:\n  fleet: a4\n"),
             write(tmp_path, "a4.yml", f"type: fleet\nname: a4\n{FLEETS['a4']}")]
    validated = validate_paths(paths)
    assert validated.ok
    from gpufleet.compile import compile_inputs
    from gpufleet.offers import load_catalog

    compiled = compile_inputs(validated.inputs, load_catalog())
    [diag] = [d for d in compiled.diagnostics if d.code == "B016"]
    assert "fleet 'a4' has no bastion to host the dstack server" in diag.message


def test_the_export_points_private_fleets_at_the_control_plane(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    paths = files(tmp_path, "control_plane:\n  fleet: a4\n  allow: [198.51.100.0/24]\n")
    state = export(paths)
    outputs = next(r for r in state["deployment"]["resources"]
                   if r["type"] == "pulumi:pulumi:Stack")["outputs"]
    server = outputs["a4"]["bastion"]["server"]
    assert server["port"] == 3000 and server["url"] == "http://127.0.0.1:3000"
    assert server["tunnel"] == \
        "ssh -N -L 3000:127.0.0.1:3000 ubuntu@mock-address-of-a4-bastion-ip"
    path = write_export(tmp_path / "state.json", state)
    assert main(["export", "dstack", "--state", path, "--out", str(tmp_path / "out")]) == 0
    err = capsys.readouterr().err
    tunnel = f"(reached through `{server['tunnel']} -i <identity file>`; the server listens " \
             "on the bastion's loopback only)"
    assert f"fleet a4: private nodes; the dstack server at {server['url']} {tunnel} runs " \
           "inside" in err
    assert f"the stack's control plane is on a4 ({server['url']} {tunnel})" in err  # p5's
