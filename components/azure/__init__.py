"""Azure ComponentResources: a FleetPlan -> resource group (shared per stack and region),
VNet, subnet, NSG, and either one InfiniBand VM scale set or plain VMs (``fleet``); gateways
(``gateway``); the network both sit in (``network``); helpers (``common``).

Makes no decisions: every number and name comes from the plan (gpufleet.backends.azure.compile).
"""

from __future__ import annotations

import pulumi

from gpufleet.compile import VolumePlan

from .common import provider
from .fleet import Fleet, emit
from .gateway import Gateway, emit_gateway
from .network import Network

__all__ = ["Fleet", "Gateway", "Network", "emit", "emit_gateway", "emit_volume", "provider"]


def emit_volume(plan: VolumePlan, opts: pulumi.ResourceOptions) -> pulumi.Output[str]:
    """dstack 0.22.5 has no Azure volumes; the traits declare none, so this never runs."""
    raise pulumi.RunError(f"volume '{plan.name}': no volumes on {plan.backend}")
