"""azure: what the backend can do and the tables gpufleet keeps for it. Pure data."""

from __future__ import annotations

import re
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

from gpufleet.backends.azure import buckets as _buckets
from gpufleet.backends.azure import names as _names
from gpufleet.backends.azure import quotas as _quotas
from gpufleet.codes import B004, B012, B019, C006, C008, C014, C024, G010, V001, V009
from gpufleet.traits import ALL_FEATURES as _ALL
from gpufleet.traits import (
    BackendTraits,
    CapacityCode,
    Feature,
    FilesystemService,
    ImageFamily,
    LustreTier,
    Machine,
    NfsSizes,
    ResourceKind,
    ZoneModel,
)
from gpufleet.traits import kinds as _kinds

_UBUNTU = "Canonical:0001-com-ubuntu-server-jammy:22_04-lts-gen2:latest"
_ALLOCATION = "learn.microsoft.com/troubleshoot/azure/virtual-machines/windows/allocation-failure"
_SIZE = re.compile(r"^Standard_([A-Z]+)\d+(?:-\d+)?([a-z]*)_(v\d+)$")
_TIB = 1024


def _family(instance_type: str) -> str:
    """Standard_D4s_v5 -> Dsv5."""
    m = _SIZE.match(instance_type)
    return "".join(m.groups()) if m else instance_type


BASTION = Machine("Standard_B1ls", _UBUNTU, 30, "StandardSSD_LRS")
# dstack's gateway VM (dstack 0.22.5: core/backends/azure/compute.py,
# create_gateway_replica: Standard_B1ms, a 30 GB disk)
GATEWAY = Machine("Standard_B1ms", _UBUNTU, 30, "StandardSSD_LRS")


def _capacity(inputs: Mapping[str, Any]) -> int | None:
    """A scale set's instance count: its `sku.capacity`."""
    sku = inputs.get("sku")
    capacity = sku.get("capacity") if isinstance(sku, Mapping) else None
    if isinstance(capacity, int | float) and not isinstance(capacity, bool):
        return int(capacity)
    return None

