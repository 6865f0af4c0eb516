"""Shared filesystems, built inside the fleet component that mounts them (its network, before
its nodes, whose boot script mounts them). Each is protected from deletion and reachable from
the fleet's node subnets only; each function returns the mount target the nodes use
(`dns@tcp:/name` for Lustre, `host:/export` for NFS), unknown until the cloud answers.

- aws: FSx for Lustre PERSISTENT_2 SSD (encrypted at rest, always) or EFS (encrypted,
  elastic throughput) with a mount target, behind a security group of its own. One mounted
  by several fleets sits in a subnet of its own whose route table leads back to each of
  them through their peering (the other fleets build the peering and that route); they
  mount it by address, as AWS says for a peered VPC (FSx: its primary interface's; EFS: the
  mount target's);
- gcp: Managed Lustre on a private services access range of the fleet's block, or Filestore
  zonal exporting to the node subnets only;
- azure: Azure Managed Lustre in a subnet of its own, or premium Azure Files over NFS with
  the storage account closed to everything but the node subnets (their service endpoint).
  Azure Managed Lustre mounted by several fleets: each other fleet peers its VNet with the
  first one's, both ways; Azure Files: the account admits each fleet's node subnet.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence
from dataclasses import dataclass
from ipaddress import IPv4Network
from typing import Any

import pulumi
import pulumi_aws as aws
import pulumi_gcp as gcp
from pulumi_azure_native import network as az_network
from pulumi_azure_native import storage, storagecache

from gpufleet.compile import FilesystemPlan, FleetPlan, naming

SHARE = "share"  # the NFS export / file share's name
LUSTRE_FSNAME = "lustrefs"  # Managed Lustre's and AMLFS's file system name


def _protected(child: pulumi.ResourceOptions, *more: pulumi.ResourceOptions
               ) -> pulumi.ResourceOptions:
    opts = pulumi.ResourceOptions.merge(child, pulumi.ResourceOptions(protect=True))
    for extra in more:
        opts = pulumi.ResourceOptions.merge(opts, extra)
    return opts


def _target(*parts: Any, fmt: str) -> pulumi.Output[str | None]:
    """A mount target from outputs, None while any part is unknown."""
    return pulumi.Output.all(*parts).apply(
        lambda v: fmt.format(*v) if all(x not in (None, "") for x in v) else None)


@dataclass(frozen=True)
class Hosted:
    """A filesystem other fleets mount, as its fleet built it: what they peer with, the
    route table they add their way back to, and the target they mount by address."""

    vpc_id: pulumi.Output[str]
    route_table_id: pulumi.Output[str]
    target: pulumi.Output[str | None]


def aws_filesystem(fs: FilesystemPlan, plan: FleetPlan, vpc_id: pulumi.Input[str],
                   subnet_id: pulumi.Input[str], zone: pulumi.Input[str],
                   child: pulumi.ResourceOptions, hosted: dict[str, Any]
                   ) -> pulumi.Output[str | None]:
    name = f"fs-{fs.name}"
    route_table: aws.ec2.RouteTable | None = None
    if fs.peers:  # shared: a subnet of its own, with a route table the mounting fleets fill
        assert fs.subnet is not None
        subnet = aws.ec2.Subnet(
            f"{name}-subnet", vpc_id=vpc_id, cidr_block=fs.subnet, availability_zone=zone,
            map_public_ip_on_launch=False, tags={**dict(fs.labels), "Name": f"{name}-subnet"},
            opts=pulumi.ResourceOptions.merge(child, pulumi.ResourceOptions(
                replace_on_changes=["cidr_block", "availability_zone"])))
        # no inline routes: each mounting fleet adds its own way back as a Route
        route_table = aws.ec2.RouteTable(f"{name}-rt", vpc_id=vpc_id,
                                         tags={**dict(fs.labels), "Name": f"{name}-rt"},
                                         opts=child)
        aws.ec2.RouteTableAssociation(f"{name}-rt-assoc", subnet_id=subnet.id,
                                      route_table_id=route_table.id, opts=child)
        subnet_id = subnet.id
    ranges = [(988, 988), (1018, 1023)] if fs.kind == "lustre" else [(2049, 2049)]
    tags = {**dict(fs.labels), "Name": name}
    whose = f"fleet {plan.name}'s nodes" if not fs.peers else \
        f"the nodes of fleets {', '.join((plan.name, *fs.peers))}"
    ingress = [aws.ec2.SecurityGroupIngressArgs(
        protocol="tcp", from_port=lo, to_port=hi, cidr_blocks=list(fs.admit),
        description=f"{fs.kind} from {whose}") for lo, hi in ranges]
    if fs.kind == "lustre":  # FSx's servers talk to each other through the same group
        ingress += [aws.ec2.SecurityGroupIngressArgs(
            protocol="tcp", from_port=lo, to_port=hi, self=True,
            description="lustre between the file servers") for lo, hi in ranges]
    sg = aws.ec2.SecurityGroup(
        name, vpc_id=vpc_id, description=f"gpufleet filesystem {fs.name} of fleet {plan.name}",
        ingress=ingress,
        egress=[aws.ec2.SecurityGroupEgressArgs(
            protocol="tcp", from_port=lo, to_port=hi, cidr_blocks=list(fs.admit),
            description=f"{fs.kind} to {whose}") for lo, hi in ranges],
        tags=tags, opts=child)
    if fs.service == "fsx-lustre":
        lustre = aws.fsx.LustreFileSystem(
            name, storage_capacity=fs.capacity_gib, subnet_ids=subnet_id,
            deployment_type="PERSISTENT_2", storage_type="SSD",
            per_unit_storage_throughput=fs.throughput, security_group_ids=[sg.id],
            data_compression_type="LZ4", file_system_type_version="2.15", tags=tags,
            opts=_protected(child))
        if route_table is not None:
            invoke = pulumi.InvokeOptions(parent=child.parent)

            def primary_ip(ids: Sequence[str]) -> str | None:
                # "the first network interface describe-file-systems returns" (FSx for
                # Lustre guide: mounting from a peered VPC)
                if not ids:
                    return None
                return aws.ec2.get_network_interface(id=ids[0], opts=invoke).private_ip
            hosted[fs.name] = Hosted(pulumi.Output.from_input(vpc_id), route_table.id,
                                     _target(lustre.network_interface_ids.apply(primary_ip),
                                             lustre.mount_name, fmt="{}@tcp:/{}"))
        return _target(lustre.dns_name, lustre.mount_name, fmt="{}@tcp:/{}")
    efs = aws.efs.FileSystem(name, encrypted=True, throughput_mode="elastic",
                             performance_mode="generalPurpose", tags=tags,
                             opts=_protected(child))
    mount = aws.efs.MountTarget(f"{name}-mount", file_system_id=efs.id, subnet_id=subnet_id,
                                security_groups=[sg.id], opts=child)
    if route_table is not None:  # another VPC cannot resolve EFS names: the target's address
        hosted[fs.name] = Hosted(pulumi.Output.from_input(vpc_id), route_table.id,
                                 _target(mount.ip_address, fmt="{}:/"))
    return _target(efs.dns_name, fmt="{}:/")


def gcp_filesystem(fs: FilesystemPlan, plan: FleetPlan, network_id: pulumi.Input[str],
                   network_name: pulumi.Input[str], child: pulumi.ResourceOptions
                   ) -> pulumi.Output[str | None]:
    name = f"fs-{fs.name}"
    labels = dict(fs.labels)
    if fs.service == "managed-lustre":
        assert fs.subnet is not None and fs.capacity_gib is not None
        net = IPv4Network(fs.subnet)
        # Managed Lustre's servers live in Google's network, peered through private services
        # access on a range of the fleet's own block
        rng = gcp.compute.GlobalAddress(
            f"{name}-range", purpose="VPC_PEERING", address_type="INTERNAL",
            address=str(net.network_address), prefix_length=net.prefixlen, network=network_id,
            description=f"gpufleet: Managed Lustre {fs.name} of fleet {plan.name}", opts=child)
        peering = gcp.servicenetworking.Connection(
            f"{name}-psa", network=network_id, service="servicenetworking.googleapis.com",
            reserved_peering_ranges=[rng.name], opts=child)
        lustre = gcp.lustre.Instance(
            name, instance_id=fs.name, location=fs.zone, filesystem=LUSTRE_FSNAME,
            capacity_gib=str(fs.capacity_gib), network=network_id,
            per_unit_storage_throughput=str(fs.throughput), labels=labels,
            opts=_protected(child, pulumi.ResourceOptions(depends_on=[peering])))
        return _target(lustre.mount_point, fmt="{}")
    assert fs.capacity_gib is not None
    filestore = gcp.filestore.Instance(
        name, name=fs.name, location=fs.zone, tier="ZONAL",
        file_shares=gcp.filestore.InstanceFileSharesArgs(
            name=SHARE, capacity_gb=fs.capacity_gib,
            nfs_export_options=[gcp.filestore.InstanceFileSharesNfsExportOptionArgs(
                ip_ranges=list(fs.admit), access_mode="READ_WRITE",
                squash_mode="NO_ROOT_SQUASH")]),
        networks=[gcp.filestore.InstanceNetworkArgs(
            network=network_name, modes=["MODE_IPV4"], connect_mode="DIRECT_PEERING")],
        deletion_protection_enabled=True, labels=labels, opts=_protected(child))
    return filestore.networks.apply(
        lambda nets: f"{nets[0].ip_addresses[0]}:/{SHARE}"
        if nets and nets[0].ip_addresses else None)


def storage_account_name(fleet: str, fs: FilesystemPlan) -> str:
    """A storage account name (3-24 lowercase letters and digits, unique in Azure): the
    filesystem's name and a digest of its (first) fleet's, so two fleets' names differ."""
    digest = hashlib.sha256(f"{fleet}/{fs.name}".encode()).hexdigest()[:6]
    return ("gf" + re.sub(r"[^a-z0-9]", "", fs.name))[:18] + digest


