"""A filesystem several fleets mount: on AWS in a subnet of its own in the first fleet's
network, peered with the others' networks; refused where the cloud or gpufleet cannot."""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

import pytest
from test_filesystems import BACKENDS, FLEETS, fleet_resources

from gpufleet.cli import main
from gpufleet.views.plan import render_plan_text

from planutil import by_type, named, plan_files, write

MORE = {
    **FLEETS,
    "other": FLEETS["dev"].replace("name: dev", "name: other"),
    "a4b": FLEETS["a4"].replace("name: a4", "name: a4b"),
    "ndb": FLEETS["nd"].replace("name: nd", "name: ndb"),
}


def files(tmp: Path, section: str, fleets: tuple[str, ...] = ("train", "dev", "other")
          ) -> list[str]:
    return [write(tmp, "backends.yml", BACKENDS + section),
            *(write(tmp, f"{f}.dstack.yml", MORE[f]) for f in fleets)]


def shared(kind: str = "lustre", fleets: str = "train, dev") -> str:
    size = "capacity_gib: 4800, throughput: 500, " if kind == "lustre" else ""
    return (f"filesystems:\n  - {{name: data, backend: aws, region: us-east-1, kind: {kind}, "
            f"{size}fleets: [{fleets}]}}\n")


def node_cidrs(report: Any, fleet: str) -> list[str]:
    plan = next(p for p in report.fleets if p.name == fleet)
    return [s.cidr for s in plan.network("main").subnets if not s.public]


def test_a_lustre_shared_by_two_aws_fleets_is_peered_to_its_own_subnet_only(
        tmp_path: Path) -> None:
    report = plan_files(files(tmp_path, shared()))
    train = next(p for p in report.fleets if p.name == "train")
    [host] = train.filesystems
    assert host.peers == ("dev",) and host.held_by is None and host.subnet is not None
    # the filesystem's own subnet: in the holding fleet's VPC, apart from its node subnets
    subnet = named(report, "fs-data-subnet", "aws:ec2/subnet:Subnet")["inputs"]
    assert subnet["cidrBlock"] == host.subnet and subnet["vpcId"] == "train-vpc-id"
    assert host.subnet not in [s.cidr for s in train.network("main").subnets]
    [fsx] = by_type(report, "aws:fsx/lustreFileSystem:LustreFileSystem")
    assert fsx["inputs"]["subnetIds"] == "fs-data-subnet-id" and fsx["protect"] is True
    # only the two fleets' node subnets reach it
    sg = named(report, "fs-data", "aws:ec2/securityGroup:SecurityGroup")["inputs"]
    cidrs = {tuple(r.get("cidrBlocks") or ()) for r in sg["ingress"]}
    assert cidrs == {tuple(node_cidrs(report, "train") + node_cidrs(report, "dev")), ()}
    assert "0.0.0.0/0" not in json.dumps(sg)
    # dev peers with train's VPC; its route tables lead to the filesystem's subnet only
    [pcx] = by_type(report, "aws:ec2/vpcPeeringConnection:VpcPeeringConnection")
    assert (pcx["name"], pcx["inputs"]["vpcId"], pcx["inputs"]["peerVpcId"],
            pcx["inputs"]["autoAccept"]) == ("dev-vpc-peer-train", "dev-vpc-id",
                                             "train-vpc-id", True)
    for rt in ("dev-vpc-private-rt", "dev-vpc-public-rt"):
        routes = named(report, rt)["inputs"]["routes"]
        peered = [r for r in routes if r.get("vpcPeeringConnectionId")]
        assert peered == [{"cidrBlock": host.subnet,
                           "vpcPeeringConnectionId": "dev-vpc-peer-train-id"}]
    # the way back: a route of its own in the filesystem's route table, not train's tables
    rt = named(report, "fs-data-rt")["inputs"]
    assert "routes" not in rt  # left to the Route resources
    [back] = by_type(report, "aws:ec2/route:Route")
    dev = next(p for p in report.fleets if p.name == "dev")
    assert back["inputs"] == {"routeTableId": "fs-data-rt-id",
                              "destinationCidrBlock": dev.network("main").cidr,
                              "vpcPeeringConnectionId": "dev-vpc-peer-train-id"}
    for rt in ("train-vpc-private-rt", "train-vpc-public-rt"):
        assert not any(r.get("vpcPeeringConnectionId")
                       for r in named(report, rt)["inputs"]["routes"])
    # both fleets' nodes let the Lustre servers call back, from the filesystem's subnet
    for fleet in ("train", "dev"):
        plan = next(p for p in report.fleets if p.name == fleet)
        [rule] = [r for r in plan.network("main").firewall if r.name == f"{fleet}-fs-data"]
        assert rule.sources == (host.subnet,) and rule.ports[0] == "988"
    # dev mounts it at boot too, and it is billed once, on train's bill
    node = named(report, "dev-node-0", "aws:ec2/instance:Instance")["inputs"]
    assert "data lustre @@TARGET:data@@ /mnt/data" in base64.b64decode(
        node["userDataBase64"]).decode()
    assert [i.kind for i in report.bills["train"].items].count("filesystem") == 1
    assert "filesystem" not in [i.kind for i in report.bills["dev"].items]
    # the hand-off: dev's stack output names it, so `export dstack` gives dev's fleet and
    # storage task the instance volume
    assert report.exports["dev"]["filesystems"]["data"]["mount"] == "/mnt/data"
    text = render_plan_text(report)
    assert f"held by fleet train, reached through a VPC peering routed to its subnet " \
        f"{host.subnet} only" in text
    assert f"shared with fleets dev (peered, to its own subnet {host.subnet})" in text


