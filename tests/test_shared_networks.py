"""Fleets sharing one network (issue 39, "the stack's own quota"): `fleets: {B: {network: A}}`
puts B's subnets into A's VPC - no VPC, internet gateway or NAT of B's own - so a region's
fleets stay under its VPC, gateway and address quotas. Opt-in: without it every fleet keeps
its own network, and nothing else changes."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpufleet.compile.compiler import compile_inputs
from gpufleet.input.validate import validate_paths
from gpufleet.offers.catalog import load_catalog
from gpufleet.review import network_counts

from planutil import TEST_KEY, by_type, named, plan_files, write

FLEET = ("type: fleet\nname: {name}\nnodes: 1\nbackends: [{backend}]\nregions: [{region}]\n"
         "resources:\n  gpu: {gpu}\n")
BACKENDS = (f"access:\n  ssh_public_key: {TEST_KEY}\nbackends:\n  - type: aws\n"
            "    ssh_cidrs: [203.0.113.0/24]\n  - type: gcp\n    project_id: p1\n"
            "    ssh_cidrs: [203.0.113.0/24]\n  - type: azure\n    subscription_id: s1\n"
            "    tenant_id: t1\n")


def _files(tmp: Path, fleets: dict[str, tuple[str, str]], settings: str = "",
           backends: str = BACKENDS) -> list[str]:
    files = [write(tmp, f"{n}.yml", FLEET.format(name=n, backend=b, region=r,
                                                 gpu="L4" if b != "azure" else "0"))
             for n, (b, r) in fleets.items()]
    return [*files, write(tmp, "b.yml", backends + settings)]


def test_an_aws_fleet_joins_anothers_vpc(tmp_path: Path) -> None:
    files = _files(tmp_path, {"fa": ("aws", "us-east-1"), "fb": ("aws", "us-east-1")},
                   "fleets:\n  fb: {network: fa}\n")
    report = plan_files(files)
    assert [v["name"] for v in by_type(report, "aws:ec2/vpc:Vpc")] == ["fa-vpc"]
    assert [g["name"] for g in by_type(report, "aws:ec2/natGateway:NatGateway")] == ["fa-vpc-nat"]
    assert not [r for r in report.resources if r["name"].startswith("fb-vpc-") and
                r["type"] in ("aws:ec2/internetGateway:InternetGateway",
                              "aws:ec2/routeTable:RouteTable", "aws:ec2/vpcEndpoint:VpcEndpoint")]
    b = report.fleets[[f.name for f in report.fleets].index("fb")]
    block = named(report, "fb-vpc-cidr",
                  "aws:ec2/vpcIpv4CidrBlockAssociation:VpcIpv4CidrBlockAssociation")["inputs"]
    assert block == {"vpcId": "fa-vpc-id", "cidrBlock": b.network("main").cidr}
    subnets = {s["name"]: s for s in by_type(report, "aws:ec2/subnet:Subnet")
               if s["name"].startswith("fb-")}
    assert subnets and all(s["inputs"]["vpcId"] == "fa-vpc-id" for s in subnets.values())
    tables = {r["name"]: r["inputs"]["routeTableId"] for r in
              by_type(report, "aws:ec2/routeTableAssociation:RouteTableAssociation")
              if r["name"].startswith("fb-")}
    assert set(tables.values()) == {"fa-vpc-private-rt-id", "fa-vpc-public-rt-id"}
    assert named(report, "fb-sg", "aws:ec2/securityGroup:SecurityGroup")["inputs"]["vpcId"] == \
        "fa-vpc-id"
    counts = {(c.quota.name, c.region): c.count for c in network_counts(report.resources)}
    # one VPC, gateway and NAT; three Elastic IPs (the NAT's and both bastions)
    assert counts[("VPCs per Region", "us-east-1")] == 1
    assert counts[("Internet gateways per Region", "us-east-1")] == 1
    assert counts[("EC2-VPC Elastic IPs", "us-east-1")] == 3
    assert report.violations == ()
    # b's dstack backend names a's VPC; a's plan is untouched
    assert report.exports["fb"]["networks"]["main"]["id"] == "fa-vpc-id"
    alone = plan_files(_files(tmp_path, {"fa": ("aws", "us-east-1")}))
    assert [f for f in alone.fleets if f.name == "fa"] == [f for f in report.fleets
                                                           if f.name == "fa"]


def test_a_gcp_fleet_joins_anothers_network(tmp_path: Path) -> None:
    files = _files(tmp_path, {"fa": ("gcp", "us-central1"), "fb": ("gcp", "us-central1")},
                   "fleets:\n  fb: {network: fa}\n")
    report = plan_files(files)
    assert [n["name"] for n in by_type(report, "gcp:compute/network:Network")] == ["fa-net"]
    assert [r["name"] for r in by_type(report, "gcp:compute/router:Router")] == ["fa-net-router"]
    sub = named(report, "fb-subnet", "gcp:compute/subnetwork:Subnetwork")["inputs"]
    assert sub["network"] == "fa-net-id"
    rules = [f for f in by_type(report, "gcp:compute/firewall:Firewall")
             if f["name"].startswith("fb-")]
    assert rules and all(f["inputs"]["network"] == "fa-net-id" for f in rules)
    assert all("gpufleet-fb" in f["inputs"]["targetTags"][0] for f in rules)


def _codes(tmp: Path, fleets: dict[str, tuple[str, str]], settings: str,
           backends: str = BACKENDS) -> list[str]:
    files = _files(tmp, fleets, settings, backends)
    return [d.code for d in compile_inputs(validate_paths(files).inputs,
                                           load_catalog()).diagnostics if d.is_error]


@pytest.mark.parametrize(("fleets", "settings", "code"), [
    ({"fb": ("aws", "us-east-1")}, "  fb: {network: nope}\n", "C023"),
    ({"fb": ("aws", "us-east-1")}, "  fb: {network: fb}\n", "C023"),
    ({"fa": ("aws", "us-west-2"), "fb": ("aws", "us-east-1")}, "  fb: {network: fa}\n", "C024"),
    ({"fa": ("azure", "eastus"), "fb": ("azure", "eastus")}, "  fb: {network: fa}\n", "C024"),
    ({"fa": ("aws", "us-east-1"), "fb": ("aws", "us-east-1"), "fc": ("aws", "us-east-1")},
     "  fb: {network: fa}\n  fc: {network: fb}\n", "C025"),
])
def test_a_join_that_cannot_be_built_is_refused(tmp_path: Path, fleets: dict[str, tuple[
        str, str]], settings: str, code: str) -> None:
    assert _codes(tmp_path, fleets, "fleets:\n" + settings) == [code]


def test_public_fleets_share_without_a_nat_and_a_vpc_takes_four(tmp_path: Path) -> None:
    public = BACKENDS.replace("  - type: gcp", "    public_ips: true\n  - type: gcp", 1)
    # public nodes need no NAT: a public fleet's VPC takes another public fleet
    assert _codes(tmp_path, {"fa": ("aws", "us-east-1"), "fb": ("aws", "us-east-1")},
                  "fleets:\n  fb: {network: fa}\n", public) == []
    five = {f"f{n}": ("aws", "us-east-1") for n in "abcdef"}
    joins = "".join(f"  f{n}: {{network: fa}}\n" for n in "bcdef")
    assert _codes(tmp_path, five, "fleets:\n" + joins) == ["C025"]


def test_a_join_beside_a_peered_filesystem_is_refused(tmp_path: Path) -> None:
    fs = ("filesystems:\n  - {name: data, backend: aws, region: us-east-1, kind: nfs, "
          "mount: /mnt/data, fleets: [fa, fc]}\n")
    codes = _codes(tmp_path, {"fa": ("aws", "us-east-1"), "fb": ("aws", "us-east-1"),
                              "fc": ("aws", "us-east-1")}, "fleets:\n  fb: {network: fa}\n" + fs)
    assert codes == ["C026"]


def test_a_gateways_address_block_counts_against_the_vpc(tmp_path: Path) -> None:
    """Four joining fleets fill fa's VPC (its own block and four more); a gateway that shares
    fa's network takes one of them, so the fourth joiner is refused, naming the gateway."""
    fleets = {f"f{n}": ("aws", "us-east-1") for n in "abcde"}
    joins = "".join(f"  f{n}: {{network: fa}}\n" for n in "bcde")
    files = _files(tmp_path, fleets, "fleets:\n" + joins)
    assert [d.code for d in compile_inputs(validate_paths(files).inputs,
                                           load_catalog()).diagnostics if d.is_error] == []
    gw = write(tmp_path, "gw.yml", "type: gateway\nname: gw\nbackend: aws\nregion: us-east-1\n"
               "domain: gw.example.com\n")
    files = _files(tmp_path, fleets, "fleets:\n" + joins + "gateways:\n  gw: {fleet: fa}\n")
    errors = [d for d in compile_inputs(validate_paths([*files, gw]).inputs,
                                        load_catalog()).diagnostics if d.is_error]
    assert [d.code for d in errors] == ["C025"]
    assert "fleet 'fe'" in errors[0].message and "1 gateway(s)" in errors[0].message
    # a gateway on a joining fleet lands in the same VPC: it counts there too
    files = _files(tmp_path, fleets, "fleets:\n" + joins + "gateways:\n  gw: {fleet: fc}\n")
    assert [d.code for d in compile_inputs(validate_paths([*files, gw]).inputs,
                                           load_catalog()).diagnostics
            if d.is_error] == ["C025"]


def test_a_fleet_that_joins_itself_is_told_so(tmp_path: Path) -> None:
    files = _files(tmp_path, {"aa": ("aws", "us-east-1")}, "fleets:\n  aa: {network: aa}\n")
    (err,) = [d for d in compile_inputs(validate_paths(files).inputs,
                                        load_catalog()).diagnostics if d.is_error]
    assert "joins its own network" in err.message and "not plan" not in err.message