def azure_files_target(fleet: str, fs: FilesystemPlan) -> pulumi.Output[str | None]:
    account = storage_account_name(fleet, fs)
    return pulumi.Output.from_input(f"{account}.file.core.windows.net:/{account}/{SHARE}")


@dataclass(frozen=True)
class AzureHosted:
    """An Azure Managed Lustre other fleets mount: the VNet they peer with, and its target."""

    vnet_id: pulumi.Output[str]
    vnet_name: pulumi.Output[str]
    resource_group: pulumi.Output[str]
    target: pulumi.Output[str | None]


def shared_subnets_key(fs: FilesystemPlan) -> str:
    """Where the fleets sharing an Azure Files filesystem leave their node subnets for the
    first fleet's storage account (they are built before it)."""
    return f"{fs.name}:subnets"


def azure_peering(plan: FleetPlan, fs: FilesystemPlan, rg: pulumi.Input[str],
                  vnet_id: pulumi.Input[str], vnet_name: pulumi.Input[str],
                  hosted: dict[str, Any], child: pulumi.ResourceOptions) -> None:
    """This fleet's VNet and the one holding ``fs`` peered both ways (a peering is one-way
    in Azure): this fleet's nodes reach the Lustre servers, and they call the nodes back."""
    h: AzureHosted = hosted[fs.name]
    name = naming.child(plan.name, f"peer-{fs.host}")
    az_network.VirtualNetworkPeering(
        name, resource_group_name=rg, virtual_network_name=vnet_name,
        remote_virtual_network={"id": h.vnet_id}, allow_virtual_network_access=True,
        allow_forwarded_traffic=False, opts=child)
    az_network.VirtualNetworkPeering(
        naming.child(name, "back"), resource_group_name=h.resource_group,
        virtual_network_name=h.vnet_name, remote_virtual_network={"id": vnet_id},
        allow_virtual_network_access=True, allow_forwarded_traffic=False, opts=child)