def test_sharing_moves_nothing_of_a_fleet_not_involved(tmp_path: Path) -> None:
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    alone = plan_files(files(tmp_path / "a", shared(fleets="train")))
    both = plan_files(files(tmp_path / "b", shared(fleets="train, dev")))
    assert fleet_resources(alone, "other") == fleet_resources(both, "other")
    # dev's nodes are kept (its route tables and security group change in place)
    for name in ("dev-node-0",):
        a = named(alone, name, "aws:ec2/instance:Instance")
        b = named(both, name, "aws:ec2/instance:Instance")
        assert a["inputs"]["launchTemplate"] == b["inputs"]["launchTemplate"]


def test_an_efs_shared_by_two_fleets_gets_a_small_subnet(tmp_path: Path) -> None:
    report = plan_files(files(tmp_path, shared("nfs")))
    [target] = by_type(report, "aws:efs/mountTarget:MountTarget")
    assert target["inputs"]["subnetId"] == "fs-data-subnet-id"
    subnet = named(report, "fs-data-subnet")["inputs"]["cidrBlock"]
    assert subnet.endswith("/28")
    # NFS needs no call-back rule on the nodes
    dev = next(p for p in report.fleets if p.name == "dev")
    assert not [r for r in dev.network("main").firewall if r.name == "dev-fs-data"]


@pytest.mark.parametrize(("section", "fleets", "code", "words"), [
    ("  - {name: xx, backend: gcp, region: us-west2, kind: lustre, capacity_gib: 36000, "
     "fleets: [a4, a4b]}\n", ("a4", "a4b"), "V006", "Network Connectivity"),
    # shared the other way round already: each fleet would be built before the other
    ("  - {name: aa, backend: aws, region: us-east-1, kind: nfs, fleets: [train, dev]}\n"
     "  - {name: bb, backend: aws, region: us-east-1, kind: nfs, fleets: [dev, train]}\n",
     ("train", "dev"), "V019", "keep the shared filesystems in one fleet's network"),
])
def test_what_cannot_be_shared_is_refused_where_it_is_written(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], section: str,
        fleets: tuple[str, ...], code: str, words: str) -> None:
    assert main(["plan", *files(tmp_path, "filesystems:\n" + section, fleets)]) == 1
    out = capsys.readouterr()
    text = out.out + out.err
    assert f"error[{code}]" in text and words in text and "backends.yml:" in text, text


