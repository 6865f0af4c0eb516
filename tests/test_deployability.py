"""What the clouds would refuse, caught before `pulumi up` (issue 39): physical names within
each cloud's limits (refused at validate by the name budgets, at plan by the names
themselves), and changes to one Azure VNet made one after another."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner
from exportutil import export
from test_filesystems import BACKENDS, FLEETS, LUSTRE

from gpufleet.backends import BACKENDS as CLOUDS
from gpufleet.backends import backend_of_type, traits_of
from gpufleet.cli import cli, main
from gpufleet.review import PlanReport
from gpufleet.review.names import name_problems, physical_name

from planutil import TEST_KEY, by_type, plan_files, write


def test_azure_changes_to_one_vnet_wait_for_each_other(tmp_path: Path) -> None:
    """Azure answers a second change in flight to one VNet with AnotherOperationInProgress:
    the filesystem subnet waits for the node subnet."""
    files = [write(tmp_path, "backends.yml", BACKENDS + LUSTRE),
             *(write(tmp_path, f"{n}.yml", FLEETS[n]) for n in ("train", "a4", "nd"))]
    resources = export(files)["deployment"]["resources"]
    by_name = {r["urn"].rsplit("::", 1)[1]: r for r in resources
               if r["type"] == "azure-native:network:Subnet"}
    node, fs = by_name["nd-subnet"], by_name["fs-ib-subnet"]
    assert node["urn"] in fs["dependencies"]


GCP = (f"access:\n  ssh_public_key: {TEST_KEY}\nbackends:\n  - type: gcp\n    project_id: p1\n"
       "    ssh_cidrs: [203.0.113.0/24]\n  - type: aws\n    ssh_cidrs: [203.0.113.0/24]\n")


def _fleet(name: str) -> str:
    return (f"type: fleet\nname: {name}\nnodes: 2\nplacement: cluster\nbackends: [gcp]\n"
            "spot_policy: auto\navailability_zones: [us-west2-c]\nresources:\n  gpu: B200:8\n")


def _alb(name: str) -> str:
    return (f"type: gateway\nname: {name}\nbackend: aws\nregion: us-east-1\n"
            "domain: x.example.com\nload_balancer: {type: alb}\ncertificate: null\n")


def _private_gcp(name: str) -> str:
    return (f"type: gateway\nname: {name}\nbackend: gcp\nregion: us-west2\n"
            "domain: x.example.com\npublic_ip: false\ncertificate: null\n")


def _longest(report: PlanReport, token: str) -> int:
    rule = traits_of(backend_of_type(token) or "").name_rules[token]
    suffix = traits_of(backend_of_type(token) or "").autoname_suffix
    return max(len(physical_name(r, rule, suffix)) for r in by_type(report, token))


@pytest.mark.parametrize(("body", "code", "limit"), [
    (_fleet("f" * 41), "F023", "at most 38 characters fit"),
    (_fleet("f" * 39), "F023", "over 63 characters (cloud.google.com/compute/docs/naming-"),
])
def test_a_name_too_long_for_the_cloud_is_refused_at_validate(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], body: str, code: str,
        limit: str) -> None:
    f = write(tmp_path, "f.yml", body)
    assert main(["validate", f, write(tmp_path, "b.yml", GCP)]) == 1
    out = capsys.readouterr().out
    assert f"f.yml:2:7: error[{code}]:" in out and limit in out


def test_names_at_the_budget_plan_and_fill_the_limit_exactly(tmp_path: Path) -> None:
    """The budgets are tight: at the budget the tightest physical name is the cloud's limit."""
    gcp = traits_of("gcp").name_budgets["fleet"]
    report = plan_files([write(tmp_path, "f.yml", _fleet("f" * gcp.max_len)),
                         write(tmp_path, "b.yml", GCP)])
    assert name_problems(report.resources) == []
    assert _longest(report, gcp.resource) == 63


def test_every_gateway_name_dstack_takes_fits_on_gcp(tmp_path: Path) -> None:
    """dstack's names are at most 41 characters; a gateway's longest GCP name (a private
    gateway's Cloud Router) fits with 3 to spare, so G017 never fires on a valid name."""
    gateway = traits_of("gcp").name_budgets["gateway"]
    assert gateway.max_len >= 41
    report = plan_files([write(tmp_path, "g.yml", _private_gcp("g" * 41)),
                         write(tmp_path, "b.yml", GCP)])
    assert name_problems(report.resources) == []
    assert _longest(report, gateway.resource) == 41 + len(gateway.longest) + 8


def test_a_25_character_alb_gateway_on_aws_plans_within_every_limit(tmp_path: Path) -> None:
    """dstack names its load balancer itself (short and random): the gateway's own names are
    Name tags, within their limits at any length validate takes."""
    report = plan_files([write(tmp_path, "g.yml", _alb("inference-gateway-prod-us")),
                         write(tmp_path, "b.yml", GCP)])
    assert name_problems(report.resources) == []
    assert not by_type(report, "aws:lb/loadBalancer:LoadBalancer")


