"""gcp filesystems: Managed Lustre on a private services access range of the fleet's block, or
Filestore zonal exporting to the node subnets only."""

from __future__ import annotations

from ipaddress import IPv4Network

import pulumi
import pulumi_gcp as gcp

from gpufleet.compile import FilesystemDesign, FleetDesign

from ..filesystems import LUSTRE_FSNAME, SHARE, mount_target, protected


def gcp_filesystem(fs: FilesystemDesign, plan: FleetDesign, network_id: pulumi.Input[str],
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
            opts=protected(child, pulumi.ResourceOptions(depends_on=[peering])))
        return mount_target(lustre.mount_point, fmt="{}")
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
        deletion_protection_enabled=True, labels=labels, opts=protected(child))
    return filestore.networks.apply(
        lambda nets: f"{nets[0].ip_addresses[0]}:/{SHARE}"
        if nets and nets[0].ip_addresses else None)
