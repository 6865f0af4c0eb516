"""The diff shows every node a change replaces: a replaced network takes the instances, NICs
and scale sets on it along, with the chain of causes down to the YAML key, and the guards
count them. And a value read at `pulumi up` (the SSH key from the stack config) is never a
change offline."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from exportutil import export

from gpufleet.cli.runs import offline_diff
from gpufleet.input import Lock, validate_paths
from gpufleet.offers import load_catalog
from gpufleet.review import Change, GuardOptions, Report, parse_export
from gpufleet.review.cascade import Node, cascade
from gpufleet.review.changes import PropertyChange

from planutil import TEST_KEY, write

BACKENDS = (f"access: {{ssh_public_key: \"{TEST_KEY}\"}}\nbackends:\n"
            "  - {type: aws, ssh_cidrs: [203.0.113.0/24]}\n"
            "  - {type: gcp, project_id: p1, ssh_cidrs: [203.0.113.0/24]}\n"
            "  - {type: azure, subscription_id: 00000000-0000-0000-0000-000000000000,"
            " tenant_id: t, ssh_cidrs: [203.0.113.0/24]}\n")
FLEETS = {
    "aws": "type: fleet\nname: p5\nnodes: 2\nplacement: cluster\nbackends: [aws]\n"
           "resources:\n  gpu: H100:8\n",
    "gcp": "type: fleet\nname: g2\nnodes: 2\nbackends: [gcp]\nresources:\n  gpu: 0\n",
    "azure": "type: fleet\nname: nd\nnodes: 2\nplacement: cluster\nbackends: [azure]\n"
             "resources:\n  gpu: H100:8\n",
    "azure-vm": "type: fleet\nname: vm\nnodes: 1\nbackends: [azure]\nresources:\n  gpu: 0\n",
}
# Pools that hold none of the blocks the default pools gave these fleets.
POOLS = {"aws": "10.0.0.0/12", "gcp": "10.96.0.0/12", "azure": "10.32.0.0/12"}


def diff(tmp: Path, fleet: str, backends: str, state: dict[str, Any],
         guards: GuardOptions | None = None, full: bool = False,
         key: str | None = None) -> Report:
    paths = [write(tmp, "backends.yml", backends), write(tmp, "fleet.yml", fleet)]
    validated = validate_paths(paths)
    assert validated.ok, validated.diagnostics
    report, diags = offline_diff(validated, load_catalog(), paths,
                                 parse_export(json.dumps(state)), None, None,
                                 guards or GuardOptions(), Lock(exists=False), full=full,
                                 ssh_public_key=key)
    assert report is not None, diags
    return report


def readdressed(tmp: Path, cloud: str) -> tuple[Report, Report]:
    """The export of one fleet, then the diff after the cloud's pool moved; and the same
    diff with --max-instances 1."""
    fleet = FLEETS[cloud]
    backend = cloud.split("-")[0]
    state = export([write(tmp, "backends.yml", BACKENDS), write(tmp, "fleet.yml", fleet)])
    moved = BACKENDS.replace(f"{{type: {backend},", f"{{type: {backend}, "
                             f"cidr: {POOLS[backend]},")
    return (diff(tmp, fleet, moved, state),
            diff(tmp, fleet, moved, state, GuardOptions(max_instances=1)))


def by_name(report: Report) -> dict[str, Change]:
    return {c.name: c for c in report.changes}


def test_aws_subnet_replacement_replaces_every_node_and_the_guard_fires(tmp_path: Path) -> None:
    report, guarded = readdressed(tmp_path, "aws")
    changes = by_name(report)
    assert changes["p5-subnet"].op == "replace" and "cidrBlock" in changes["p5-subnet"].reasons
    for node in ("p5-node-0", "p5-node-1"):
        assert changes[node].op == "replace"
        assert changes[node].cause == ("its launch template p5-lt is updated (a new version) "
                                       "<- its subnet p5-subnet is replaced <- cidr (backends "
                                       "file)")
    assert changes["p5-lt"].op == "update"
    assert changes["p5-bastion"].op == "replace"  # its subnet is replaced too
    assert changes["p5-bastion"].cause is not None \
        and changes["p5-bastion"].cause.startswith("its subnet p5-public is replaced")
    assert guarded.violations == ("3 instance(s) would be replaced or deleted; the limit is 1",)


def test_gcp_subnetwork_replacement_replaces_the_instances(tmp_path: Path) -> None:
    report, guarded = readdressed(tmp_path, "gcp")
    changes = by_name(report)
    assert changes["g2-subnet"].op == "replace"
    for node in ("g2-node-0", "g2-node-1"):
        assert changes[node].op == "replace"
        assert changes[node].cause == ("its subnetwork g2-subnet is replaced <- cidr "
                                       "(backends file)")
        assert changes[node].reasons == ("networkInterfaces",)
    assert guarded.violations


def test_azure_subnet_replacement_replaces_the_scale_set(tmp_path: Path) -> None:
    report, _ = readdressed(tmp_path, "azure")
    changes = by_name(report)
    assert changes["nd-subnet"].op == "replace"
    assert changes["nd-vmss"].op == "replace"
    assert changes["nd-vmss"].cause == "its subnet nd-subnet is replaced <- cidr (backends file)"
    assert report.counts()["replace"] >= 3


def test_azure_subnet_replacement_replaces_nics_and_vms(tmp_path: Path) -> None:
    report, _ = readdressed(tmp_path, "azure-vm")
    changes = by_name(report)
    nics = [c for c in report.changes if c.type == "azure-native:network:NetworkInterface"]
    assert nics and all(c.op == "replace" for c in nics)
    assert changes["vm-node-0"].op == "replace"
    assert changes["vm-node-0"].cause is not None and "network interface" in \
        changes["vm-node-0"].cause


def test_an_unchanged_fleet_on_an_unchanged_network_is_not_touched(tmp_path: Path) -> None:
    fleet = FLEETS["aws"]
    state = export([write(tmp_path, "backends.yml", BACKENDS), write(tmp_path, "f.yml", fleet)])
    assert diff(tmp_path, fleet, BACKENDS, state, full=True).changes == ()


def test_a_tag_change_on_a_launch_template_makes_no_new_version() -> None:
    lt = Change("urn:pulumi:s::p::aws:ec2/launchTemplate:LaunchTemplate::a-lt",
                "aws:ec2/launchTemplate:LaunchTemplate", "update", "pending program change",
                properties=(PropertyChange("tags.team", "a", "b", "update"),))
    node = Node("urn:pulumi:s::p::aws:ec2/instance:Instance::a-node-0",
                "aws:ec2/instance:Instance", "a", None, {"launchTemplate": [lt.urn]})
    assert cascade([lt], [node]) == [lt]
    bumped = Change(lt.urn, lt.type, "update", lt.klass,
                    properties=(PropertyChange("instanceType", "x", "y", "update"),))
    out = cascade([bumped], [node])
    assert [(c.name, c.op) for c in out] == [("a-lt", "update"), ("a-node-0", "replace")]


# --- unknown is never replace -------------------------------------------------------------

NO_KEY = "backends:\n" + BACKENDS.split("backends:\n", 1)[1]
OTHER_KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOTHERKEYOTHERKEYOTHERKEYOTHERKEYOTHERKEYOT x"


def keyless_state(tmp: Path) -> dict[str, Any]:
    """An export made by `pulumi up` with the key in the stack config."""
    from gpufleet.compile import compile_inputs
    from gpufleet.components import program
    from gpufleet.components.run import harness, offline

    from planutil import stack_config

    paths = [write(tmp, "backends.yml", NO_KEY)] + [write(tmp, f"{n}.yml", FLEETS[n])
                                                     for n in ("aws", "gcp", "azure-vm")]
    compiled = compile_inputs(validate_paths(paths).inputs, load_catalog())
    config = {**stack_config(paths), "gpufleet:sshPublicKey": TEST_KEY}
    run = harness.run_program(lambda: program.main(compiled=compiled), config,
                              harness.StrictMocks(offline.invokes_for([]), offline.outputs),
                              record_outputs=True)
    return harness.deployment_v3(run, "dev", "gpufleet")


def keyless_diff(tmp: Path, state: dict[str, Any], key: str | None) -> Report:
    paths = [str(tmp / "backends.yml")] + [str(tmp / f"{n}.yml") for n in
                                           ("aws", "gcp", "azure-vm")]
    validated = validate_paths(paths)
    report, diags = offline_diff(validated, load_catalog(), paths,
                                 parse_export(json.dumps(state)), None, None, GuardOptions(),
                                 full=True, ssh_public_key=key)
    assert report is not None, diags
    return report


def test_the_key_read_at_pulumi_up_is_not_compared_when_unknown(tmp_path: Path) -> None:
    state = keyless_state(tmp_path)
    report = keyless_diff(tmp_path, state, None)
    assert report.changes == ()
    assert any("key-us-east-1: publicKey (the stack config gpufleet:sshPublicKey" in x
               for x in report.not_compared)
    assert any("metadata.ssh-keys" in x for x in report.not_compared)


def test_the_stack_configs_key_is_compared_when_known(tmp_path: Path) -> None:
    state = keyless_state(tmp_path)
    assert keyless_diff(tmp_path, state, TEST_KEY).changes == ()
    changed = by_name(keyless_diff(tmp_path, state, OTHER_KEY))
    assert changed["key-us-east-1"].op == "replace"
    assert changed["p5-node-0"].op == "replace"
    assert changed["p5-node-0"].cause is not None and \
        "its key pair key-us-east-1 is replaced" in changed["p5-node-0"].cause


def test_diff_reads_the_stack_config_next_to_the_project(tmp_path: Path) -> None:
    from click.testing import CliRunner
    from exportutil import write_export

    from gpufleet.cli import cli

    state = write_export(tmp_path / "state.json", keyless_state(tmp_path))
    (tmp_path / "proj").mkdir()
    (tmp_path / "proj" / "Pulumi.dev.yaml").write_text(
        f"config:\n  gpufleet:sshPublicKey: {OTHER_KEY}\n")
    paths = [str(tmp_path / f) for f in ("backends.yml", "aws.yml", "gcp.yml", "azure-vm.yml")]
    r = CliRunner().invoke(cli, ["diff", "--state", state, "--full", *paths,
                                 "--cwd", str(tmp_path / "proj")])
    assert r.exit_code == 7 and "replace  aws:ec2/keyPair:KeyPair  key-us-east-1" in r.output
    r = CliRunner().invoke(cli, ["diff", "--state", state, "--full", *paths,
                                 "--cwd", str(tmp_path / "elsewhere")])
    assert r.exit_code == 0, r.output