def test_a_fleet_in_an_existing_vpc_cannot_share(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    backends = BACKENDS.replace("  - type: aws\n", "  - type: aws\n    vpc_name: corp\n")
    paths = [write(tmp_path, "backends.yml", backends + shared()),
             *(write(tmp_path, f"{f}.dstack.yml", MORE[f]) for f in ("train", "dev"))]
    assert main(["plan", *paths]) == 1
    text = "".join(capsys.readouterr())
    assert "error[V006]" in text and "uses an existing network" in text


def test_a_mounting_fleet_not_among_the_files_warns_and_the_rest_mount_it(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["plan", *files(tmp_path, shared(fleets="train, dve"), ("train",))]) == 0
    cap = capsys.readouterr()
    text = cap.out + cap.err
    assert "warning[V008]" in text and "is not mounted by dve" in text
    assert "aws:fsx/lustreFileSystem:LustreFileSystem" in text


def test_sharing_a_deployed_filesystem_is_shown_as_the_replacement_it_is(
        tmp_path: Path) -> None:
    """From one fleet to two, a FSx moves into a subnet of its own: AWS replaces it, and it
    is protected, so the diff says the update would stop there; the fleets' nodes stay."""
    from click.testing import CliRunner
    from exportutil import export, write_export

    from gpufleet.cli import cli

    (tmp_path / "old").mkdir()
    (tmp_path / "new").mkdir()
    state = write_export(tmp_path / "state.json",
                         export(files(tmp_path / "old", shared(fleets="train"))))
    r = CliRunner().invoke(cli, ["diff", "--state", state, "--format", "json",
                                 *files(tmp_path / "new", shared())])
    data = json.loads(r.stdout)
    by_name = {c["name"]: c for c in data["changes"]}
    fsx = by_name["fs-data"]
    assert fsx["op"] in ("replace", "create-replacement") and fsx["protect"] is True
    assert "protected" in fsx["action"], fsx
    nodes = [c["name"] for c in data["changes"] if "-node-" in c["name"]
             and c["op"] in ("replace", "delete", "create-replacement")]
    assert nodes == []
    assert not any(n.startswith("other") for n in by_name), sorted(by_name)


def test_the_forbid_guard_stops_a_filesystem_replacement(tmp_path: Path) -> None:
    from click.testing import CliRunner
    from exportutil import export, write_export

    from gpufleet.cli import cli

    (tmp_path / "old").mkdir()
    (tmp_path / "new").mkdir()
    state = write_export(tmp_path / "state.json",
                         export(files(tmp_path / "old", shared(fleets="train"))))
    args = ["diff", "--state", state, *files(tmp_path / "new", shared())]
    r = CliRunner().invoke(cli, [*args, "--forbid", "replace,delete"])
    assert r.exit_code == 1, r.output
    assert "of storage fs-data" in r.output
    allowed = CliRunner().invoke(cli, [*args, "--forbid", "replace,delete",
                                       "--allow", "fs-data*"])
    assert "of storage fs-data" not in allowed.output


def test_an_azure_lustre_shared_by_two_fleets_peers_their_vnets_both_ways(
        tmp_path: Path) -> None:
    section = ("filesystems:\n  - {name: data, backend: azure, region: eastus, kind: lustre, "
               "capacity_gib: 8192, throughput: 250, fleets: [nd, ndb]}\n")
    report = plan_files(files(tmp_path, section, ("nd", "ndb")))
    nd = next(p for p in report.fleets if p.name == "nd")
    [held] = nd.filesystems
    peerings = by_type(report, "azure-native:network:VirtualNetworkPeering")
    assert sorted(p["name"] for p in peerings) == ["ndb-peer-nd", "ndb-peer-nd-back"]
    there = named(report, "ndb-peer-nd")["inputs"]
    back = named(report, "ndb-peer-nd-back")["inputs"]
    assert there["remoteVirtualNetwork"] == {"id": "nd-vnet-id"}
    assert there["virtualNetworkName"] == "ndb-vnet-mock"
    assert back["remoteVirtualNetwork"] == {"id": "ndb-vnet-id"}
    assert back["virtualNetworkName"] == "nd-vnet-mock"
    assert all(p["inputs"]["allowForwardedTraffic"] is False for p in peerings)
    # one AMLFS, in nd's own filesystem subnet; ndb's nodes let its servers call back
    [aml] = by_type(report, "azure-native:storagecache:AmlFilesystem")
    assert aml["protect"] is True
    ndb = next(p for p in report.fleets if p.name == "ndb")
    [rule] = [r for r in ndb.network("main").firewall if r.name == "ndb-fs-data"]
    assert rule.sources == (held.subnet,) and rule.ports == ("988",)
    text = render_plan_text(report)
    assert f"reached through a VNet peering both ways (its subnet {held.subnet})" in text


def test_azure_files_shared_by_two_fleets_admits_both_node_subnets_without_peering(
        tmp_path: Path) -> None:
    section = ("filesystems:\n  - {name: home, backend: azure, region: eastus, kind: nfs, "
               "capacity_gib: 200, fleets: [nd, ndb]}\n")
    report = plan_files(files(tmp_path, section, ("nd", "ndb")))
    [acct] = by_type(report, "azure-native:storage:StorageAccount")
    rules = acct["inputs"]["networkRuleSet"]["virtualNetworkRules"]
    assert sorted(r["virtualNetworkResourceId"] for r in rules) == [
        "nd-subnet-id", "ndb-subnet-id"]
    assert acct["inputs"]["networkRuleSet"]["defaultAction"] == "Deny"
    assert not by_type(report, "azure-native:network:VirtualNetworkPeering")
    # both fleets mount the same share
    for vmss in by_type(report, "azure-native:compute:VirtualMachineScaleSet"):
        script = base64.b64decode(
            vmss["inputs"]["virtualMachineProfile"]["osProfile"]["customData"]).decode()
        [line] = [x.removeprefix("MOUNTS='") for x in script.splitlines()
                  if x.startswith("MOUNTS='home nfs ")]
        assert line.split()[2] == f"{acct['inputs']['accountName']}.file.core.windows.net:/" \
            f"{acct['inputs']['accountName']}/share" and line.split()[3] == "/mnt/home"


def subtree(report: Any, root: str) -> list[str]:
    """A component's resources (the component, its children and theirs), canonical JSON."""
    by_urn = {r["urn"]: r for r in report.resources}
    top = next(r["urn"] for r in report.resources if r["name"] == root
               and r["type"].startswith("gpufleet:"))

    def under(r: dict[str, Any]) -> bool:
        while r is not None:
            if r["urn"] == top:
                return True
            r = by_urn.get(r.get("parent") or "")
        return False
    return sorted(json.dumps(r, sort_keys=True, default=str) for r in report.resources
                  if under(r))


def test_sharing_an_azure_lustre_leaves_its_fleet_untouched(tmp_path: Path) -> None:
    """The holder's AMLFS already has its subnet: a second fleet adds only its own
    resources (its peerings, the way back included)."""
    one = ("filesystems:\n  - {name: data, backend: azure, region: eastus, kind: lustre, "
           "capacity_gib: 8192, throughput: 250, fleets: [nd]}\n")
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    alone = plan_files(files(tmp_path / "a", one, ("nd", "ndb")))
    both = plan_files(files(tmp_path / "b", one.replace("[nd]", "[nd, ndb]"), ("nd", "ndb")))
    def cloud(report: Any) -> list[str]:  # the component's own record carries the plan's
        return [x for x in subtree(report, "nd")  # digest, which changes with it
                if json.loads(x)["type"] != "gpufleet:azure:Fleet"]
    assert cloud(alone) == cloud(both) and len(cloud(both)) > 10
    assert len(subtree(both, "ndb")) == len(subtree(alone, "ndb")) + 2  # the two peerings


def test_a_third_fleet_joins_a_shared_filesystem_without_replacing_anything(
        tmp_path: Path) -> None:
    """Once shared, a filesystem takes more fleets in place: their peering and routes are
    created, its security group and their route tables updated; nothing is replaced."""
    from click.testing import CliRunner
    from exportutil import export, write_export

    from gpufleet.cli import cli

    (tmp_path / "old").mkdir()
    (tmp_path / "new").mkdir()
    state = write_export(tmp_path / "state.json",
                         export(files(tmp_path / "old", shared())))
    r = CliRunner().invoke(cli, ["diff", "--state", state, "--format", "json",
                                 *files(tmp_path / "new", shared(fleets="train, dev, other"))])
    data = json.loads(r.stdout)
    ops = {c["name"]: c["op"] for c in data["changes"]}
    assert not [n for n, op in ops.items() if op in ("replace", "delete",
                                                     "create-replacement")], ops
    # the joining fleet's route tables read the new peering's id: the offline diff says it
    # cannot tell (`pulumi preview` will), and only there
    assert {n for n, op in ops.items() if op == "unknown"} <= {
        "other-vpc-private-rt", "other-vpc-public-rt"}, ops
    assert ops["other-vpc-peer-train"] == "create" and ops["other-fs-data-return"] == "create"
    assert ops["fs-data"] == "update"  # the security group admits other's nodes
    assert not any(n.startswith(("train-", "dev-")) for n in ops), ops


def test_a_fleet_sharing_from_another_zone_warns(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    devb = MORE["dev"].replace("name: dev", "name: devb").replace(
        "regions: [us-east-1]", "availability_zones: [us-east-1b]")
    train = MORE["train"].replace("regions: [us-east-1]", "availability_zones: [us-east-1a]")
    paths = [write(tmp_path, "backends.yml", BACKENDS + shared(fleets="train, devb")),
             write(tmp_path, "train.dstack.yml", train),
             write(tmp_path, "devb.dstack.yml", devb)]
    assert main(["plan", *paths]) == 0
    cap = capsys.readouterr()
    text = cap.out + cap.err
    assert "warning[V005]" in text and "fleet 'devb' in us-east-1b" in text, text


def test_two_lustres_of_one_fleet_shared_with_another_take_one_peering(tmp_path: Path) -> None:
    section = ("filesystems:\n"
               "  - {name: data, backend: azure, region: eastus, kind: lustre, "
               "capacity_gib: 8192, throughput: 250, fleets: [nd, ndb]}\n"
               "  - {name: ckpt, backend: azure, region: eastus, kind: lustre, "
               "capacity_gib: 8192, throughput: 250, mount: /mnt/ckpt, fleets: [nd, ndb]}\n")
    report = plan_files(files(tmp_path, section, ("nd", "ndb")))
    peerings = by_type(report, "azure-native:network:VirtualNetworkPeering")
    assert sorted(p["name"] for p in peerings) == ["ndb-peer-nd", "ndb-peer-nd-back"]
    assert len(by_type(report, "azure-native:storagecache:AmlFilesystem")) == 2
    aws = ("filesystems:\n"
           "  - {name: data, backend: aws, region: us-east-1, kind: nfs, fleets: [train, dev]}\n"
           "  - {name: home, backend: aws, region: us-east-1, kind: nfs, mount: /mnt/home, "
           "fleets: [train, dev]}\n")
    (tmp_path / "aws").mkdir()
    report = plan_files(files(tmp_path / "aws", aws, ("train", "dev")))
    assert len(by_type(report, "aws:ec2/vpcPeeringConnection:VpcPeeringConnection")) == 1
    routes = named(report, "dev-vpc-private-rt")["inputs"]["routes"]
    assert len([r for r in routes if r.get("vpcPeeringConnectionId")]) == 2
    assert len(by_type(report, "aws:ec2/route:Route")) == 2  # one back per filesystem table
