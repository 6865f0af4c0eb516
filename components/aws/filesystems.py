"""aws filesystems: FSx for Lustre PERSISTENT_2 SSD or EFS, behind a security group of its own; one
mounted by several fleets sits in a subnet of its own, reached through their peering."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import pulumi
import pulumi_aws as aws

from gpufleet.compile import FilesystemDesign, FleetDesign

from ..filesystems import mount_target, protected


@dataclass(frozen=True)
class Hosted:
    """A filesystem other fleets mount, as its fleet built it: what they peer with, the
    route table they add their way back to, and the target they mount by address."""

    vpc_id: pulumi.Output[str]
    route_table_id: pulumi.Output[str]
    target: pulumi.Output[str | None]


def aws_filesystem(fs: FilesystemDesign, plan: FleetDesign, vpc_id: pulumi.Input[str],
                   subnet_id: pulumi.Input[str], zone: pulumi.Input[str],
                   child: pulumi.ResourceOptions, shared: dict[str, Any]
                   ) -> pulumi.Output[str | None]:
    name = f"fs-{fs.name}"
    route_table: aws.ec2.RouteTable | None = None
    if fs.peers:  # shared: a subnet of its own, with a route table the mounting fleets fill
        subnet_id, route_table = _own_subnet(fs, name, vpc_id, zone, child)
    tags = {**dict(fs.labels), "Name": name}
    sg = _security_group(fs, plan, name, vpc_id, tags, child)
    if fs.service == "fsx-lustre":
        lustre = aws.fsx.LustreFileSystem(
            name, storage_capacity=fs.capacity_gib, subnet_ids=subnet_id,
            deployment_type="PERSISTENT_2", storage_type="SSD",
            per_unit_storage_throughput=fs.throughput, security_group_ids=[sg.id],
            data_compression_type="LZ4", file_system_type_version="2.15", tags=tags,
            opts=protected(child))
        if route_table is not None:
            invoke = pulumi.InvokeOptions(parent=child.parent)

            def primary_ip(ids: Sequence[str]) -> str | None:
                # "the first network interface describe-file-systems returns" (FSx for
                # Lustre guide: mounting from a peered VPC)
                if not ids:
                    return None
                return aws.ec2.get_network_interface(id=ids[0], opts=invoke).private_ip
            shared[fs.name] = Hosted(pulumi.Output.from_input(vpc_id), route_table.id,
                                     mount_target(lustre.network_interface_ids.apply(primary_ip),
                                             lustre.mount_name, fmt="{}@tcp:/{}"))
        return mount_target(lustre.dns_name, lustre.mount_name, fmt="{}@tcp:/{}")
    efs = aws.efs.FileSystem(name, encrypted=True, throughput_mode="elastic",
                             performance_mode="generalPurpose", tags=tags,
                             opts=protected(child))
    mount = aws.efs.MountTarget(f"{name}-mount", file_system_id=efs.id, subnet_id=subnet_id,
                                security_groups=[sg.id], opts=child)
    if route_table is not None:  # another VPC cannot resolve EFS names: the target's address
        shared[fs.name] = Hosted(pulumi.Output.from_input(vpc_id), route_table.id,
                                 mount_target(mount.ip_address, fmt="{}:/"))
    return mount_target(efs.dns_name, fmt="{}:/")


def _own_subnet(fs: FilesystemDesign, name: str, vpc_id: pulumi.Input[str],
                zone: pulumi.Input[str], child: pulumi.ResourceOptions
                ) -> tuple[pulumi.Output[str], aws.ec2.RouteTable]:
    """A shared filesystem's subnet and its route table (no inline routes: each mounting
    fleet adds its own way back as a Route)."""
    assert fs.subnet is not None
    subnet = aws.ec2.Subnet(
        f"{name}-subnet", vpc_id=vpc_id, cidr_block=fs.subnet, availability_zone=zone,
        map_public_ip_on_launch=False, tags={**dict(fs.labels), "Name": f"{name}-subnet"},
        opts=pulumi.ResourceOptions.merge(child, pulumi.ResourceOptions(
            replace_on_changes=["cidr_block", "availability_zone"])))
    route_table = aws.ec2.RouteTable(f"{name}-rt", vpc_id=vpc_id,
                                     tags={**dict(fs.labels), "Name": f"{name}-rt"},
                                     opts=child)
    aws.ec2.RouteTableAssociation(f"{name}-rt-assoc", subnet_id=subnet.id,
                                  route_table_id=route_table.id, opts=child)
    return subnet.id, route_table


def _security_group(fs: FilesystemDesign, plan: FleetDesign, name: str, vpc_id: pulumi.Input[str],
                    tags: dict[str, str], child: pulumi.ResourceOptions
                    ) -> aws.ec2.SecurityGroup:
    """The filesystem's ports from and to the mounting fleets' node subnets only."""
    ranges = [(988, 988), (1018, 1023)] if fs.kind == "lustre" else [(2049, 2049)]
    whose = f"fleet {plan.name}'s nodes" if not fs.peers else \
        f"the nodes of fleets {', '.join((plan.name, *fs.peers))}"
    ingress = [aws.ec2.SecurityGroupIngressArgs(
        protocol="tcp", from_port=lo, to_port=hi, cidr_blocks=list(fs.admit),
        description=f"{fs.kind} from {whose}") for lo, hi in ranges]
    if fs.kind == "lustre":  # FSx's servers talk to each other through the same group
        ingress += [aws.ec2.SecurityGroupIngressArgs(
            protocol="tcp", from_port=lo, to_port=hi, self=True,
            description="lustre between the file servers") for lo, hi in ranges]
    return aws.ec2.SecurityGroup(
        name, vpc_id=vpc_id, description=f"gpufleet filesystem {fs.name} of fleet {plan.name}",
        ingress=ingress,
        egress=[aws.ec2.SecurityGroupEgressArgs(
            protocol="tcp", from_port=lo, to_port=hi, cidr_blocks=list(fs.admit),
            description=f"{fs.kind} to {whose}") for lo, hi in ranges],
        tags=tags, opts=child)
