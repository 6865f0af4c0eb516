"""dstack volumes the stack creates: one encrypted zonal disk each, protected from deletion
(a volume holds data: `pulumi destroy` or removing the file must not take it)."""

from __future__ import annotations

import pulumi
import pulumi_aws as aws
import pulumi_gcp as gcp

from gpufleet.compile import VolumePlan


def emit_volume(plan: VolumePlan, prov: pulumi.ProviderResource) -> pulumi.Output[str]:
    """The disk of a new volume; its id (what dstack's `volume_id` takes)."""
    if plan.size_gib is None or plan.zone is None:
        raise pulumi.RunError(f"volume '{plan.name}' has no size or zone to create")
    opts = pulumi.ResourceOptions(provider=prov, protect=True)
    if plan.backend == "aws":
        vol = aws.ebs.Volume(plan.name, availability_zone=plan.zone, size=plan.size_gib,
                             type=plan.disk_type, encrypted=True,
                             tags={**dict(plan.labels), "Name": plan.name}, opts=opts)
        return vol.id
    if plan.backend == "gcp":
        disk = gcp.compute.Disk(plan.name, zone=plan.zone, size=plan.size_gib,
                                type=plan.disk_type, labels=dict(plan.labels),
                                opts=opts)
        return disk.name  # dstack's gcp volume_id is the disk's name
    raise pulumi.RunError(f"volume '{plan.name}': no volumes on {plan.backend}")
