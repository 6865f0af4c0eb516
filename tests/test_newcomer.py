"""A newcomer's first hour: what `validate`, `offers`, `lock` and `plan` tell a new user
(issue 42): keys a later step needs refused where they are written, no offer listed that
`plan` refuses, gateways priced alike by `lock` and `plan`, dstack's own conversions
accepted, and the next step after `gpufleet lock`."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner
from exportutil import export

from gpufleet.cli import cli, main

from planutil import EXAMPLES, TEST_KEY, write

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
    high = H100_CLUSTER.replace("resources:", "instance_types: [a3-highgpu-8g, a3-edgegpu-8g]"
                                "\nresources:")
    f = write(tmp_path, "f.yml", high)
    b = write(tmp_path, "backends.yml", "backends:\n  - type: gcp\n    project_id: p1\n")
    assert main(["offers", f, b, "--format", "json"]) == 1
    data = json.loads(capsys.readouterr().out)["fleets"][0]
    assert data["offers"] == [] and data["refused"]["code"] == "C015"
    assert {o["instance_type"] for o in data["refused"]["offers"]} <= {
        "a3-highgpu-8g", "a3-edgegpu-8g"}
    assert main(["plan", f, b]) == 1
    assert "error[C015]" in capsys.readouterr().err
    # any H100 cluster on gcp: A3 Mega (TCPXO) is built, A3 High / Edge are listed apart
    f = write(tmp_path, "f.yml", H100_CLUSTER)
    assert main(["offers", f, b, "--format", "json"]) == 0
    data = json.loads(capsys.readouterr().out)["fleets"][0]
    assert {o["instance_type"] for o in data["offers"]} == {"a3-megagpu-8g"}
    assert {o["instance_type"] for o in data["refused"]["offers"]} <= {
        "a3-highgpu-8g", "a3-edgegpu-8g"} and data["refused"]["code"] == "C015"
    assert main(["plan", f, b, "--format", "json"]) == 0
    planned = json.loads(capsys.readouterr().out)["fleets"][0]
    assert planned["instance_type"] == "a3-megagpu-8g"
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


FLEET = ("type: fleet\nname: a4\nnodes: 2\nplacement: cluster\nbackends: [gcp]\n"
         "spot_policy: auto\nresources:\n  gpu: B200:8\n")
GCP = (f"access:\n  ssh_public_key: {TEST_KEY}\nbackends:\n  - type: gcp\n    project_id: p1\n"
       "    ssh_cidrs: [198.51.100.0/24]\n")


def test_before_is_what_runs(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """plan: an empty stack costs $0 before; diff: the export's nodes are priced from the
    lock, else from the catalog, and the line says which."""
    files = [write(tmp_path, "f.yml", FLEET), write(tmp_path, "b.yml", GCP)]
    assert main(["plan", *files]) == 0
    line = next(x for x in capsys.readouterr().out.splitlines() if x.startswith("cost: "))
    assert line.startswith("cost: $0.00/h -> $65.") and "the plan starts from an empty" in line
    state = write(tmp_path, "state.json", json.dumps(export(files)))
    for lock_args, source in (([], "today's catalog and price table for a4"),
                              (["--locked"], "the lock's prices for a4")):
        if lock_args:
            assert main(["lock", *files]) == 0
        capsys.readouterr()
        assert main(["diff", "--state", state, *files, *lock_args]) == 0
        out = capsys.readouterr().out
        line = next(x for x in out.splitlines() if x.startswith("cost: "))
        before, after = re.match(r"cost: (\S+)/h -> (\S+)/h", line).groups()  # type: ignore[union-attr]
        assert before == after and before.startswith("$65."), line
        assert f"before = what the export runs, at {source}" in line


LOGS = EXAMPLES / "logs"


@pytest.mark.parametrize("log", sorted(p.name for p in LOGS.glob("*.log")))
def test_the_sample_logs_pass_their_checks_and_say_they_are_samples(
        log: str, capsys: pytest.CaptureFixture[str]) -> None:
    text = (LOGS / log).read_text()
    assert text.startswith("# SAMPLE log written by scripts/sample_logs.py")
    assert main(["acceptance", "check", str(LOGS / log), "--fleet", "a4", str(EXAMPLES)]) == 0
    last = capsys.readouterr().out.rstrip().splitlines()[-1]
    assert last == "PASS" or last.startswith("PASS: ")


def test_the_sample_nccl_logs_make_a_scaling_report_that_can_be_rerun(tmp_path: Path) -> None:
    logs = [str(p) for p in sorted(LOGS.glob("a4-nccl-*.log"))]
    assert len(logs) == 3
    plot = tmp_path / "scaling.png"
    for _ in range(2):  # the second run replaces the plot it wrote
        assert main(["acceptance", "report", *logs, "--fleet", "a4", str(EXAMPLES),
                     "--plot", str(plot)]) == 0
    assert plot.read_bytes().startswith(b"\x89PNG")


def test_export_from_the_plans_exports_marks_the_placeholders(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The README's offline walk-through: the plan JSON's `exports` as `--outputs`."""
    assert main(["plan", str(EXAMPLES), "--format", "json"]) == 0
    exports = json.loads(capsys.readouterr().out)["exports"]
    outputs = write(tmp_path, "outputs.json", json.dumps(exports))
    out = tmp_path / "out"
    assert main(["export", "dstack", "--outputs", outputs, "--out", str(out)]) == 0
    err = capsys.readouterr().err
    a4 = (out / "a4.dstack.yml").read_text()
    assert a4.startswith("# PLACEHOLDERS: mock-address-of-a4-bastion-ip")
    assert "export again from the deployed stack" in a4
    assert "hold the offline plan's placeholder values (mock-...): a3mega.dstack.yml, " \
        "a4.dstack.yml" in err
    assert yaml.safe_load(a4)["name"] == "a4"  # still a fleet file dstack reads
    # re-run: the files it wrote (placeholders marked first) are its own and are replaced
    assert main(["export", "dstack", "--outputs", outputs, "--out", str(out)]) == 0
