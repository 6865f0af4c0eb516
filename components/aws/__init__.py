"""AWS ComponentResources: fleets (``fleet``), gateways (``gateway``) and the network both
sit in (``network``). Makes no decisions: every number and name comes from the plan."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pulumi
import pulumi_aws as aws

from gpufleet.compile import (
    FleetDesign,
    GatewayDesign,
    ProviderDesign,
    QuotaRequestDesign,
    VolumeDesign,
)

from ..sdk import by_class

# The pulumi_aws services the components use, loaded class by class
# (components/sdk.py), before the modules below bind them.
SDK = "pulumi_aws"
SERVICES = ("ebs", "ec2", "efs", "fsx", "iam", "lb", "route53", "s3", "servicequotas")
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
    return aws.Provider(p.name, region=p.region)


def emit(plan: FleetDesign, prov: pulumi.ProviderResource, shared: dict[str, Any]) -> Fleet:
    return Fleet(plan, pulumi.ResourceOptions(providers={"aws": prov}), shared)


def emit_gateway(plan: GatewayDesign, prov: pulumi.ProviderResource,
                 fleets: Mapping[str, Any] | None = None) -> Gateway:
    """The gateway; a shared fleet's network is taken from its component in ``fleets``."""
    joins = (fleets or {})[plan.fleet].network if plan.fleet else None
    return Gateway(plan, pulumi.ResourceOptions(providers={"aws": prov}), joins)


def emit_volume(plan: VolumeDesign, opts: pulumi.ResourceOptions) -> pulumi.Output[str]:
    """An encrypted EBS volume; its id."""
    vol = aws.ebs.Volume(plan.name, availability_zone=plan.zone, size=plan.size_gib,
                         type=plan.disk_type, encrypted=True,
                         tags={**dict(plan.labels), "Name": plan.name}, opts=opts)
    return vol.id


def emit_quota_request(req: QuotaRequestDesign, prov: pulumi.ProviderResource | None
                       ) -> pulumi.CustomResource:
    """An increase request through Service Quotas (`ec2` vCPU quotas; `vpc:`/`ec2:` network
    ones), protected: `pulumi up` files it, a destroy never withdraws it."""
    service, _, code = req.ident.rpartition(":")
    return aws.servicequotas.ServiceQuota(
        req.name, service_code=service or "ec2", quota_code=code, value=float(req.value),
        region=req.region, opts=pulumi.ResourceOptions(provider=prov, protect=True))
