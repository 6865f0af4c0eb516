"""GCP gateways: a GatewayDesign -> the network dstack's gateway lands in (a VPC of its own, or
the shared fleet's, with the proxy-only subnet a load balancer needs), the `*.<domain>`
record in Cloud DNS and, in a migration, the static addresses gpufleet's own gateway VMs
had. dstack creates the instances, their firewall rules and the load balancer itself."""

from __future__ import annotations

from typing import Any

import pulumi
import pulumi_gcp as gcp

from gpufleet.compile import (
    DIGEST_OUTPUT,
    DnsRecordDesign,
    GatewayDesign,
    GatewayOptions,
    input_digest,
    naming,
    options_of,
)

from .network import Network


class Gateway(pulumi.ComponentResource):
    """Where dstack's gateway lands and the record that follows its address."""

    def __init__(self, plan: GatewayDesign, opts: pulumi.ResourceOptions,
                 joins: Network | None = None) -> None:
        super().__init__("gpufleet:gcp:Gateway", plan.name, None, opts)
        child = pulumi.ResourceOptions(parent=self)
        # its own VPC, or the shared fleet's (a load balancer's proxy-only subnet added)
        self.network = Network(plan.network, plan, child, joins=joins)
        self.network_id = self.network.network_id
        self.network_name = self.network.network_name
        self.subnet_ids = dict(self.network.subnet_links)
        keep = pulumi.ResourceOptions(parent=self, protect=plan.protect_address)
        # gpufleet's own gateway VMs' addresses, as they were made: kept, never re-created
        self.old_addresses = [gcp.compute.Address(
            name, region=plan.region, address_type="EXTERNAL", network_tier="PREMIUM",
            labels=dict(plan.labels), opts=keep).address for name in plan.old_addresses]
        if plan.record is not None:
            self._record(plan, plan.record, pulumi.InvokeOptions(parent=self))
        self.register_outputs({"network": self.network_id, "subnets": self.subnet_ids,
                               "record": plan.record.fqdn if plan.record else None,
                               DIGEST_OUTPUT: input_digest(plan)})

    def _record(self, plan: GatewayDesign, rec: DnsRecordDesign,
                invoke: pulumi.InvokeOptions) -> None:
        """The zone (created, protected, or looked up) and, once dstack's gateway is synced,
        the record: A to its addresses, or CNAME to a host name."""
        opts = pulumi.ResourceOptions(parent=self, delete_before_replace=True)
        project = options_of(plan, GatewayOptions).project
        if rec.create_zone:
            zone = gcp.dns.ManagedZone(
                naming.child(plan.name, "zone"), dns_name=rec.zone + ".",
                visibility="private" if rec.private else "public",
                private_visibility_config=gcp.dns.ManagedZonePrivateVisibilityConfigArgs(
                    networks=[gcp.dns.ManagedZonePrivateVisibilityConfigNetworkArgs(
                        network_url=self.network_id)]) if rec.private else None,
                labels=dict(plan.labels),
                opts=pulumi.ResourceOptions(parent=self, protect=True))
            zone_name: pulumi.Output[str] = zone.name
            opts = pulumi.ResourceOptions.merge(opts,
                                                pulumi.ResourceOptions(deleted_with=zone))
        elif rec.pending:
            return
        else:
            managed = gcp.dns.get_managed_zones_output(project=project, opts=invoke)
            zone_name = managed.managed_zones.apply(
                lambda zs: _zone_named(zs, rec.zone, rec.private,
                                       rec.fqdn if rec.zone_walk else None))
        if rec.pending:
            return
        rrdatas = list(rec.targets) if rec.record_type == "A" else \
            [t.rstrip(".") + "." for t in rec.targets]
        gcp.dns.RecordSet(rec.name, managed_zone=zone_name, name=rec.fqdn,
                          type=rec.record_type, ttl=rec.ttl, rrdatas=rrdatas, opts=opts)


def _zone_named(zones: Any, dns_name: str, private: bool, walk_from: str | None = None) -> str:
    """The zone named ``dns_name``; with ``walk_from`` (a record name and no `dns_zone`), the
    closest zone that contains it, walking up the domain's parents."""
    visibility = "private" if private else "public"
    candidates = [z for z in zones or [] if (z.visibility or "public") == visibility]
    if walk_from is not None:
        record = walk_from.rstrip(".").lower() + "."
        inside = [z for z in candidates if record.endswith("." + str(z.dns_name).lower())]
        if inside:
            return str(max(inside, key=lambda z: (len(z.dns_name), z.name)).name)
        raise ValueError(f"no {visibility} Cloud DNS zone contains {record}: create one or set "
                         "dns_zone")
    want = dns_name.rstrip(".") + "."
    for z in sorted(candidates, key=lambda z: z.name):
        if z.dns_name == want:
            return str(z.name)
    raise ValueError(f"no {visibility} Cloud DNS zone for {want}: create it or set dns_zone")