def azure_filesystem(fs: FilesystemPlan, plan: FleetPlan, rg: pulumi.Output[str],
                     vnet: tuple[pulumi.Output[str], pulumi.Output[str]],
                     node_subnet_id: pulumi.Input[str], child: pulumi.ResourceOptions,
                     hosted: dict[str, Any]) -> pulumi.Output[str | None]:
    """``vnet``: the fleet's VNet (id, name)."""
    name = f"fs-{fs.name}"
    tags = dict(fs.labels)
    vnet_id, vnet_name = vnet
    if fs.service == "amlfs":
        assert fs.subnet is not None and fs.capacity_gib is not None
        subnet = az_network.Subnet(f"{name}-subnet", resource_group_name=rg,
                                   virtual_network_name=vnet_name, address_prefix=fs.subnet,
                                   opts=child)
        args: dict[str, Any] = {
            "aml_filesystem_name": fs.name, "resource_group_name": rg, "location": plan.region,
            "sku": {"name": f"AMLFS-Durable-Premium-{fs.throughput}"},
            "storage_capacity_ti_b": fs.capacity_gib / 1024, "filesystem_subnet": subnet.id,
            "maintenance_window": {"day_of_week": "Sunday", "time_of_day_utc": "02:00"},
            "tags": tags, **({"zones": [fs.zone]} if fs.zone else {})}
        lustre = storagecache.AmlFilesystem(name, **args, opts=_protected(child))
        target = lustre.client_info.apply(_amlfs_target)
        if fs.peers:
            hosted[fs.name] = AzureHosted(vnet_id, vnet_name, rg, target)
        return target
    account = storage_account_name(plan.name, fs)
    # the fleets sharing it were built first and left their node subnets
    subnets = [node_subnet_id, *hosted.get(shared_subnets_key(fs), [])]
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
    acct = storage.StorageAccount(name, **account_args, opts=_protected(child))
    storage.FileShare(f"{name}-share", account_name=acct.name, resource_group_name=rg,
                      share_name=SHARE, enabled_protocols="NFS", root_squash="NoRootSquash",
                      share_quota=fs.capacity_gib, opts=_protected(child))
    return azure_files_target(plan.name, fs)


def _amlfs_target(info: Any) -> str | None:
    address = getattr(info, "mgs_address", None) if info is not None else None
    return f"{address}@tcp:/{LUSTRE_FSNAME}" if address else None
