"""GCP fidelity: the recorded resources carry the recipe numbers of cloud-recipes.md §2."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from gpufleet.compile.compiler import compile_inputs
from gpufleet.input.validate import validate_paths
from gpufleet.offers.catalog import load_catalog
from gpufleet.review import PlanReport

from planutil import EXAMPLES, SHARED, by_type, children, named, plan_files, write

NET = "gcp:compute/network:Network"
SUBNET = "gcp:compute/subnetwork:Subnetwork"
FIREWALL = "gcp:compute/firewall:Firewall"
INSTANCE = "gcp:compute/instance:Instance"


@pytest.fixture(scope="module")
def a4() -> PlanReport:
    return plan_files([EXAMPLES / "fleets" / "gcp-a4.dstack.yml", *SHARED])


def test_a4_three_networks_with_mtu_8896(a4: PlanReport) -> None:
    nets = by_type(a4, NET)
    assert sorted(n["name"] for n in nets) == ["a4-gpu-1", "a4-net", "a4-roce"]
    assert {n["inputs"]["mtu"] for n in nets} == {8896}
    assert all(n["inputs"]["autoCreateSubnetworks"] is False for n in nets)
    comps = Counter(r["type"] for r in a4.resources if r["type"].startswith("gpufleet:gcp:"))
    assert comps == {"gpufleet:gcp:Fleet": 1, "gpufleet:gcp:Network": 2,
                     "gpufleet:gcp:RoceNetwork": 1}


def test_a4_roce_network_profile_subnets_and_no_firewall(a4: PlanReport) -> None:
    roce = named(a4, "a4-roce", NET)
    assert roce["inputs"]["networkProfile"] == \
        "projects/my-ml-project/global/networkProfiles/us-west2-c-vpc-roce"
    under = children(a4, "a4-roce")
    subnets = [r for r in under if r["type"] == SUBNET]
    assert len(subnets) == 8
    assert {s["inputs"]["region"] for s in subnets} == {"us-west2"}
    assert {s["inputs"]["network"] for s in subnets} == {"a4-roce-id"}
    assert not [r for r in under if r["type"] == FIREWALL]
    prefixes = {s["inputs"]["ipCidrRange"].split("/")[1] for s in subnets}
    assert prefixes == {"21"}


def test_a4_nodes_have_ten_nics_eight_mrdma(a4: PlanReport) -> None:
    nodes = [n for n in by_type(a4, INSTANCE) if n["name"] != "a4-bastion"]
    assert sorted(n["name"] for n in nodes) == ["a4-node-0", "a4-node-1"]
    for node in nodes:
        nics = node["inputs"]["networkInterfaces"]
        assert len(nics) == 10
        assert [n["nicType"] for n in nics] == ["GVNIC", "GVNIC"] + ["MRDMA"] * 8
        assert [n["network"] for n in nics[:2]] == ["a4-net-id", "a4-gpu-1-id"]
        assert {n["network"] for n in nics[2:]} == {"a4-roce-id"}
        assert len({n["subnetwork"] for n in nics[2:]}) == 8
        assert not any("accessConfigs" in n for n in nics), "no public IP unless asked"
        assert node["inputs"]["zone"] == "us-west2-c"
        assert node["inputs"]["machineType"] == "a4-highgpu-8g"


def test_a4_spot_scheduling_placement_and_disk(a4: PlanReport) -> None:
    node = named(a4, "a4-node-0", INSTANCE)
    s = node["inputs"]["scheduling"]
    assert s["provisioningModel"] == "SPOT" and s["preemptible"] is True
    assert s["onHostMaintenance"] == "TERMINATE" and s["automaticRestart"] is False
    assert s["instanceTerminationAction"] == "STOP"
    policy = named(a4, "a4-placement", "gcp:compute/resourcePolicy:ResourcePolicy")
    assert policy["inputs"]["groupPlacementPolicy"] == {"availabilityDomainCount": 1,
                                                        "collocation": "COLLOCATED"}
    assert node["inputs"]["resourcePolicies"] == "mock://gcp/resourcePolicy/a4-placement"
    disk = node["inputs"]["bootDisk"]["initializeParams"]
    assert disk["type"] == "hyperdisk-balanced" and disk["size"] == 100
    assert node["inputs"]["labels"]["managed-by"] == "gpufleet"


def test_firewalls_scope_to_fleet_and_ssh_only_through_the_bastion(a4: PlanReport) -> None:
    rules = {r["name"]: r["inputs"] for r in by_type(a4, FIREWALL)}
    # and the example filesystem's Lustre servers (988 from their own range) on the nodes
    assert set(rules) == {"a4-internal", "a4-ssh-from-bastion", "a4-bastion-ssh",
                          "a4-gpu-internal-1", "a4-fs-a4-data"}
    assert rules["a4-fs-a4-data"]["sourceRanges"] == ["10.37.240.0/20"]
    assert rules["a4-bastion-ssh"]["sourceRanges"] == ["203.0.113.0/24"]
    assert rules["a4-bastion-ssh"]["targetTags"] == ["gpufleet-a4-bastion"]
    assert rules["a4-ssh-from-bastion"]["sourceTags"] == ["gpufleet-a4-bastion"]
    assert rules["a4-ssh-from-bastion"]["targetTags"] == ["gpufleet-a4"]
    assert "sourceRanges" not in rules["a4-ssh-from-bastion"]
    assert rules["a4-bastion-ssh"]["allows"] == [{"protocol": "tcp", "ports": ["22"]}]
    assert rules["a4-internal"]["sourceTags"] == ["gpufleet-a4"]
    assert rules["a4-internal"]["targetTags"] == ["gpufleet-a4"]
    for r in rules.values():
        assert "0.0.0.0/0" not in (r.get("sourceRanges") or [])


def test_every_custom_resource_uses_the_explicit_provider(a4: PlanReport) -> None:
    custom = [r for r in a4.resources if r["custom"] and not r["type"].startswith("pulumi:")]
    assert custom
    assert {r["provider"].rsplit("::", 1)[0] for r in custom} == {
        "urn:pulumi:dev::gpufleet::pulumi:providers:gcp::gcp-my-ml-project-us-west2"}


def test_nat_for_private_nodes(a4: PlanReport) -> None:
    nat = named(a4, "a4-net-nat", "gcp:compute/routerNat:RouterNat")
    assert nat["inputs"]["natIpAllocateOption"] == "AUTO_ONLY"


@pytest.mark.parametrize(("itype", "gpu", "nics", "extra_mtu", "extras"), [
    ("a3-megagpu-8g", "H100:8", 9, 8244, 8),
    ("a3-highgpu-8g", "H100:8", 5, 8244, 4),
    ("a2-highgpu-8g", "A100:40GB:8", 1, None, 0),
    ("g2-standard-4", "L4", 1, None, 0),
])
def test_nic_layout_per_machine_type(tmp_path: Path, itype: str, gpu: str, nics: int,
                                     extra_mtu: int | None, extras: int) -> None:
    f = write(tmp_path, "f.yml", f"type: fleet\nname: t1\nnodes: 1\nbackends: [gcp]\n"
              f"spot_policy: auto\ninstance_types: [{itype}]\nresources:\n  gpu: {gpu}\n")
    report = plan_files([f])
    node = named(report, "t1-node-0", INSTANCE)
    got = node["inputs"]["networkInterfaces"]
    assert len(got) == nics and {n["nicType"] for n in got} == {"GVNIC"}
    gpu_nets = [n for n in by_type(report, NET) if n["name"].startswith("t1-gpu-")]
    assert len(gpu_nets) == extras
    assert {n["inputs"].get("mtu") for n in gpu_nets} == ({extra_mtu} if extras else set())
    assert not by_type(report, "gcp:compute/resourcePolicy:ResourcePolicy")  # not a cluster
    assert not [r for r in by_type(report, FIREWALL) if r["name"].endswith("-ssh")]


def test_public_ips_reservation_and_existing_networks(tmp_path: Path) -> None:
    f = write(tmp_path, "f.yml", "type: fleet\nname: res\nnodes: 2\nplacement: cluster\n"
              "backends: [gcp]\nreservation: my-res\ninstance_types: [a3-ultragpu-8g]\n"
              "spot_policy: auto\nresources:\n  gpu: H200:8\ntags: {Team: LLM}\n")
    b = write(tmp_path, "b.yml", "backends:\n  - type: gcp\n    project_id: p1\n"
              "    public_ips: true\n    vpc_name: corp\n    roce_vpcs: [corp-roce]\n")
    # A3 Ultra is sold as spot only in the catalog: under a reservation the reservation is
    # the offer, on-demand, at a price the catalog does not know (issue 28: dstack's order).
    compiled = compile_inputs(validate_paths([f, b]).inputs, load_catalog())
    assert [d.code for d in compiled.diagnostics if d.is_error] == []
    [plan] = compiled.plans
    assert (plan.instance_type, plan.spot, plan.price_known) == ("a3-ultragpu-8g", False, False)
    assert plan.placement is None and plan.reservation == "my-res"
    # Same fleet on an on-demand type: reservation affinity, no placement policy.
    f = write(tmp_path, "f.yml", "type: fleet\nname: res\nnodes: 2\nplacement: cluster\n"
              "backends: [gcp]\nreservation: my-res\ninstance_types: [a2-ultragpu-8g]\n"
              "resources:\n  gpu: A100:80GB:8\ntags: {Team: LLM}\n")
    report = plan_files([f, b])
    node = named(report, "res-node-0", INSTANCE)
    assert node["inputs"]["reservationAffinity"] == {
        "type": "SPECIFIC_RESERVATION",
        "specificReservation": {"key": "compute.googleapis.com/reservation-name",
                                "values": ["my-res"]}}
    assert not by_type(report, "gcp:compute/resourcePolicy:ResourcePolicy")
    nics = node["inputs"]["networkInterfaces"]
    assert nics[0]["accessConfigs"] == [{}] and all("accessConfigs" not in n for n in nics[1:])
    assert node["inputs"]["labels"]["team"] == "llm"
    # The existing main VPC is looked up, not created; no NAT with public IPs.
    assert "res-net" not in {n["name"] for n in by_type(report, NET)}
    assert ("gcp:compute/getNetwork:getNetwork", {"name": "corp", "project": "p1"}) in [
        (t, dict(a)) for t, a in report.lookups]
    assert not by_type(report, "gcp:compute/routerNat:RouterNat")


def test_existing_roce_vpc_subnets_are_looked_up(tmp_path: Path) -> None:
    f = write(tmp_path, "f.yml", "type: fleet\nname: ultra\nnodes: 1\nplacement: cluster\n"
              "backends: [gcp]\nspot_policy: spot\nresources:\n  gpu: B200:8\n")
    b = write(tmp_path, "b.yml", "backends:\n  - type: gcp\n    project_id: p1\n"
              "    roce_vpcs: [corp-roce]\n    extra_vpcs: [corp-gpu]\n")
    report = plan_files([f, b])
    assert sorted(n["name"] for n in by_type(report, NET)) == ["ultra-net"]
    nics = named(report, "ultra-node-0", INSTANCE)["inputs"]["networkInterfaces"]
    assert len(nics) == 10
    assert nics[2]["subnetwork"].endswith("corp-roce-mock-subnet-0")
    tokens = {t for t, _ in report.lookups}
    assert "gcp:compute/getSubnetworks:getSubnetworks" in tokens


@pytest.mark.parametrize("itype", ["a3-highgpu-8g", "a3-edgegpu-8g"])
def test_gpudirect_tcpx_clusters_are_refused_with_the_reason(tmp_path: Path, itype: str) -> None:
    """A3 High / Edge clusters need GPUDirect-TCPX, which Google documents on
    Container-Optimized OS, where dstack's SSH fleets cannot deploy (A3 Mega builds:
    tests/test_gpudirect.py)."""
    fleet = ("type: fleet\nname: t1\nnodes: {n}\nplacement: cluster\nbackends: [gcp]\n"
             f"spot_policy: auto\ninstance_types: [{itype}]\nresources:\n  gpu: H100:8\n")
    f = write(tmp_path, "f.yml", fleet.format(n=2))
    diags = compile_inputs(validate_paths([f]).inputs, load_catalog()).diagnostics
    assert [(d.code, d.line) for d in diags] == [("C015", 4)]
    assert "NCCL falls back to TCP" in diags[0].message and "nodes: 0" in str(diags[0].hint)
    assert "Container-Optimized OS" in diags[0].message
    assert "/usr/local/bin" in diags[0].message and "A3 Mega" in str(diags[0].hint)
    figure = {"a3-edgegpu-8g": "0.8 Tbps its 4 GPU NICs", "a3-highgpu-8g": "1 Tbps its 4 GPU NICs"}
    assert figure[itype] in diags[0].message
    f = write(tmp_path, "f.yml", fleet.format(n='"0..2"'))  # networks only: dstack provisions
    assert compile_inputs(validate_paths([f]).inputs, load_catalog()).ok


def test_a_shared_vpc_joins_the_host_projects_network_and_creates_none_of_its_rules(
        tmp_path: Path) -> None:
    """`vpc_project_id` (dstack's Shared VPC setting): the nodes join the host project's
    network and a subnet looked up there; firewall rules and NAT are the host project's, so
    none is created, and a warning lists what the host project must allow."""
    backends = ("access:\n  ssh_public_key: file:key.pub\nbackends:\n  - type: gcp\n"
                "    project_id: svc\n    vpc_project_id: host\n    vpc_name: shared\n"
                "    ssh_cidrs: [203.0.113.0/24]\n")
    (tmp_path / "key.pub").write_text((EXAMPLES / "keys" / "gpufleet-example.pub").read_text())
    fleet = ("type: fleet\nname: sv\nnodes: 2\nplacement: cluster\nbackends: [gcp]\n"
             "resources:\n  gpu: L4:1\n")
    files = [write(tmp_path, "b.yml", backends), write(tmp_path, "f.yml", fleet)]
    compiled = compile_inputs(validate_paths(files).inputs, load_catalog())
    assert [d.code for d in compiled.diagnostics] == ["C017"]
    assert "host project must allow all traffic between the fleet's nodes" in \
        compiled.diagnostics[0].message
    report = plan_files(files)
    assert not by_type(report, NET) and not by_type(report, SUBNET)
    assert not by_type(report, FIREWALL)
    assert not by_type(report, "gcp:compute/routerNat:RouterNat")
    lookups = [(t, dict(a)) for t, a in report.lookups]
    assert ("gcp:compute/getNetwork:getNetwork", {"name": "shared", "project": "host"}) \
        in lookups
    node = named(report, "sv-node-0", INSTANCE)["inputs"]
    region = node["zone"].rsplit("-", 1)[0]
    assert ("gcp:compute/getSubnetworks:getSubnetworks",
            {"filter": "network eq .*/shared$", "project": "host", "region": region}) \
        in lookups
    assert "/projects/host/regions/" in node["networkInterfaces"][0]["subnetwork"]
    # A Shared VPC without the network's name is refused.
    bad = write(tmp_path, "b.yml", backends.replace("    vpc_name: shared\n", ""))
    assert [d.code for d in validate_paths([bad]).diagnostics] == ["B009"]
