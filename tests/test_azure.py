"""Azure fidelity: InfiniBand clusters as one single-placement-group scale set (cloud-recipes
§3), plain VMs otherwise, and the limits that go with it."""

from __future__ import annotations

from ipaddress import IPv4Network
from pathlib import Path

import pytest

from gpufleet.compile.compiler import compile_inputs
from gpufleet.input.validate import validate_paths
from gpufleet.offers.catalog import load_catalog
from gpufleet.review import PlanReport

from planutil import EXAMPLES, SHARED, TEST_KEY, by_type, named, plan_files, write

VMSS = "azure-native:compute:VirtualMachineScaleSet"
VM = "azure-native:compute:VirtualMachine"
NSG = "azure-native:network:NetworkSecurityGroup"
KEY = TEST_KEY
BACKENDS = (f"backends:\n  - type: azure\n    ssh_public_key: {KEY}\n"
            "    subscription_id: s1\n    tenant_id: t1\n")


@pytest.fixture(scope="module")
def nd() -> PlanReport:
    return plan_files([EXAMPLES / "fleets" / "azure-nd-h100.dstack.yml", *SHARED])


def _plan(tmp: Path, body: str, backends: str = BACKENDS) -> PlanReport:
    return plan_files([write(tmp, "f.yml", "type: fleet\nname: az1\nbackends: [azure]\n" + body),
                       write(tmp, "b.yml", backends)])


def _codes(tmp: Path, body: str, backends: str = BACKENDS) -> list[str]:
    files = [write(tmp, "f.yml", "type: fleet\nname: az1\nbackends: [azure]\n" + body),
             write(tmp, "b.yml", backends)]
    return [d.code for d in compile_inputs(validate_paths(files).inputs,
                                           load_catalog()).diagnostics if d.is_error]


def test_nd_h100_cluster_is_one_single_placement_group_scale_set(nd: PlanReport) -> None:
    sets = by_type(nd, VMSS)
    assert len(sets) == 1 and [v["name"] for v in by_type(nd, VM)] == ["nd-h100-bastion"]
    vmss = sets[0]["inputs"]
    assert vmss["sku"] == {"name": "Standard_ND96isr_H100_v5", "tier": "Standard",
                           "capacity": 4}
    assert vmss["singlePlacementGroup"] is True and vmss["overprovision"] is False
    assert vmss["platformFaultDomainCount"] == 1
    nic = vmss["virtualMachineProfile"]["networkProfile"]["networkInterfaceConfigurations"][0]
    assert nic["enableAcceleratedNetworking"] is True
    assert "publicIpAddressConfiguration" not in nic["ipConfigurations"][0]
    assert vmss["virtualMachineProfile"]["priority"] == "Regular"
    os = vmss["virtualMachineProfile"]["osProfile"]["linuxConfiguration"]
    assert os["disablePasswordAuthentication"] is True


def test_no_address_in_the_rdma_reserved_range(nd: PlanReport) -> None:
    reserved = IPv4Network("172.16.0.0/16")
    vnet = by_type(nd, "azure-native:network:VirtualNetwork")[0]["inputs"]
    subnet = by_type(nd, "azure-native:network:Subnet")[0]["inputs"]
    for cidr in [*vnet["addressSpace"]["addressPrefixes"], subnet["addressPrefix"]]:
        assert not IPv4Network(cidr).overlaps(reserved)


def test_nsg_opens_nothing_but_ssh_from_ssh_cidrs(nd: PlanReport, tmp_path: Path) -> None:
    nsg = named(nd, "nd-h100-nsg", NSG)["inputs"]
    assert [(r["destinationPortRanges"], r["sourceApplicationSecurityGroups"])
            for r in nsg["securityRules"] if "filesystem" not in r["description"]] == [
        (["22"], [{"id": "nd-h100-bastion-asg-id"}])]
    # the one other rule: Lustre 988 from the example filesystem's own subnet (its servers
    # call their clients back)
    assert [(r["destinationPortRanges"], r["sourceAddressPrefixes"]) for r in
            nsg["securityRules"] if "filesystem" in r["description"]] == [
        (["988"], ["10.49.255.0/24"])]
    report = _plan(tmp_path, "nodes: 1\nresources:\n  gpu: T4\n",
                   BACKENDS + "    ssh_cidrs: [198.51.100.0/24]\n    public_ips: true\n"
                   "    vpc_ids: {eastus: rg/net, westus: rg/net, westeurope: rg/net}\n")
    rules = named(report, "az1-nsg", NSG)["inputs"]["securityRules"]
    assert [(r["destinationPortRanges"], r["sourceAddressPrefixes"], r["access"],
             r["direction"]) for r in rules] == [(["22"], ["198.51.100.0/24"], "Allow",
                                                  "Inbound")]


def test_nc_single_node_is_a_plain_vm(tmp_path: Path) -> None:
    report = _plan(tmp_path, "nodes: 1\nresources:\n  gpu: A100:80GB:1\n")
    assert not by_type(report, VMSS)
    vm = named(report, "az1-node-0", VM)["inputs"]
    assert vm["hardwareProfile"]["vmSize"].startswith("Standard_NC")
    nic = named(report, "az1-node-0-nic", "azure-native:network:NetworkInterface")["inputs"]
    assert nic["enableAcceleratedNetworking"] is True
    assert "publicIpAddress" not in nic["ipConfigurations"][0]
    disk = vm["storageProfile"]["osDisk"]
    assert disk["managedDisk"]["storageAccountType"] == "Premium_LRS"
    assert disk["diskSizeGB"] == 100


