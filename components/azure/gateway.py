"""An Azure gateway (gpufleet.backends.azure.compile)."""

from __future__ import annotations

import pulumi
from pulumi_azure_native import dns, network

from gpufleet.backends.azure import GATEWAY
from gpufleet.compile import (
    DIGEST_OUTPUT,
    GatewayOptions,
    GatewayPlan,
    input_digest,
    naming,
    options_of,
)

from .common import resource_group, storage, vm_with_nic
from .network import Network


class Gateway(pulumi.ComponentResource):
    """A gateway: network, one protected Standard static public IP per replica, the VMs
    (always Standard_B1ms), and the `*.<domain>` record in Azure DNS."""

    def __init__(self, plan: GatewayPlan, rg: pulumi.Output[str],
                 opts: pulumi.ResourceOptions) -> None:
        super().__init__("gpufleet:azure:Gateway", plan.name, None, opts)
        keep = pulumi.ResourceOptions(parent=self, protect=plan.protect_address)
        self.network = Network(plan.network, plan, rg, pulumi.ResourceOptions(parent=self))
        self.addresses: list[pulumi.Output[str]] = []
        for addr, vm in zip(plan.address_names, plan.instance_names, strict=True):
            pip = network.PublicIPAddress(
                addr, resource_group_name=rg, location=plan.region, sku={"name": "Standard"},
                public_ip_allocation_method="Static", tags=dict(plan.labels), opts=keep)
            vm_with_nic(self, plan, vm, self.network.subnet_id, self.network.nsg.id, rg,
                        plan.instance_type,
                        storage(plan.image, GATEWAY.disk_gib, GATEWAY.disk_type), pip.id,
                        False, {})
            self.addresses.append(pip.ip_address.apply(lambda a: a or ""))
        if plan.record is not None:
            rec = plan.record
            relative = rec.fqdn.rstrip(".")[: -len(rec.zone) - 1]
            opts = pulumi.ResourceOptions(parent=self, delete_before_replace=True)
            zone_rg = options_of(plan, GatewayOptions).dns_resource_group
            if rec.create_zone:
                zone = dns.Zone(naming.child(plan.name, "zone"), zone_name=rec.zone,
                                resource_group_name=zone_rg, location="global",
                                tags=dict(plan.labels),
                                opts=pulumi.ResourceOptions(parent=self, protect=True))
                opts = pulumi.ResourceOptions.merge(opts,
                                                    pulumi.ResourceOptions(deleted_with=zone))
            dns.RecordSet(rec.name, resource_group_name=zone_rg, zone_name=rec.zone,
                          relative_record_set_name=relative, record_type=rec.record_type,
                          ttl=rec.ttl, a_records=[{"ipv4_address": a} for a in self.addresses],
                          opts=opts)
        self.register_outputs({"addresses": self.addresses,
                               "record": plan.record.fqdn if plan.record else None,
                               DIGEST_OUTPUT: input_digest(plan)})


def emit_gateway(plan: GatewayPlan, prov: pulumi.ProviderResource) -> Gateway:
    rg = resource_group(plan, prov)
    return Gateway(plan, rg, pulumi.ResourceOptions(providers={"azure-native": prov}))
