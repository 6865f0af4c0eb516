"""AWS fidelity: the recorded resources carry the recipe numbers of cloud-recipes.md §1."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpufleet.backends.aws.compile import efa_layout
from gpufleet.review import PlanReport

from planutil import EXAMPLES, SHARED, by_type, named, plan_files, write

LT = "aws:ec2/launchTemplate:LaunchTemplate"
SG = "aws:ec2/securityGroup:SecurityGroup"


@pytest.fixture(scope="module")
def p5() -> PlanReport:
    return plan_files([EXAMPLES / "fleets" / "aws-h100.dstack.yml", *SHARED])


def _fleet(tmp: Path, itype: str, gpu: str, extra: str = "", backends: str = "") -> PlanReport:
    f = write(tmp, "f.yml", f"type: fleet\nname: t1\nnodes: 2\nplacement: cluster\n"
              f"backends: [aws]\ninstance_types: [{itype}]\nresources:\n  gpu: {gpu}\n{extra}")
    files = [f]
    if backends:
        files.append(write(tmp, "b.yml", backends))
    return plan_files(files)


def test_p5_has_32_interfaces_efa_on_every_fourth_card(p5: PlanReport) -> None:
    nics = named(p5, "h100-train-lt", LT)["inputs"]["networkInterfaces"]
    assert len(nics) == 32
    assert [n["networkCardIndex"] for n in nics] == list(range(32))
    assert [n["networkCardIndex"] for n in nics if n["interfaceType"] == "efa"] == \
        list(range(0, 32, 4))
    assert sum(n["interfaceType"] == "efa-only" for n in nics) == 24
    assert nics[0]["deviceIndex"] == 0 and {n["deviceIndex"] for n in nics[1:]} == {1}
    assert {n["subnetId"] for n in nics} == {"h100-train-subnet-id"}
    assert {tuple(n["securityGroups"]) for n in nics} == {("h100-train-sg-id",)}
    assert not any("associatePublicIpAddress" in n for n in nics)


def test_security_group_self_rule_both_ways_and_ssh_only_from_the_bastion(p5: PlanReport) -> None:
    sg = named(p5, "h100-train-sg", SG)["inputs"]
    self_in = [r for r in sg["ingress"] if r.get("self") and "k3s" not in r["description"]]
    assert self_in == [{"protocol": "-1", "fromPort": 0, "toPort": 0, "self": True,
                        "description": self_in[0]["description"]}]
    # the example hands h100-train to SkyPilot too: k3s's ports, from the group itself only
    k3s = [r for r in sg["ingress"] if "k3s" in r["description"]]
    assert sorted((r["protocol"], r["fromPort"], r["toPort"]) for r in k3s) == [
        ("tcp", 2379, 2380), ("tcp", 6443, 6443), ("tcp", 10250, 10250), ("udp", 8472, 8472)]
    assert all(r.get("self") and not r.get("cidrBlocks") for r in k3s)
    ssh = [r for r in sg["ingress"] if not r.get("self")
           and "filesystem" not in r["description"]]
    assert ssh == [{"protocol": "tcp", "fromPort": 22, "toPort": 22,
                    "securityGroups": ["h100-train-bastion-sg-id"],
                    "description": ssh[0]["description"]}]
    bastion = named(p5, "h100-train-bastion-sg", SG)["inputs"]["ingress"]
    assert [(r["fromPort"], r["cidrBlocks"]) for r in bastion] == [(22, ["203.0.113.0/24"])]
    assert any(r.get("self") for r in sg["egress"])
    assert any(r.get("cidrBlocks") == ["0.0.0.0/0"] for r in sg["egress"])
    assert all("0.0.0.0/0" not in r.get("cidrBlocks", []) for r in sg["ingress"])


def test_placement_group_imdsv2_and_encrypted_gp3(p5: PlanReport) -> None:
    pg = named(p5, "h100-train-placement", "aws:ec2/placementGroup:PlacementGroup")
    assert pg["inputs"]["strategy"] == "cluster"
    lt = named(p5, "h100-train-lt", LT)["inputs"]
    assert lt["placement"]["groupName"] == "h100-train-placement-mock"
    assert lt["metadataOptions"]["httpTokens"] == "required"
    ebs = lt["blockDeviceMappings"][0]["ebs"]
    assert (ebs["volumeType"], ebs["encrypted"], ebs["volumeSize"]) == ("gp3", "true", 500)
    assert lt["imageId"] == "ami-0mock0000000000000" and lt["instanceType"] == "p5.48xlarge"
    assert lt["tags"]["managed-by"] == "gpufleet" and lt["tags"]["team"] == "llm"
    node = named(p5, "h100-train-node-0", "aws:ec2/instance:Instance")["inputs"]
    assert node["launchTemplate"] == {"id": "h100-train-lt-id", "version": "1"}


def test_vpc_dns_and_private_routing_through_nat(p5: PlanReport) -> None:
    vpc = named(p5, "h100-train-vpc", "aws:ec2/vpc:Vpc")["inputs"]
    assert vpc["enableDnsSupport"] is True and vpc["enableDnsHostnames"] is True
    rts = {r["name"]: r["inputs"] for r in by_type(p5, "aws:ec2/routeTable:RouteTable")}
    assert rts["h100-train-vpc-private-rt"]["routes"] == [
        {"cidrBlock": "0.0.0.0/0", "natGatewayId": "h100-train-vpc-nat-id"}]
    assert rts["h100-train-vpc-public-rt"]["routes"] == [
        {"cidrBlock": "0.0.0.0/0", "gatewayId": "h100-train-vpc-igw-id"}]
    subnets = {r["name"]: r["inputs"] for r in by_type(p5, "aws:ec2/subnet:Subnet")}
    assert subnets["h100-train-subnet"]["cidrBlock"].endswith("/18")
    assert all(s["mapPublicIpOnLaunch"] is False for s in subnets.values())


@pytest.mark.parametrize(("itype", "gpu", "count", "efa_cards"), [
    ("p4d.24xlarge", "A100:40GB:8", 4, [0]),
    ("p4de.24xlarge", "A100:80GB:8", 4, [0]),
    ("p6-b200.48xlarge", "B200:8", 8, [0]),
    ("p5en.48xlarge", "H200:8", 16, [0]),
    ("p3dn.24xlarge", "V100:8", 1, [0]),
    ("g5.8xlarge", "A10G:1", 1, [0]),
    ("g5.48xlarge", "A10G:8", 1, [0]),
    ("g6.8xlarge", "L4:1", 1, [0]),
    ("g6.12xlarge", "L4:4", 1, [0]),
    ("g6e.8xlarge", "L40S:1", 1, [0]),
    ("g6e.24xlarge", "L40S:4", 2, [0]),
    ("g6e.48xlarge", "L40S:8", 4, [0]),
    ("g6.2xlarge", "L4:1", 1, []),  # below 8xlarge: no EFA
    ("g6e.4xlarge", "L40S:1", 1, []),
])
def test_interface_counts(tmp_path: Path, itype: str, gpu: str, count: int,
                          efa_cards: list[int]) -> None:
    report = _fleet(tmp_path, itype, gpu, "spot_policy: auto\n")
    nics = named(report, "t1-lt", LT)["inputs"]["networkInterfaces"]
    assert len(nics) == count
    assert [n["networkCardIndex"] for n in nics if n.get("interfaceType") == "efa"] == efa_cards
    if not efa_cards:
        assert "interfaceType" not in nics[0]  # a plain ENA interface


def test_p6_b300_layout_is_ena_primary_plus_16_efa_only(tmp_path: Path) -> None:
    layout = efa_layout("p6-b300.48xlarge", 16, card0_efa=False)
    assert layout[0] == (0, 0, "interface") and len(layout) == 17
    assert {kind for _, _, kind in layout[1:]} == {"efa-only"}
    # The catalog says so (17 NICs for 16 EFA): the compiled template follows it.
    report = _fleet(tmp_path, "p6-b300.48xlarge", "B300:8", "spot_policy: auto\n")
    nics = named(report, "t1-lt", LT)["inputs"]["networkInterfaces"]
    assert len(nics) == 17 and "interfaceType" not in nics[0]
    assert [n["networkCardIndex"] for n in nics[1:]] == list(range(1, 17))
    assert {(n["deviceIndex"], n["interfaceType"]) for n in nics[1:]} == {(1, "efa-only")}


def test_g6e_private_cluster_gets_the_type_maximum_in_dstack_layout(tmp_path: Path) -> None:
    nics = named(_fleet(tmp_path, "g6e.48xlarge", "L40S:8"), "t1-lt", LT)["inputs"][
        "networkInterfaces"]
    assert [(n["networkCardIndex"], n["deviceIndex"], n["interfaceType"]) for n in nics] == [
        (0, 0, "efa"), (1, 1, "efa-only"), (2, 1, "efa-only"), (3, 1, "efa-only")]


def test_efa_only_in_a_cluster_and_every_card_with_public_ips(tmp_path: Path) -> None:
    f = write(tmp_path, "f.yml", "type: fleet\nname: t1\nnodes: 2\nbackends: [aws]\n"
              "instance_types: [g6e.48xlarge]\nresources:\n  gpu: L40S:8\n")
    nics = named(plan_files([f]), "t1-lt", LT)["inputs"]["networkInterfaces"]
    assert len(nics) == 1 and "interfaceType" not in nics[0]  # no placement: cluster
    public = "backends:\n  - type: aws\n    public_ips: true\n"
    report = _fleet(tmp_path, "g6e.48xlarge", "L40S:8", "", public)
    nics = named(report, "t1-lt", LT)["inputs"]["networkInterfaces"]
    # every EFA card kept (dstack cuts public nodes to one); the address is an Elastic IP
    assert [n["interfaceType"] for n in nics] == ["efa", "efa-only", "efa-only", "efa-only"]
    assert not any("associatePublicIpAddress" in n for n in nics)
    assert sorted(r["name"] for r in by_type(report, "aws:ec2/eip:Eip")) == [
        "t1-node-0-eip", "t1-node-1-eip"]


def test_a_public_p5_fleet_keeps_its_32_efa_interfaces(tmp_path: Path) -> None:
    report = _fleet(tmp_path, "p5.48xlarge", "H100:8", "",
                    "backends:\n  - type: aws\n    public_ips: true\n")
    nics = named(report, "t1-lt", LT)["inputs"]["networkInterfaces"]
    assert len(nics) == 32 and sum(n["interfaceType"] == "efa" for n in nics) == 8
    assert report.fleets[0].rdma_interfaces == 32
    assert len(by_type(report, "aws:ec2/eipAssociation:EipAssociation")) == 2


def test_multi_nic_public_fleet_gets_one_eip_per_node(tmp_path: Path) -> None:
    # p6-b300 keeps an ENA primary beside its 16 EFA-only cards: no auto-assigned public IP
    # (AWS cannot give one to a multi-NIC instance) but an Elastic IP per node.
    report = _fleet(tmp_path, "p6-b300.48xlarge", "B300:8", "spot_policy: auto\n",
                    "backends:\n  - type: aws\n    public_ips: true\n")
    nics = named(report, "t1-lt", LT)["inputs"]["networkInterfaces"]
    assert len(nics) == 17 and not any("associatePublicIpAddress" in n for n in nics)
    eips = sorted(r["name"] for r in by_type(report, "aws:ec2/eip:Eip"))
    assert eips == ["t1-node-0-eip", "t1-node-1-eip"]  # no NAT EIP with public subnets
    assoc = named(report, "t1-node-1-eip-assoc", "aws:ec2/eipAssociation:EipAssociation")
    assert assoc["inputs"]["networkInterfaceId"] == "eni-mock-t1-node-1"
    assert not by_type(report, "aws:ec2/natGateway:NatGateway")


def test_single_nic_public_fleet_auto_assigns(tmp_path: Path) -> None:
    report = _fleet(tmp_path, "g6.12xlarge", "L4:4", "",
                    "backends:\n  - type: aws\n    public_ips: true\n")
    nic = named(report, "t1-lt", LT)["inputs"]["networkInterfaces"][0]
    assert nic["associatePublicIpAddress"] == "true"
    assert not by_type(report, "aws:ec2/eip:Eip")


def test_spot_with_max_price_and_reservations(tmp_path: Path) -> None:
    report = _fleet(tmp_path, "p4d.24xlarge", "A100:40GB:8",
                    "spot_policy: spot\nmax_price: 9.5\n")
    lt = named(report, "t1-lt", LT)["inputs"]
    assert lt["instanceMarketOptions"] == {"marketType": "spot", "spotOptions": {
        "spotInstanceType": "one-time", "instanceInterruptionBehavior": "terminate",
        "maxPrice": "9.5"}}
    report = _fleet(tmp_path, "p4d.24xlarge", "A100:40GB:8", "reservation: cr-0abc\n")
    lt = named(report, "t1-lt", LT)["inputs"]
    assert lt["capacityReservationSpecification"] == {
        "capacityReservationTarget": {"capacityReservationId": "cr-0abc"}}
    assert "instanceMarketOptions" not in lt
    report = _fleet(tmp_path, "p4d.24xlarge", "A100:40GB:8", "reservation: cr-0blk\n",
                    "backends:\n  - type: aws\n    capacity_blocks: [cr-0blk]\n")
    lt = named(report, "t1-lt", LT)["inputs"]
    assert lt["instanceMarketOptions"] == {"marketType": "capacity-block"}


@pytest.mark.parametrize(("setting", "lookup"), [
    ("vpc_name: corp", {"tags": {"Name": "corp"}}),
    ("vpc_ids: {us-east-1: vpc-0123}", {"id": "vpc-0123"}),
    ("default_vpcs: true", {"default": True}),
])
def test_existing_vpcs_are_looked_up_not_created(tmp_path: Path, setting: str,
                                                 lookup: dict[str, object]) -> None:
    report = _fleet(tmp_path, "p4d.24xlarge", "A100:40GB:8",
                    "regions: [us-east-1]\navailability_zones: [us-east-1b]\n",
                    f"backends:\n  - type: aws\n    {setting}\n")
    assert not by_type(report, "aws:ec2/vpc:Vpc")
    assert not by_type(report, "aws:ec2/subnet:Subnet")
    assert ("aws:ec2/getVpc:getVpc", lookup) in [(t, dict(a)) for t, a in report.lookups]
    lt = named(report, "t1-lt", LT)["inputs"]
    assert lt["networkInterfaces"][0]["subnetId"] == "subnet-mock-a"
    assert lt["placement"]["availabilityZone"] == "us-east-1b"


def test_capacity_block_needs_fixed_size(tmp_path: Path) -> None:
    from gpufleet.compile.compiler import compile_inputs
    from gpufleet.input.validate import validate_paths
    from gpufleet.offers.catalog import load_catalog
    f = write(tmp_path, "f.yml", "type: fleet\nname: t1\nnodes: 1..4\nbackends: [aws]\n"
              "reservation: cr-0blk\nresources:\n  gpu: A100:40GB:8\n")
    b = write(tmp_path, "b.yml", "backends:\n  - type: aws\n    capacity_blocks: [cr-0blk]\n")
    compiled = compile_inputs(validate_paths([f, b]).inputs, load_catalog())
    assert [d.code for d in compiled.diagnostics] == ["C005"]


def test_the_zone_is_one_that_offers_the_type_and_the_plan_says_so(p5: PlanReport) -> None:
    from gpufleet.views.plan import render_plan_text

    looked_up = dict(p5.lookups)
    offers = looked_up["aws:ec2/getInstanceTypeOfferings:getInstanceTypeOfferings"]
    assert offers["filters"] == [{"name": "instance-type", "values": ["p5.48xlarge"]}]
    azs = looked_up["aws:index/getAvailabilityZones:getAvailabilityZones"]
    assert azs["filters"] == [{"name": "zone-type", "values": ["availability-zone"]}]
    assert "zone:     chosen at `pulumi up`: the first Availability Zone of us-east-1 (by " \
        "name) that offers p5.48xlarge" in render_plan_text(p5)