TRAITS = BackendTraits(
    "azure", _ALL - {Feature.RESERVATIONS, Feature.CAPACITY_BLOCKS, Feature.PRIVATE_GATEWAYS,
                     Feature.GATEWAY_INSTANCE_TYPE, Feature.GATEWAY_LOAD_BALANCER,
                     Feature.SHARED_NETWORKS},
    MappingProxyType({
        Feature.RESERVATIONS: "dstack's azure backend takes no reservation; gpufleet joins "
                              "a capacity reservation group declared in the backends file",
        Feature.CAPACITY_BLOCKS: "Capacity Blocks for ML are an EC2 purchase option",
        Feature.PRIVATE_GATEWAYS: "dstack runs Azure gateways with a public IP only",
        Feature.GATEWAY_INSTANCE_TYPE: "Azure gateways always use Standard_B1ms",
        Feature.GATEWAY_LOAD_BALANCER: "dstack fronts gateways with a load balancer on aws and "
                                       "gcp only",
        Feature.SHARED_NETWORKS: "a VNet per fleet keeps its NSG, NAT gateway and peerings "
                                 "apart; Azure's VNet and public IP quotas per region are "
                                 "large (`gpufleet preflight` reads them)"}),
    re.compile(r"[a-z]+[a-z0-9]*"), "eastus", "azureuser", zones=ZoneModel.NONE,
    code_notes=MappingProxyType({
        G010: "an Azure DNS zone lives in a resource group",
        B004: "private VMs need `vpc_ids` or `subnet_ids`",
        C006: "the InfiniBand range 172.16.0.0/16", C008: "Azure's scale-set size",
        C014: "plain VMs beyond what one fleet launches", C024: "fleets share no network",
        V001: "dstack 0.22.5 has no volumes on azure",
        V009: "Managed Lustre: 768 TiB at 40 MB/s per TiB, 128 TiB above",
        B012: "capacity-reservation-group",
        B019: "`tenant_id` and `subscription_id`"}),
    node_types=("azure-native:compute:VirtualMachine",),
    billed=MappingProxyType({
        "azure-native:compute:VirtualMachine": "instance",
        "azure-native:compute:VirtualMachineScaleSet": "instance",
        "azure-native:network:PublicIPAddress": "address",
        "azure-native:network:NatGateway": "nat", "azure-native:dns:Zone": "dns_zone",
        "azure-native:storagecache:AmlFilesystem": "filesystem",
        "azure-native:storage:FileShare": "filesystem"}),
    resources=MappingProxyType({
        "azure-native:network:VirtualNetwork": ResourceKind(
            frozenset({"location", "resourceGroupName"}), "network"),
        "azure-native:network:Subnet": ResourceKind(
            frozenset({"addressPrefix", "virtualNetworkName", "resourceGroupName"}), "network"),
        "azure-native:compute:VirtualMachineScaleSet": ResourceKind(
            frozenset({"location", "singlePlacementGroup", "orchestrationMode",
                       "resourceGroupName"}), "instance",
            replaced_with=frozenset({"virtualMachineProfile"})),
        "azure-native:compute:VirtualMachine": ResourceKind(
            frozenset({"location", "resourceGroupName", "osProfile"}), "instance",
            replaced_with=frozenset({"networkProfile"})),
        "azure-native:network:NetworkInterface": ResourceKind(
            replaced_with=frozenset({"ipConfigurations"})),
        "azure-native:network:PublicIPAddress": ResourceKind(
            frozenset({"location", "sku", "resourceGroupName"}), "address"),
        "azure-native:dns:RecordSet": ResourceKind(
            frozenset({"zoneName", "relativeRecordSetName", "recordType",
                       "resourceGroupName"}), "dns"),
        "azure-native:storagecache:AmlFilesystem": ResourceKind(
            frozenset({"amlFilesystemName", "location", "resourceGroupName",
                       "filesystemSubnet", "sku", "zones"}), "storage"),
        "azure-native:storage:StorageAccount": ResourceKind(
            frozenset({"accountName", "location", "resourceGroupName"}), "storage"),
        "azure-native:storage:FileShare": ResourceKind(
            frozenset({"accountName", "shareName", "resourceGroupName", "enabledProtocols"}),
            "storage"),
        "azure-native:compute:Disk": ResourceKind(
            frozenset({"diskName", "location", "resourceGroupName", "zones"}), "storage"),
        **_kinds(dns=("azure-native:dns:Zone",)),
    }),
    bastion=BASTION,
    gateway=GATEWAY,
    # Azure's RDMA network reserves 172.16.0.0/16: the pool stays in 10.128.0.0/9
    server_size="Standard_B2s", address_pool="10.128.0.0/9", scope_key="subscription_id",
    gpu_image=ImageFamily(
        "azure-ubuntu-hpc", True, "NVIDIA driver, CUDA, InfiniBand (DOCA OFED), Docker, NVIDIA "
        "Container Toolkit (azhpc-images component list)"), volume_disk_type=None,
    # Azure Managed Lustre: sizes per throughput tier; the maximum is a default a support
    # request raises (learn.microsoft.com/azure/azure-managed-lustre/amlfs-prerequisites)
    lustre_tiers=MappingProxyType({
        40: LustreTier(48 * _TIB, 768 * _TIB, hard_max=False),
        125: LustreTier(16 * _TIB, 128 * _TIB, hard_max=False),
        250: LustreTier(8 * _TIB, 128 * _TIB, hard_max=False),
        500: LustreTier(4 * _TIB, 128 * _TIB, hard_max=False)}),
    # premium Azure Files over NFS (learn.microsoft.com/azure/storage/files/
    # understanding-billing#provisioned-v1-model)
    default_lustre_throughput=125, nfs_sizes=NfsSizes("Azure Files premium NFS", 100, 102400),
    filesystems=MappingProxyType({
        "lustre": FilesystemService("amlfs", "Azure Managed Lustre", True, default_zone="1",
                                    own_range=True,
                                    mount_options="defaults,_netdev,noatime,flock"),
        "nfs": FilesystemService("azure-files-nfs", "Azure Files (premium NFS)", False,
                                 built_after_peers=True,
                                 mount_options="vers=4,minorversion=1,sec=sys,nconnect=4,_netdev")
    }),
    filesystem_range_in_network=True,
    shared_filesystem_way="through a VNet peering both ways (its subnet {subnet})",
    declared_reservations_only=True,
    reservation_use=MappingProxyType({
        None: "the capacity reservation group the VMs or scale set join"}),
    export_requires=("tenant_id", "subscription_id"),
    address_kinds=MappingProxyType({True: "Standard static public IP"}),
    pulumi_package="azure-native",
    scale_set_type="azure-native:compute:VirtualMachineScaleSet", scale_set_size=_capacity,
    reservation_kinds=("capacity-reservation-group",),
    capacity_errors=(
        CapacityCode("azure", "SkuNotAvailable",
                     "learn.microsoft.com/azure/azure-resource-manager/troubleshooting/"
                     "error-sku-not-available"),
        CapacityCode("azure", "AllocationFailed", _ALLOCATION),
        CapacityCode("azure", "ZonalAllocationFailed", _ALLOCATION),
        CapacityCode("azure", "OverconstrainedAllocationRequest", _ALLOCATION),
        CapacityCode("azure", "OverconstrainedZonalAllocationRequest", _ALLOCATION),
    ),
    family=_family,
    name_rules=_names.NAME_RULES, name_budgets=_names.NAME_BUDGETS,
    network_quotas=_names.NETWORK_QUOTAS,
    buckets=_buckets.BUCKETS, secret_store=_buckets.SECRETS,
    compute_quotas=_quotas.compute_quotas, quota_scope="subscription",
    quota_lag=("minutes when the request is approved automatically; a support request, usually "
               "days, when it is not (learn.microsoft.com/azure/quotas/per-vm-quota-requests); "
               "meanwhile keep the fleet at `nodes: 0`, or plan it on another offer"),
    offline_run_cost=35,  # azure-native's compute, network and resources modules
)