def test_spot_priority_eviction_and_max_price(tmp_path: Path) -> None:
    report = _plan(tmp_path, "nodes: 2\nplacement: cluster\nspot_policy: spot\n"
                   "resources:\n  gpu: A100:80GB:8\n")
    profile = by_type(report, VMSS)[0]["inputs"]["virtualMachineProfile"]
    assert (profile["priority"], profile["evictionPolicy"]) == ("Spot", "Delete")
    assert profile["billingProfile"] == {"maxPrice": -1}
    report = _plan(tmp_path, "nodes: 2\nplacement: cluster\nspot_policy: spot\nmax_price: 9\n"
                   "resources:\n  gpu: A100:80GB:8\n")
    profile = by_type(report, VMSS)[0]["inputs"]["virtualMachineProfile"]
    assert profile["billingProfile"] == {"maxPrice": 9}


def test_public_ips_opt_in(tmp_path: Path) -> None:
    report = _plan(tmp_path, "nodes: 1\nresources:\n  gpu: T4\n",
                   BACKENDS + "    public_ips: true\n")
    pip = named(report, "az1-node-0-pip", "azure-native:network:PublicIPAddress")["inputs"]
    assert pip["sku"] == {"name": "Standard"} and pip["publicIPAllocationMethod"] == "Static"


def test_scale_set_limits(tmp_path: Path) -> None:
    cluster = "placement: cluster\nresources:\n  gpu: H100:8\n"
    assert _codes(tmp_path, "nodes: 301\n" + cluster) == ["C008"]
    assert _codes(tmp_path, "nodes: 150\n" + cluster) == ["C008"]
    assert _codes(tmp_path, "nodes: 150\n" + cluster,
                  BACKENDS + "    max_scale_set_nodes: 200\n") == []


def test_located_error_for_301_nodes(tmp_path: Path) -> None:
    f = write(tmp_path, "f.yml", "type: fleet\nname: az1\nbackends: [azure]\nnodes: 301\n"
              "placement: cluster\nresources:\n  gpu: H100:8\n")
    b = write(tmp_path, "b.yml", BACKENDS)
    diag = compile_inputs(validate_paths([f, b]).inputs, load_catalog()).diagnostics[0]
    assert (Path(diag.file).name, diag.line, diag.column, diag.code) == ("f.yml", 4, 1, "C008")
    assert "at most 300" in diag.message


def test_rdma_range_is_an_error_and_a_missing_key_is_not(tmp_path: Path) -> None:
    cluster = "nodes: 2\nplacement: cluster\nresources:\n  gpu: H100:8\n"
    assert _codes(tmp_path, cluster, BACKENDS + "    cidr: 172.16.0.0/16\n") == ["C006"]
    # A key is no longer required to plan: `pulumi up` reads it from the stack config.
    assert _codes(tmp_path, cluster, "backends:\n  - type: azure\n") == []


def test_existing_networks_are_used(tmp_path: Path) -> None:
    report = _plan(tmp_path, "nodes: 1\nresources:\n  gpu: T4\n",
                   BACKENDS.replace("subscription_id: s1", "subscription_id: sub-1")
                   + "    subnet_ids: {eastus: netrg/corp/gpu}\n    vpc_ids: {westus: netrg/w}\n")
    assert not by_type(report, "azure-native:network:VirtualNetwork")
    nic = named(report, "az1-node-0-nic", "azure-native:network:NetworkInterface")["inputs"]
    region = named(report, "az1-node-0", VM)["inputs"]["location"]
    if region == "eastus":
        assert nic["ipConfigurations"][0]["subnet"]["id"] == (
            "/subscriptions/sub-1/resourceGroups/netrg/providers/Microsoft.Network/"
            "virtualNetworks/corp/subnets/gpu")


def test_fleets_in_one_region_share_one_resource_group(tmp_path: Path) -> None:
    two = ("type: fleet\nname: az1\nbackends: [azure]\nregions: [eastus]\nnodes: 1\n"
           "resources:\n  gpu: T4\n---\ntype: fleet\nname: az2\nbackends: [azure]\n"
           "regions: [eastus]\nnodes: 1\nresources:\n  gpu: T4\n")
    first, second = two.split("---\n")
    report = plan_files([write(tmp_path, "f1.yml", first), write(tmp_path, "f2.yml", second),
                         write(tmp_path, "b.yml", BACKENDS)])
    groups = by_type(report, "azure-native:resources:ResourceGroup")
    assert [g["name"] for g in groups] == ["rg-eastus"]
    assert groups[0]["inputs"]["resourceGroupName"] == "gpufleet-dev-eastus"
    assert groups[0]["parent"].endswith("pulumi:pulumi:Stack::gpufleet-dev")


def test_private_nodes_get_a_nat_gateway_and_public_ones_do_not(nd: PlanReport,
                                                               tmp_path: Path) -> None:
    nat = named(nd, "nd-h100-vnet-nat", "azure-native:network:NatGateway")["inputs"]
    assert nat["sku"] == {"name": "Standard"}
    assert nat["publicIpAddresses"] == [{"id": "nd-h100-vnet-nat-ip-id"}]
    subnet = named(nd, "nd-h100-subnet", "azure-native:network:Subnet")["inputs"]
    assert subnet["natGateway"] == {"id": "nd-h100-vnet-nat-id"}
    public = _plan(tmp_path, "nodes: 1\nresources:\n  gpu: T4\n",
                   BACKENDS + "    public_ips: true\n")
    assert not by_type(public, "azure-native:network:NatGateway")
