"""Shared filesystems (each cloud's in ``components/<cloud>/filesystems.py``), built inside
the fleet component that mounts them (its network, before
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

from typing import Any

import pulumi

SHARE = "share"  # the NFS export / file share's name
LUSTRE_FSNAME = "lustrefs"  # Managed Lustre's and AMLFS's file system name


def protected(child: pulumi.ResourceOptions, *more: pulumi.ResourceOptions
               ) -> pulumi.ResourceOptions:
    opts = pulumi.ResourceOptions.merge(child, pulumi.ResourceOptions(protect=True))
    for extra in more:
        opts = pulumi.ResourceOptions.merge(opts, extra)
    return opts


def mount_target(*parts: Any, fmt: str) -> pulumi.Output[str | None]:
    """A mount target from outputs, None while any part is unknown."""
    return pulumi.Output.all(*parts).apply(
        lambda v: fmt.format(*v) if all(x not in (None, "") for x in v) else None)
