"""dstack volumes the stack creates: one encrypted zonal disk each, protected from deletion
(a volume holds data: `pulumi destroy` or removing the file must not take it). Each backend's
package makes the disk (``emit_volume``)."""

from __future__ import annotations

import pulumi

from gpufleet.backends import traits_of
from gpufleet.compile import VolumeDesign

from .registry import components_for


def emit_volume(plan: VolumeDesign, prov: pulumi.ProviderResource | None) -> pulumi.Output[str]:
    """The disk of a new volume; its id (what dstack's `volume_id` takes)."""
    if plan.size_gib is None or plan.zone is None:
        raise pulumi.RunError(f"volume '{plan.name}' has no size or zone to create")
    if not traits_of(plan.backend).volume_disk_type:
        raise pulumi.RunError(f"volume '{plan.name}': no volumes on {plan.backend}")
    opts = pulumi.ResourceOptions(provider=prov, protect=True)
    return components_for(plan.backend).emit_volume(plan, opts)
