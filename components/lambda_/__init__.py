"""Lambda Cloud components: a fleet is its SSH key, firewall ruleset, filesystems and
instances (``fleet``), made through the dynamic providers of ``provider`` over Lambda's API.
No Pulumi provider resource: a dynamic provider is the program's own code."""

from __future__ import annotations

from typing import Any

import pulumi

from gpufleet.compile import FleetDesign, GatewayDesign, ProviderDesign, VolumeDesign

from . import offline
from .fleet import Fleet

__all__ = ["Fleet", "emit", "emit_gateway", "emit_volume", "offline", "provider"]


def provider(p: ProviderDesign) -> pulumi.ProviderResource | None:
    return None


def emit(plan: FleetDesign, prov: pulumi.ProviderResource | None,
         shared: dict[str, Any]) -> Fleet:
    return Fleet(plan, None, shared)


def emit_gateway(plan: GatewayDesign, prov: pulumi.ProviderResource | None,
                 fleets: Any = None) -> Any:
    """dstack runs no gateway on lambda: validate refuses one, so this never runs."""
    raise pulumi.RunError(f"gateway '{plan.name}': no gateways on {plan.backend}")


def emit_volume(plan: VolumeDesign, opts: pulumi.ResourceOptions) -> pulumi.Output[str]:
    """dstack 0.22.5 has no Lambda volumes; the traits declare none, so this never runs."""
    raise pulumi.RunError(f"volume '{plan.name}': no volumes on {plan.backend}")
