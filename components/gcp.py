"""GCP ComponentResources: a FleetPlan -> VPCs, subnets, firewalls, NAT, placement, VMs.

Makes no decisions: every number and name comes from the plan (gpufleet.compile.backends.gcp).
The provider is passed in explicitly and inherited by every child through ``parent=self``.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import Any

import pulumi
import pulumi_gcp as gcp

from gpufleet.compile import (
    DIGEST_OUTPUT,
    FirewallRule,
    FleetPlan,
    GatewayOptions,
    GatewayPlan,
    GcpOptions,
    NetworkPlan,
    ProviderPlan,
    input_digest,
    naming,
    options_of,
)

from .access import public_key
from .renames import rename_options

Owner = FleetPlan | GatewayPlan

ALL_PROTOCOLS = ("tcp", "udp", "icmp")


def provider(p: ProviderPlan) -> pulumi.ProviderResource:
    return gcp.Provider(p.name, region=p.region, project=p.scope or None)


class Network(pulumi.ComponentResource):
    """One VPC of a fleet (main, extra gVNIC or RoCE) with its subnets and firewall rules."""

    network_id: pulumi.Output[str]
    subnet_links: dict[str, pulumi.Output[str]]

    def __init__(self, net: NetworkPlan, plan: Owner,
                 opts: pulumi.ResourceOptions | None = None) -> None:
        token = "gpufleet:gcp:RoceNetwork" if net.role == "roce" else "gpufleet:gcp:Network"
        super().__init__(token, net.name, None, opts)
        project = _opts(plan).project
        child = pulumi.ResourceOptions(parent=self)
        invoke = pulumi.InvokeOptions(parent=self)
        profile: pulumi.Input[str] | None = None
        if net.profile:
            project_id = pulumi.Output.from_input(project) if project else \
                gcp.organizations.get_client_config_output(opts=invoke).project
            profile = project_id.apply(
                lambda p: f"projects/{p}/global/networkProfiles/{net.profile}")
        self.network_name: pulumi.Input[str] = net.existing or ""
        if net.existing:
            found = gcp.compute.get_network_output(name=net.existing, project=project,
                                                   opts=invoke)
            self.network_id = found.self_link
        else:
            vpc = gcp.compute.Network(
                net.name, auto_create_subnetworks=False, mtu=net.mtu,
                network_profile=profile, routing_mode="REGIONAL",
                description=f"gpufleet {net.role} network of fleet {plan.name}", opts=child)
            self.network_id = vpc.id
            self.network_name = vpc.name
        self.subnet_links = self._subnets(net, project, invoke)
        for rule in net.firewall:
            self._firewall(rule, plan)
        if net.nat:
            router = gcp.compute.Router(naming.child(net.name, "router"), network=self.network_id,
                                        region=plan.region, opts=child)
            gcp.compute.RouterNat(
                naming.child(net.name, "nat"), router=router.name, region=plan.region,
                nat_ip_allocate_option="AUTO_ONLY",
                source_subnetwork_ip_ranges_to_nat="ALL_SUBNETWORKS_ALL_IP_RANGES", opts=child)
        self.register_outputs({"network": self.network_id, "subnets": self.subnet_links})

    def _subnets(self, net: NetworkPlan, project: str | None,
                 invoke: pulumi.InvokeOptions) -> dict[str, pulumi.Output[str]]:
        links: dict[str, pulumi.Output[str]] = {}
        if net.role == "roce" and net.existing:
            # dstack's rule: an existing RoCE VPC must already hold 8 subnets in the region.
            found = gcp.compute.get_subnetworks_output(
                filter=f"network eq .*/{net.existing}$", project=project,
                region=net.subnets[0].region, opts=invoke)
            need = len(net.subnets)

            def pick(result: gcp.compute.GetSubnetworksResult, i: int) -> str:
                subs = sorted(result.subnetworks, key=lambda s: str(s.name))
                if len(subs) < need:
                    raise ValueError(f"RoCE needs {need} subnets, but only {len(subs)} are "
                                     f"available in VPC {net.existing}")
                return str(subs[i].self_link)
            for i, s in enumerate(net.subnets):
                links[s.name] = found.apply(functools.partial(pick, i=i))
            return links
        for s in net.subnets:
            if s.existing:
                links[s.name] = gcp.compute.get_subnetwork_output(
                    name=s.existing, region=s.region, project=project, opts=invoke).self_link
                continue
            sub = gcp.compute.Subnetwork(
                s.name, network=self.network_id, ip_cidr_range=s.cidr, region=s.region,
                private_ip_google_access=net.role == "main",
                opts=pulumi.ResourceOptions(parent=self, replace_on_changes=["ip_cidr_range"]))
            links[s.name] = sub.self_link
        return links

    def _firewall(self, rule: FirewallRule, plan: Owner, target: str | None = None) -> None:
        allows = [gcp.compute.FirewallAllowArgs(protocol=p) for p in ALL_PROTOCOLS] \
            if rule.protocol == "all" else \
            [gcp.compute.FirewallAllowArgs(protocol=rule.protocol, ports=list(rule.ports))]
        tag = _opts(plan).network_tag
        sources = [tag] if rule.from_self else [bastion_tag(plan)] if rule.from_bastion else None
        gcp.compute.Firewall(
            rule.name, network=self.network_id, direction="INGRESS", allows=allows,
            source_ranges=list(rule.sources) or None, source_tags=sources,
            target_tags=[target or tag], description=rule.description,
            opts=pulumi.ResourceOptions(parent=self))


def _first_ip(nics: Sequence[gcp.compute.outputs.InstanceNetworkInterface]) -> str | None:
    return nics[0].network_ip if nics else None


def _nat_ip(nics: Sequence[gcp.compute.outputs.InstanceNetworkInterface]) -> str | None:
    configs = nics[0].access_configs if nics else None
    return configs[0].nat_ip if configs else None


def _opts(plan: Owner) -> GcpOptions | GatewayOptions:
    return options_of(plan, GatewayOptions) if isinstance(plan, GatewayPlan) \
        else options_of(plan, GcpOptions)


def bastion_tag(plan: Owner) -> str:
    return naming.child(_opts(plan).network_tag, "bastion")


def node_metadata(plan: FleetPlan) -> dict[str, str]:
    """OS Login (IAP) or the ssh-keys entry of the access user."""
    access = plan.access
    if access is None or access.os_login:
        return {"enable-oslogin": "TRUE"}
    key = public_key(access.public_key, f"fleet '{plan.name}'")
    return {"enable-oslogin": "FALSE", "ssh-keys": f"{access.user}:{key}"}


class Fleet(pulumi.ComponentResource):
    """A fleet: its networks, its placement policy, one VM per node and its way in."""

    def __init__(self, plan: FleetPlan, opts: pulumi.ResourceOptions | None = None) -> None:
        opts = pulumi.ResourceOptions.merge(opts, rename_options(plan.name, plan.previous_names))
        super().__init__("gpufleet:gcp:Fleet", plan.name, None, opts)
        child = pulumi.ResourceOptions(parent=self)
        self.networks = {n.role: Network(n, plan, child) for n in plan.networks}
        policies = []
        if plan.placement is not None:
            policy = gcp.compute.ResourcePolicy(
                plan.placement.name, region=plan.region,
                group_placement_policy=gcp.compute.ResourcePolicyGroupPlacementPolicyArgs(
                    availability_domain_count=plan.placement.options
                    .availability_domain_count or 1,
                    collocation=plan.placement.kind),
                opts=child)
            policies.append(policy.self_link)
        self.metadata = node_metadata(plan)
        self.nodes = [self._node(plan, name, policies) for name in plan.node_names]
        self.bastion_address: pulumi.Output[str] | None = None
        if plan.access is not None and plan.access.bastion is not None:
            self.bastion_address = self._bastion(plan)
        self.internal_ips = [n.network_interfaces.apply(_first_ip) for n in self.nodes]
        self.network_ids = {role: n.network_id for role, n in self.networks.items()}
        self.network_names = {role: n.network_name for role, n in self.networks.items()}
        self.subnet_ids = {name: link for n in self.networks.values()
                           for name, link in n.subnet_links.items()}
        self.public_ips: list[pulumi.Output[str | None] | None] = [
            n.network_interfaces.apply(_nat_ip) if plan.public_ip else None
            for n in self.nodes]
        self.register_outputs({"nodes": [n.name for n in self.nodes],
                               "internal_ips": self.internal_ips, "networks": self.network_ids,
                               DIGEST_OUTPUT: input_digest(plan)})

    def _node(self, plan: FleetPlan, name: str, policies: list[pulumi.Output[str]]
              ) -> gcp.compute.Instance:
        options = options_of(plan, GcpOptions)
        nics = []
        for nic in plan.nics:
            net = self.networks[nic.network]
            nics.append(gcp.compute.InstanceNetworkInterfaceArgs(
                network=net.network_id, subnetwork=net.subnet_links[nic.subnet],
                nic_type=nic.nic_type,
                access_configs=[gcp.compute.InstanceNetworkInterfaceAccessConfigArgs()]
                if nic.public_ip else None))
        if plan.spot:
            scheduling = gcp.compute.InstanceSchedulingArgs(
                on_host_maintenance="TERMINATE", provisioning_model="SPOT", preemptible=True,
                automatic_restart=False, instance_termination_action="STOP")
        else:
            scheduling = gcp.compute.InstanceSchedulingArgs(
                on_host_maintenance=options.on_host_maintenance or "TERMINATE",
                provisioning_model="STANDARD", automatic_restart=True)
        reservation = gcp.compute.InstanceReservationAffinityArgs(
            type="SPECIFIC_RESERVATION",
            specific_reservation=gcp.compute.InstanceReservationAffinitySpecificReservationArgs(
                key="compute.googleapis.com/reservation-name", values=[plan.reservation]),
        ) if plan.reservation else None
        account = options.service_account
        service_account = gcp.compute.InstanceServiceAccountArgs(
            email=account, scopes=["cloud-platform"]) if account else None
        return gcp.compute.Instance(
            name, machine_type=plan.instance_type, zone=plan.zone,
            boot_disk=gcp.compute.InstanceBootDiskArgs(
                initialize_params=gcp.compute.InstanceBootDiskInitializeParamsArgs(
                    image=plan.image, size=plan.disk_gib, type=plan.disk_type)),
            network_interfaces=nics, scheduling=scheduling,
            resource_policies=policies[0] if policies else None, labels=dict(plan.labels),
            tags=[options.network_tag], metadata=self.metadata,
            reservation_affinity=reservation, service_account=service_account,
            allow_stopping_for_update=True, opts=pulumi.ResourceOptions(parent=self))

    def _bastion(self, plan: FleetPlan) -> pulumi.Output[str]:
        """A small VM with a static external address in the main subnet; SSH reaches it
        from ssh_cidrs only, and the nodes accept SSH only from its tag."""
        assert plan.access is not None and plan.access.bastion is not None
        b = plan.access.bastion
        child = pulumi.ResourceOptions(parent=self)
        main = self.networks["main"]
        if b.firewall.sources:
            main._firewall(b.firewall, plan, target=bastion_tag(plan))
        address = gcp.compute.Address(b.address_name, region=plan.region,
                                      address_type="EXTERNAL", network_tier="PREMIUM",
                                      description=f"gpufleet bastion of fleet {plan.name}",
                                      opts=child)
        key = public_key(plan.access.public_key, f"the bastion of fleet '{plan.name}'")
        gcp.compute.Instance(
            b.name, machine_type=b.instance_type, zone=plan.zone,
            boot_disk=gcp.compute.InstanceBootDiskArgs(
                initialize_params=gcp.compute.InstanceBootDiskInitializeParamsArgs(
                    image=b.image, size=10, type="pd-balanced")),
            network_interfaces=[gcp.compute.InstanceNetworkInterfaceArgs(
                network=main.network_id, subnetwork=main.subnet_links[b.subnet],
                access_configs=[gcp.compute.InstanceNetworkInterfaceAccessConfigArgs(
                    nat_ip=address.address)])],
            tags=[bastion_tag(plan)], labels=dict(plan.labels),
            metadata={"enable-oslogin": "FALSE", "ssh-keys": f"{plan.access.user}:{key}",
                      "serial-port-enable": "FALSE"},
            shielded_instance_config=gcp.compute.InstanceShieldedInstanceConfigArgs(
                enable_secure_boot=True, enable_vtpm=True, enable_integrity_monitoring=True),
            allow_stopping_for_update=True, opts=child)
        return address.address


def emit(plan: FleetPlan, prov: pulumi.ProviderResource) -> Fleet:
    return Fleet(plan, pulumi.ResourceOptions(providers={"gcp": prov}))


class Gateway(pulumi.ComponentResource):
    """A gateway: network, one protected static address per replica, the VMs, and the
    `*.<domain>` record in the Cloud DNS zone that holds the domain."""

    def __init__(self, plan: GatewayPlan, opts: pulumi.ResourceOptions) -> None:
        super().__init__("gpufleet:gcp:Gateway", plan.name, None, opts)
        child = pulumi.ResourceOptions(parent=self)
        keep = pulumi.ResourceOptions(parent=self, protect=plan.protect_address)
        invoke = pulumi.InvokeOptions(parent=self)
        self.network = Network(plan.network, plan, child)
        subnet = self.network.subnet_links[plan.network.subnets[0].name]
        zones = gcp.compute.get_zones_output(region=plan.region, project=_opts(plan).project,
                                             status="UP", opts=invoke)
        self.addresses: list[pulumi.Output[str]] = []
        for i, (addr, vm) in enumerate(zip(plan.address_names, plan.instance_names,
                                           strict=True)):
            if plan.public:
                address = gcp.compute.Address(addr, region=plan.region, address_type="EXTERNAL",
                                              network_tier="PREMIUM", labels=dict(plan.labels),
                                              opts=keep)
                nic = gcp.compute.InstanceNetworkInterfaceArgs(
                    network=self.network.network_id, subnetwork=subnet,
                    access_configs=[gcp.compute.InstanceNetworkInterfaceAccessConfigArgs(
                        nat_ip=address.address)])
            else:
                address = gcp.compute.Address(addr, region=plan.region, address_type="INTERNAL",
                                              subnetwork=subnet, labels=dict(plan.labels),
                                              opts=keep)
                nic = gcp.compute.InstanceNetworkInterfaceArgs(
                    network=self.network.network_id, subnetwork=subnet,
                    network_ip=address.address)
            gcp.compute.Instance(
                vm, machine_type=plan.instance_type,
                zone=zones.names.apply(functools.partial(_nth_zone, i=i)),
                boot_disk=gcp.compute.InstanceBootDiskArgs(
                    initialize_params=gcp.compute.InstanceBootDiskInitializeParamsArgs(
                        image=plan.image, size=20, type="pd-balanced")),
                network_interfaces=[nic], tags=[_opts(plan).network_tag],
                labels=dict(plan.labels), metadata={"enable-oslogin": "TRUE"},
                shielded_instance_config=gcp.compute.InstanceShieldedInstanceConfigArgs(
                    enable_secure_boot=True),
                allow_stopping_for_update=True, opts=child)
            self.addresses.append(address.address)
        if plan.record is not None:
            rec = plan.record
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
                    project=_opts(plan).project, opts=invoke)
                zone_name = managed.managed_zones.apply(
                    lambda zs: _zone_named(zs, rec.zone, rec.private,
                                           rec.fqdn if rec.zone_walk else None))
            gcp.dns.RecordSet(rec.name, managed_zone=zone_name, name=rec.fqdn,
                              type=rec.record_type, ttl=rec.ttl, rrdatas=self.addresses,
                              opts=opts)
        self.register_outputs({"addresses": self.addresses,
                               "record": plan.record.fqdn if plan.record else None,
                               DIGEST_OUTPUT: input_digest(plan)})


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


def emit_gateway(plan: GatewayPlan, prov: pulumi.ProviderResource) -> Gateway:
    return Gateway(plan, pulumi.ResourceOptions(providers={"gcp": prov}))
