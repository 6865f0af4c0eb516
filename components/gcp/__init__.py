"""GCP ComponentResources: fleets (``fleet``), gateways (``gateway``) and the networks both
sit in (``network``). Makes no decisions: every number and name comes from the plan. The
provider is passed in explicitly and inherited by every child through ``parent=self``."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pulumi
import pulumi_gcp as gcp

from gpufleet.compile import (
    FleetDesign,
    GatewayDesign,
    ProviderDesign,
    QuotaRequestDesign,
    VolumeDesign,
)

from ..sdk import by_class

# The pulumi_gcp services the components use, loaded class by class
# (components/sdk.py), before the modules below bind them.
SDK = "pulumi_gcp"
SERVICES = ("cloudquota", "compute", "dns", "filestore", "lustre", "organizations",
            "servicenetworking", "storage")
by_class(SDK, SERVICES)

from . import offline  # noqa: E402
from .buckets import emit_bucket, emit_r2_secrets  # noqa: E402
from .fleet import Fleet  # noqa: E402
from .gateway import Gateway  # noqa: E402
from .network import Network  # noqa: E402

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


def provider(p: ProviderDesign) -> pulumi.ProviderResource:
    return gcp.Provider(p.name, region=p.region, project=p.scope or None)


def emit(plan: FleetDesign, prov: pulumi.ProviderResource, shared: dict[str, Any]) -> Fleet:
    return Fleet(plan, pulumi.ResourceOptions(providers={"gcp": prov}), shared)


def emit_gateway(plan: GatewayDesign, prov: pulumi.ProviderResource,
                 fleets: Mapping[str, Any] | None = None) -> Gateway:
    """The gateway; a shared fleet's main network is taken from its component in ``fleets``."""
    joins = (fleets or {})[plan.fleet].networks["main"] if plan.fleet else None
    return Gateway(plan, pulumi.ResourceOptions(providers={"gcp": prov}), joins)


def emit_volume(plan: VolumeDesign, opts: pulumi.ResourceOptions) -> pulumi.Output[str]:
    """A persistent disk (encrypted at rest by Google); its name, dstack's gcp volume_id."""
    disk = gcp.compute.Disk(plan.name, zone=plan.zone, size=plan.size_gib,
                            type=plan.disk_type, labels=dict(plan.labels), opts=opts)
    return disk.name


def emit_quota_request(req: QuotaRequestDesign, prov: pulumi.ProviderResource | None
                       ) -> pulumi.CustomResource:
    """A QuotaPreference through Cloud Quotas (the quota id and its dimensions, the region
    among them for a regional quota), protected: `pulumi up` files it."""
    dims = dict(req.dimensions)
    if req.region != "global":
        dims["region"] = req.region
    return gcp.cloudquota.SQuotaPreference(
        req.name, parent=f"projects/{req.scope}", name=req.preference,
        service="compute.googleapis.com", quota_id=req.ident, dimensions=dims or None,
        quota_config={"preferred_value": str(req.value)}, contact_email=req.contact_email,
        justification=f"gpufleet: fleets {', '.join(req.fleets)} need {req.need} {req.unit}",
        opts=pulumi.ResourceOptions(provider=prov, protect=True))
