"""GCP gateways: a GatewayPlan -> network, one protected static address per replica (or the
load balancer's), the VMs, the regional Application Load Balancer (`load_balancer: {type:
alb}`, TLS from a Certificate Manager certificate) and the `*.<domain>` record."""

from __future__ import annotations

import functools
from typing import Any

import pulumi
import pulumi_gcp as gcp

from gpufleet.backends.gcp import GATEWAY
from gpufleet.compile import DIGEST_OUTPUT, DnsRecordPlan, GatewayPlan, input_digest, naming

from .network import Network, owner_options


class Gateway(pulumi.ComponentResource):
    """A gateway: network, one protected static address per replica (or one for the load
    balancer in front of them), the VMs, the load balancer, and the `*.<domain>` record in
    the Cloud DNS zone that holds the domain."""

    def __init__(self, plan: GatewayPlan, opts: pulumi.ResourceOptions) -> None:
        super().__init__("gpufleet:gcp:Gateway", plan.name, None, opts)
        child = pulumi.ResourceOptions(parent=self)
        keep = pulumi.ResourceOptions(parent=self, protect=plan.protect_address)
        invoke = pulumi.InvokeOptions(parent=self)
        self.network = Network(plan.network, plan, child)
        subnet = self.network.subnet_links[plan.network.subnets[0].name]
        zones = gcp.compute.get_zones_output(region=plan.region,
                                             project=owner_options(plan).project, status="UP",
                                             opts=invoke)
        self.addresses: list[pulumi.Output[str]] = []
        self.instances: list[gcp.compute.Instance] = []
        for i, vm in enumerate(plan.instance_names):
            if plan.load_balancer:  # behind the load balancer: no address, egress by NAT
                nic = gcp.compute.InstanceNetworkInterfaceArgs(
                    network=self.network.network_id, subnetwork=subnet)
            elif plan.public:
                address = gcp.compute.Address(plan.address_names[i], region=plan.region,
                                              address_type="EXTERNAL", network_tier="PREMIUM",
                                              labels=dict(plan.labels), opts=keep)
                nic = gcp.compute.InstanceNetworkInterfaceArgs(
                    network=self.network.network_id, subnetwork=subnet,
                    access_configs=[gcp.compute.InstanceNetworkInterfaceAccessConfigArgs(
                        nat_ip=address.address)])
                self.addresses.append(address.address)
            else:
                address = gcp.compute.Address(plan.address_names[i], region=plan.region,
                                              address_type="INTERNAL", subnetwork=subnet,
                                              labels=dict(plan.labels), opts=keep)
                nic = gcp.compute.InstanceNetworkInterfaceArgs(
                    network=self.network.network_id, subnetwork=subnet,
                    network_ip=address.address)
                self.addresses.append(address.address)
            self.instances.append(gcp.compute.Instance(
                vm, machine_type=plan.instance_type,
                zone=zones.names.apply(functools.partial(_nth_zone, i=i)),
                boot_disk=gcp.compute.InstanceBootDiskArgs(
                    initialize_params=gcp.compute.InstanceBootDiskInitializeParamsArgs(
                        image=plan.image, size=GATEWAY.disk_gib,
                        type=GATEWAY.disk_type)),
                network_interfaces=[nic], tags=[owner_options(plan).network_tag],
                labels=dict(plan.labels), metadata={"enable-oslogin": "TRUE"},
                shielded_instance_config=gcp.compute.InstanceShieldedInstanceConfigArgs(
                    enable_secure_boot=True),
                allow_stopping_for_update=True, opts=child))
        if plan.load_balancer:
            self.addresses.append(self._load_balancer(plan, plan.load_balancer, subnet, keep))
        if plan.record is not None:
            self._record(plan, plan.record, invoke)
        self.register_outputs({"addresses": self.addresses,
                               "record": plan.record.fqdn if plan.record else None,
                               DIGEST_OUTPUT: input_digest(plan)})

    def _record(self, plan: GatewayPlan, rec: DnsRecordPlan,
                invoke: pulumi.InvokeOptions) -> None:
        """The `*.<domain>` record, in the zone it creates or the one that holds the domain."""
        opts = pulumi.ResourceOptions(parent=self, delete_before_replace=True)
        if rec.create_zone:
            zone = gcp.dns.ManagedZone(
                naming.child(plan.name, "zone"), dns_name=rec.zone + ".",
                visibility="private" if rec.private else "public",
                private_visibility_config=gcp.dns.ManagedZonePrivateVisibilityConfigArgs(
                    networks=[gcp.dns.ManagedZonePrivateVisibilityConfigNetworkArgs(
                        network_url=self.network.network_id)]) if rec.private else None,
                labels=dict(plan.labels),
                opts=pulumi.ResourceOptions(parent=self, protect=True))
            zone_name: pulumi.Output[str] = zone.name
            opts = pulumi.ResourceOptions.merge(opts,
                                                pulumi.ResourceOptions(deleted_with=zone))
        else:
            managed = gcp.dns.get_managed_zones_output(
                project=owner_options(plan).project, opts=invoke)
            zone_name = managed.managed_zones.apply(
                lambda zs: _zone_named(zs, rec.zone, rec.private,
                                       rec.fqdn if rec.zone_walk else None))
        gcp.dns.RecordSet(rec.name, managed_zone=zone_name, name=rec.fqdn,
                          type=rec.record_type, ttl=rec.ttl, rrdatas=self.addresses,
                          opts=opts)

    def _load_balancer(self, plan: GatewayPlan, name: str, subnet: pulumi.Output[str],
                       keep: pulumi.ResourceOptions) -> pulumi.Output[str]:
        """A regional external (or, for a private gateway, internal) Application Load
        Balancer, as dstack builds it: one unmanaged instance group per instance (named
        port http:80), an HTTP health check, a backend service, a URL map, an HTTPS proxy
        with the Certificate Manager certificate (or an HTTP proxy without one) and a
        forwarding rule on the gateway's protected static address."""
        child = pulumi.ResourceOptions(parent=self)
        scheme = "EXTERNAL_MANAGED" if plan.public else "INTERNAL_MANAGED"
        address = gcp.compute.Address(
            plan.address_names[0], region=plan.region,
            address_type="EXTERNAL" if plan.public else "INTERNAL",
            network_tier="PREMIUM" if plan.public else None,
            subnetwork=None if plan.public else subnet, labels=dict(plan.labels), opts=keep)
        groups = [gcp.compute.InstanceGroup(
            naming.child(vm_name, "ig"), zone=vm.zone, instances=[vm.self_link],
            network=self.network.network_id,
            named_ports=[gcp.compute.InstanceGroupNamedPortArgs(name="http", port=80)],
            opts=child) for vm_name, vm in zip(plan.instance_names, self.instances, strict=True)]
        check = gcp.compute.RegionHealthCheck(
            naming.child(name, "hc"), region=plan.region,
            http_health_check=gcp.compute.RegionHealthCheckHttpHealthCheckArgs(port=80),
            opts=child)
        service = gcp.compute.RegionBackendService(
            naming.child(name, "bs"), region=plan.region, load_balancing_scheme=scheme,
            protocol="HTTP", port_name="http", health_checks=check.id,
            backends=[gcp.compute.RegionBackendServiceBackendArgs(
                group=g.self_link, balancing_mode="UTILIZATION", capacity_scaler=1.0)
                for g in groups], opts=child)
        url_map = gcp.compute.RegionUrlMap(naming.child(name, "um"), region=plan.region,
                                           default_service=service.id, opts=child)
        proxy: gcp.compute.RegionTargetHttpsProxy | gcp.compute.RegionTargetHttpProxy
        if plan.certificate_name:
            proxy = gcp.compute.RegionTargetHttpsProxy(
                naming.child(name, "https"), region=plan.region, url_map=url_map.id,
                certificate_manager_certificates=[plan.certificate_name], opts=child)
        else:
            proxy = gcp.compute.RegionTargetHttpProxy(
                naming.child(name, "http"), region=plan.region, url_map=url_map.id, opts=child)
        # The proxy-only subnet must exist before the forwarding rule: depend on the network.
        gcp.compute.ForwardingRule(
            naming.child(name, "fr"), region=plan.region, ip_address=address.address,
            ip_protocol="TCP", port_range="443" if plan.certificate_name else "80",
            target=proxy.id, load_balancing_scheme=scheme, network=self.network.network_id,
            subnetwork=None if plan.public else subnet,
            network_tier="PREMIUM" if plan.public else None, labels=dict(plan.labels),
            opts=pulumi.ResourceOptions(parent=self, depends_on=[self.network]))
        return address.address


def _nth_zone(names: list[str], i: int) -> str:
    return sorted(names)[i % len(names)]


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
