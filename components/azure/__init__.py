"""Azure ComponentResources: a FleetDesign -> resource group (shared per stack and region),
VNet, subnet, NSG, and either one InfiniBand VM scale set or plain VMs (``fleet``); gateways
(``gateway``); the network both sit in (``network``); helpers (``common``).

Makes no decisions: every number and name comes from the plan (gpufleet.backends.azure.compile).
"""

from __future__ import annotations

import pulumi

from gpufleet.compile import VolumeDesign

from ..sdk import by_class

# The pulumi_azure_native services the components use, loaded class by class
# (components/sdk.py), before the modules below bind them.
SDK = "pulumi_azure_native"
SERVICES = ("authorization", "compute", "dns", "network", "resources", "storage", "storagecache")
by_class(SDK, SERVICES)

from . import offline  # noqa: E402
from .buckets import emit_bucket, emit_r2_secrets  # noqa: E402
from .common import provider  # noqa: E402
from .fleet import Fleet, emit  # noqa: E402
from .gateway import Gateway, emit_gateway  # noqa: E402
from .network import Network  # noqa: E402
from .quota import emit_quota_request  # noqa: E402

__all__ = [
    "Fleet",
    "Gateway",
    "Network",
    "emit",
    "emit_bucket",
    "emit_gateway",
    "emit_quota_request",
    "emit_r2_secrets",
    "emit_volume",
    "offline",
    "provider",
]


def emit_volume(plan: VolumeDesign, opts: pulumi.ResourceOptions) -> pulumi.Output[str]:
    """dstack 0.22.5 has no Azure volumes; the traits declare none, so this never runs."""
    raise pulumi.RunError(f"volume '{plan.name}': no volumes on {plan.backend}")