def test_a_filesystem_name_that_overflows_a_firewall_name_is_refused_by_plan(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    fleet = "b" * 30
    fs = ("filesystems:\n  - {name: " + "c" * 30 + ", backend: gcp, region: us-west2, zone: "
          "us-west2-c, kind: lustre, capacity_gib: 18000, throughput: 500, fleets: ["
          + fleet + "]}\n")
    files = [write(tmp_path, "f.yml", _fleet(fleet)), write(tmp_path, "b.yml", GCP + fs)]
    assert main(["validate", *files]) == 0
    capsys.readouterr()
    assert main(["plan", *files]) == 1
    err = capsys.readouterr().err
    assert "f.yml:2:1: error[C019]: gcp:compute/firewall:Firewall" in err
    assert "72 characters, over the 63 gcp allows" in err


def test_every_rule_names_its_source() -> None:
    for t in CLOUDS:
        for token, rule in t.name_rules.items():
            assert token.startswith(f"{t.pulumi_package}:") and "." in rule.source, token
        for budget in t.name_budgets.values():
            assert budget.resource in t.name_rules
            rule = t.name_rules[budget.resource]
            assert budget.max_len == rule.max_len - t.autoname_suffix - len(budget.longest)


def test_six_private_aws_fleets_in_one_region_warn_of_the_vpc_and_eip_quotas(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    files = [write(tmp_path, f"p{i}.yml", f"type: fleet\nname: p{i}\nnodes: 1\nbackends: [aws]\n"
                   "regions: [us-east-1]\nresources:\n  gpu: L4\n") for i in range(6)]
    files.append(write(tmp_path, "b.yml", GCP))
    assert main(["plan", *files]) == 0
    err = capsys.readouterr().err
    assert "warning[C020]: the stack creates 6 Vpc(s) in us-east-1 (p0, p1, p2, p3, p4, p5); " \
           "the default quota 'VPCs per Region' is 5" in err
    # each private fleet: its NAT gateway's and its bastion's Elastic IPs
    assert "12 Eip(s) in us-east-1" in err and "L-0263D0A3" in err
    # three fleets: 6 Elastic IPs, over; two: 4, within every default
    assert main(["plan", *files[3:]]) == 0
    err = capsys.readouterr().err
    assert "6 Eip(s) in us-east-1" in err and "Vpc(s)" not in err
    assert main(["plan", *files[4:]]) == 0
    assert "C020" not in capsys.readouterr().err


_LONGEST = "n" * 41  # dstack's names: at most 41 characters


@pytest.mark.parametrize(("backend", "region", "gpu", "extra"), [
    ("aws", "us-east-1", "H100:8", ""),
    ("azure", "eastus", "H100:8", "    subscription_id: s1\n    tenant_id: t1\n"
                                  "    dns_resource_group: dns\n"),
])
def test_the_longest_names_dstack_takes_plan_within_every_limit(
        tmp_path: Path, backend: str, region: str, gpu: str, extra: str) -> None:
    """A 41-character cluster fleet (bastion, filesystem) and a 41-character gateway (its own
    network, a load balancer where the cloud has one) on each cloud gpufleet does not refuse
    them on: every physical name within the cloud's rule."""
    backends = (f"access:\n  ssh_public_key: {TEST_KEY}\nbackends:\n  - type: {backend}\n"
                f"    ssh_cidrs: [203.0.113.0/24]\n{extra}")
    fleet = (f"type: fleet\nname: {_LONGEST}\nnodes: 2\nplacement: cluster\n"
             f"backends: [{backend}]\nregions: [{region}]\nresources:\n  gpu: {gpu}\n")
    lb = "load_balancer: {type: alb}\ncertificate: null\n" if backend == "aws" else ""
    gateway = (f"type: gateway\nname: {'g' * 41}\nbackend: {backend}\nregion: {region}\n"
               f"domain: x.example.com\n{lb}")
    report = plan_files([write(tmp_path, "f.yml", fleet), write(tmp_path, "g.yml", gateway),
                         write(tmp_path, "b.yml", backends)])
    assert name_problems(report.resources) == []
    assert {f.name for f in report.fleets} == {_LONGEST}


def test_a_41_character_fleet_on_gcp_is_refused_naming_the_longest_name(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    f = write(tmp_path, "f.yml", _fleet(_LONGEST))
    assert main(["validate", f, write(tmp_path, "b.yml", GCP)]) == 1
    out = capsys.readouterr().out
    assert f"'{_LONGEST}-ssh-from-bastion' plus the 8-character auto-name suffix" in out


def test_aws_names_that_start_as_the_api_forbids_are_refused(tmp_path: Path) -> None:
    """A security group name "Cannot start with sg-" (CreateSecurityGroup); a load balancer's
    "must not begin with internal-" (CreateLoadBalancer): issue 53, item 14."""
    aws = ("backends:\n  - type: aws\n    ssh_cidrs: [203.0.113.0/24]\n"
           f"access:\n  ssh_public_key: {TEST_KEY}\n")
    fleet = ("type: fleet\nname: sg-train\nnodes: 1\nbackends: [aws]\nregions: [us-east-1]\n"
             "resources:\n  gpu: L4\n")
    files = [write(tmp_path, "f.yml", fleet), write(tmp_path, "b.yml", aws)]
    r = CliRunner().invoke(cli, ["plan", *files])
    assert r.exit_code == 1 and "error[C019]: aws:ec2/securityGroup:SecurityGroup" in r.output
    assert "would be named 'sg-train-" in r.output and "rename so that the cloud" in r.output
    report = plan_files([write(tmp_path, "f.yml", fleet.replace("sg-train", "train-sg")),
                         write(tmp_path, "b.yml", aws)])
    assert name_problems(report.resources) == []
    rule = traits_of("aws").name_rules["aws:lb/loadBalancer:LoadBalancer"]
    assert rule.pattern is not None and not rule.pattern.fullmatch("internal-gw-x")
    assert rule.pattern.fullmatch("gw-internal-x")
