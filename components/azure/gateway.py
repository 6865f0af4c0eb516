"""Azure gateways: a GatewayDesign -> the network dstack's gateway VM lands in (a VNet of its
own, or the shared fleet's subnet), the `*.<domain>` record in Azure DNS and, in a
migration, the static public IPs gpufleet's own gateway VMs had. dstack creates the VM, its
public IP and its network security group itself at `dstack apply`."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pulumi
from pulumi_azure_native import dns, network

from gpufleet.compile import (
    DIGEST_OUTPUT,
    DnsRecordDesign,
    GatewayDesign,
    GatewayOptions,
    input_digest,
    naming,
    options_of,
)

from .common import resource_group
from .network import Network


class Gateway(pulumi.ComponentResource):
    """Where dstack's gateway lands and the record that follows its address."""

    def __init__(self, plan: GatewayDesign, rg: pulumi.Output[str],
                 opts: pulumi.ResourceOptions, host: Network | None = None) -> None:
        super().__init__("gpufleet:azure:Gateway", plan.name, None, opts)
        self.resource_group = rg
        self.network = host if host is not None else \
            Network(plan.network, plan, rg, pulumi.ResourceOptions(parent=self))
        self.network_id: pulumi.Output[str] = self.network.vnet_id
        self.network_name: pulumi.Input[str] = self.network.vnet_name
        self.subnet_ids: dict[str, pulumi.Output[str]] = {
            s.name: self.network.subnet_id for s in plan.network.subnets}
        keep = pulumi.ResourceOptions(parent=self, protect=plan.protect_address)
        # gpufleet's own gateway VMs' addresses, as they were made: kept, never re-created
        self.old_addresses = [network.PublicIPAddress(
            name, resource_group_name=rg, location=plan.region, sku={"name": "Standard"},
            public_ip_allocation_method="Static", tags=dict(plan.labels),
            opts=keep).ip_address for name in plan.old_addresses]
        if plan.record is not None:
            self._record(plan, plan.record)
        self.register_outputs({"vnet": self.network.vnet_id, "subnet": self.network.subnet_id,
                               "record": plan.record.fqdn if plan.record else None,
                               DIGEST_OUTPUT: input_digest(plan)})

    def _record(self, plan: GatewayDesign, rec: DnsRecordDesign) -> None:
        """The zone (created and protected, or the one in `dns_resource_group`) and, once
        dstack's gateway is synced, the record: A to its address(es), or CNAME."""
        relative = rec.fqdn.rstrip(".")[: -len(rec.zone) - 1]
        opts = pulumi.ResourceOptions(parent=self, delete_before_replace=True)
        zone_rg = options_of(plan, GatewayOptions).dns_resource_group
        if rec.create_zone:
            zone = dns.Zone(naming.child(plan.name, "zone"), zone_name=rec.zone,
                            resource_group_name=zone_rg, location="global",
                            tags=dict(plan.labels),
                            opts=pulumi.ResourceOptions(parent=self, protect=True))
            opts = pulumi.ResourceOptions.merge(opts, pulumi.ResourceOptions(deleted_with=zone))
        if rec.pending:
            return
        if rec.record_type == "A":
            dns.RecordSet(rec.name, resource_group_name=zone_rg, zone_name=rec.zone,
                          relative_record_set_name=relative, record_type="A", ttl=rec.ttl,
                          a_records=[{"ipv4_address": a} for a in rec.targets], opts=opts)
            return
        dns.RecordSet(rec.name, resource_group_name=zone_rg, zone_name=rec.zone,
                      relative_record_set_name=relative, record_type="CNAME", ttl=rec.ttl,
                      cname_record={"cname": rec.targets[0]}, opts=opts)


def emit_gateway(plan: GatewayDesign, prov: pulumi.ProviderResource,
                 fleets: Mapping[str, Any] | None = None) -> Gateway:
    """The gateway; a shared fleet's network is taken from its component in ``fleets``."""
    rg = resource_group(plan, prov)
    host = (fleets or {})[plan.fleet].network if plan.fleet else None
    return Gateway(plan, rg, pulumi.ResourceOptions(providers={"azure-native": prov}), host)
