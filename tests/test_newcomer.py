"""A newcomer's first hour: what `validate`, `offers`, `lock` and `plan` tell a new user
(issue 42): keys a later step needs refused where they are written, no offer listed that
`plan` refuses, gateways priced alike by `lock` and `plan`, dstack's own conversions
accepted, and the next step after `gpufleet lock`."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from gpufleet.cli import cli, main

from planutil import EXAMPLES, write

AZURE = "backends:\n  - type: azure\n    subscription_id: s1\n    tenant_id: t1\n"
H100_CLUSTER = ("type: fleet\nname: h1\nnodes: 2\nplacement: cluster\nbackends: [gcp]\n"
                "resources:\n  gpu: H100:8\n")


@pytest.mark.parametrize(("entry", "key"), [
    ("  - type: azure\n    subscription_id: s1\n", "tenant_id"),
    ("  - type: azure\n    tenant_id: t1\n", "subscription_id"),
])
def test_a_key_export_needs_is_refused_at_the_backend_line(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], entry: str, key: str) -> None:
    b = write(tmp_path, "backends.yml", "access: {bastion: none}\nbackends:\n" + entry)
    assert main(["validate", b]) == 1
    out = capsys.readouterr().out
    assert "backends.yml:3:5: error[B019]: the" in out and f"sets no `{key}`" in out
    assert "`gpufleet export dstack` writes it" in out


def test_gcp_project_id_is_required_by_the_schema(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    b = write(tmp_path, "backends.yml", "backends:\n  - type: gcp\n    cidr: 10.0.0.0/8\n")
    assert main(["validate", b]) == 1
    assert "backends.yml:2:5: error[S004]: missing required key 'project_id'" in \
        capsys.readouterr().out


def test_offers_lists_apart_what_plan_refuses_and_plan_says_why(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    f = write(tmp_path, "f.yml", H100_CLUSTER)
    b = write(tmp_path, "backends.yml", "backends:\n  - type: gcp\n    project_id: p1\n")
    assert main(["offers", f, b, "--format", "json"]) == 1
    data = json.loads(capsys.readouterr().out)["fleets"][0]
    assert data["offers"] == [] and data["refused"]["code"] == "C015"
    assert {o["instance_type"] for o in data["refused"]["offers"]} <= {
        "a3-highgpu-8g", "a3-edgegpu-8g", "a3-megagpu-8g"}
    assert main(["plan", f, b]) == 1
    assert "error[C015]" in capsys.readouterr().err
    # with another cloud allowed, plan takes the cheapest offer it can build, and offers
    # lists exactly what plan may pick
    f2 = write(tmp_path, "f2.yml", H100_CLUSTER.replace("[gcp]", "[gcp, aws]"))
    b2 = write(tmp_path, "b2.yml", "backends:\n  - type: gcp\n    project_id: p1\n"
               "  - type: aws\n")
    assert main(["offers", f2, b2, "--format", "json"]) == 0
    listed = json.loads(capsys.readouterr().out)["fleets"][0]
    assert {o["backend"] for o in listed["offers"]} == {"aws"}
    assert main(["plan", f2, b2, "--format", "json"]) == 0
    plan = json.loads(capsys.readouterr().out)
    assert plan["fleets"][0]["instance_type"] == listed["offers"][0]["instance_type"]


def test_lock_prices_the_gateways_as_plan_does(tmp_path: Path) -> None:
    r = CliRunner().invoke(cli, ["lock", str(EXAMPLES / "gateways"),
                                 str(EXAMPLES / "backends.yml"), "--lock",
                                 str(tmp_path / "gpufleet.lock")])
    assert r.exit_code == 0, r.output
    lock = yaml.safe_load((tmp_path / "gpufleet.lock").read_text())
    prices = {n: g["price"] for n, g in lock["gateways"].items()}
    assert prices == {"gw-aws": 0.0104, "gw-azure": 0.0207, "gw-gcp": 0.040245}


def test_nodes_true_is_one_node_as_dstack_reads_it(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    f = write(tmp_path, "f.yml", "type: fleet\nname: one\nnodes: true\nresources:\n  gpu: L4\n")
    assert main(["validate", f]) == 0
    err = capsys.readouterr().out
    assert "warning[L013]: nodes: true is read as 1, as dstack's models convert it" in err


def test_the_next_step_after_lock_is_up(tmp_path: Path,
                                        capsys: pytest.CaptureFixture[str]) -> None:
    files = [write(tmp_path, "f.yml", "type: fleet\nname: dev\nnodes: 1\nbackends: [aws]\n"
                   "resources:\n  gpu: L4\n"),
             write(tmp_path, "backends.yml", "backends:\n  - type: aws\n"
                   "access: {ssh_public_key: ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIG9LLh "
                   "me@host, bastion: none}\n")]
    assert main(["plan", *files]) == 0
    assert "next: `gpufleet lock` records the offers" in capsys.readouterr().out
    assert main(["lock", *files]) == 0
    capsys.readouterr()
    assert main(["plan", *files, "--locked"]) == 0
    assert "next: `gpufleet up` previews" in capsys.readouterr().out
