"""azure filesystems: Azure Managed Lustre in a subnet of its own, or premium Azure Files over NFS
with the storage account closed to everything but the node subnets."""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from typing import Any

import pulumi
from pulumi_azure_native import network as az_network
from pulumi_azure_native import storage, storagecache

from gpufleet.compile import FilesystemDesign, FleetDesign, naming

from ..filesystems import LUSTRE_FSNAME, SHARE, protected


def storage_account_name(fleet: str, fs: FilesystemDesign) -> str:
    """A storage account name (3-24 lowercase letters and digits, unique in Azure): the
    filesystem's name and a digest of its (first) fleet's, so two fleets' names differ."""
    digest = hashlib.sha256(f"{fleet}/{fs.name}".encode()).hexdigest()[:6]
    return ("gf" + re.sub(r"[^a-z0-9]", "", fs.name))[:18] + digest


def azure_files_target(fleet: str, fs: FilesystemDesign) -> pulumi.Output[str | None]:
    account = storage_account_name(fleet, fs)
    return pulumi.Output.from_input(f"{account}.file.core.windows.net:/{account}/{SHARE}")


@dataclass(frozen=True)
class AzureHosted:
    """An Azure Managed Lustre other fleets mount: the VNet they peer with, and its target."""

    vnet_id: pulumi.Output[str]
    vnet_name: pulumi.Output[str]
    resource_group: pulumi.Output[str]
    target: pulumi.Output[str | None]


def shared_subnets_key(fs: FilesystemDesign) -> str:
    """Where the fleets sharing an Azure Files filesystem leave their node subnets for the
    first fleet's storage account (they are built before it)."""
    return f"{fs.name}:subnets"


def after(child: pulumi.ResourceOptions, last: list[pulumi.Resource]) -> pulumi.ResourceOptions:
    """``child`` that waits for the last change to the same VNet (``last``)."""
    return pulumi.ResourceOptions.merge(child, pulumi.ResourceOptions(depends_on=list(last)))


def azure_peering(plan: FleetDesign, fs: FilesystemDesign, rg: pulumi.Input[str],
                  vnet_id: pulumi.Input[str], vnet_name: pulumi.Input[str],
                  shared: dict[str, Any], child: pulumi.ResourceOptions,
                  last: list[pulumi.Resource]) -> None:
    """This fleet's VNet and the one holding ``fs`` peered both ways (a peering is one-way
    in Azure): this fleet's nodes reach the Lustre servers, and they call the nodes back."""
    h: AzureHosted = shared[fs.name]
    name = naming.child(plan.name, f"peer-{fs.held_by}")
    peering = az_network.VirtualNetworkPeering(
        name, resource_group_name=rg, virtual_network_name=vnet_name,
        remote_virtual_network={"id": h.vnet_id}, allow_virtual_network_access=True,
        allow_forwarded_traffic=False, opts=after(child, last))
    last[:] = [peering]
    az_network.VirtualNetworkPeering(
        naming.child(name, "back"), resource_group_name=h.resource_group,
        virtual_network_name=h.vnet_name, remote_virtual_network={"id": vnet_id},
        allow_virtual_network_access=True, allow_forwarded_traffic=False, opts=child)


def azure_filesystem(fs: FilesystemDesign, plan: FleetDesign, rg: pulumi.Output[str],
                     vnet: tuple[pulumi.Output[str], pulumi.Output[str]],
                     node_subnet_id: pulumi.Input[str], child: pulumi.ResourceOptions,
                     shared: dict[str, Any], last: list[pulumi.Resource]
                     ) -> pulumi.Output[str | None]:
    """``vnet``: the fleet's VNet (id, name); ``last``: the last change made to it."""
    name = f"fs-{fs.name}"
    tags = dict(fs.labels)
    vnet_id, vnet_name = vnet
    if fs.service == "amlfs":
        assert fs.subnet is not None and fs.capacity_gib is not None
        subnet = az_network.Subnet(f"{name}-subnet", resource_group_name=rg,
                                   virtual_network_name=vnet_name, address_prefix=fs.subnet,
                                   opts=after(child, last))
        last[:] = [subnet]
        args: dict[str, Any] = {
            "aml_filesystem_name": fs.name, "resource_group_name": rg, "location": plan.region,
            "sku": {"name": f"AMLFS-Durable-Premium-{fs.throughput}"},
            "storage_capacity_ti_b": fs.capacity_gib / 1024, "filesystem_subnet": subnet.id,
            "maintenance_window": {"day_of_week": "Sunday", "time_of_day_utc": "02:00"},
            "tags": tags, **({"zones": [fs.zone]} if fs.zone else {})}
        lustre = storagecache.AmlFilesystem(name, **args, opts=protected(child))
        target = lustre.client_info.apply(_amlfs_target)
        if fs.peers:
            shared[fs.name] = AzureHosted(vnet_id, vnet_name, rg, target)
        return target
    account = storage_account_name(plan.name, fs)
    # the fleets sharing it were built first and left their node subnets
    subnets = [node_subnet_id, *shared.get(shared_subnets_key(fs), [])]
    account_args: dict[str, Any] = {
        "account_name": account, "resource_group_name": rg, "location": plan.region,
        "kind": "FileStorage", "sku": {"name": "Premium_LRS"},
        # NFS shares take no HTTPS; the account admits the node subnet only
        "enable_https_traffic_only": False, "minimum_tls_version": "TLS1_2",
        "allow_blob_public_access": False, "public_network_access": "Enabled",
        "network_rule_set": {"default_action": "Deny", "bypass": "None",
                             "virtual_network_rules": [{"virtual_network_resource_id": s,
                                                        "action": "Allow"} for s in subnets]},
        "tags": tags}
    acct = storage.StorageAccount(name, **account_args, opts=protected(child))
    storage.FileShare(f"{name}-share", account_name=acct.name, resource_group_name=rg,
                      share_name=SHARE, enabled_protocols="NFS", root_squash="NoRootSquash",
                      share_quota=fs.capacity_gib, opts=protected(child))
    return azure_files_target(plan.name, fs)


def _amlfs_target(info: Any) -> str | None:
    address = getattr(info, "mgs_address", None) if info is not None else None
    return f"{address}@tcp:/{LUSTRE_FSNAME}" if address else None
