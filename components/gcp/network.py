"""GCP networks: a NetworkDesign -> a VPC (created or looked up), its subnets, firewall rules
and Cloud NAT. Makes no decisions: every number and name comes from the plan
(gpufleet.backends.gcp.compile)."""

from __future__ import annotations

import functools

import pulumi
import pulumi_gcp as gcp

from gpufleet.backends.gcp.compile import GcpOptions
from gpufleet.compile import (
    ANY_SUBNET,
    FirewallRule,
    FleetDesign,
    GatewayDesign,
    GatewayOptions,
    NetworkDesign,
    naming,
    options_of,
)

Owner = FleetDesign | GatewayDesign

ALL_PROTOCOLS = ("tcp", "udp", "icmp")


class Network(pulumi.ComponentResource):
    """One VPC of a fleet (main, extra gVNIC or RoCE) with its subnets and firewall rules."""

    network_id: pulumi.Output[str]
    subnet_links: dict[str, pulumi.Output[str]]

    def __init__(self, net: NetworkDesign, plan: Owner,
                 opts: pulumi.ResourceOptions | None = None,
                 joins: Network | None = None) -> None:
        """``joins``: the network this one's subnets (and firewall rules) join: a fleet's
        `network`, or a gateway sharing a fleet's; its router and NAT serve them."""
        token = "gpufleet:gcp:RoceNetwork" if net.role == "roce" else "gpufleet:gcp:Network"
        super().__init__(token, net.name, None, opts)
        project = net.project or owner_options(plan).project  # a Shared VPC's host project
        child = pulumi.ResourceOptions(parent=self)
        invoke = pulumi.InvokeOptions(parent=self)
        profile: pulumi.Input[str] | None = None
        if net.profile:
            project_id = pulumi.Output.from_input(project) if project else \
                gcp.organizations.get_client_config_output(opts=invoke).project
            profile = project_id.apply(
                lambda p: f"projects/{p}/global/networkProfiles/{net.profile}")
        self.network_name: pulumi.Input[str] = net.existing or ""
        if joins is not None:
            self.network_id, self.network_name = joins.network_id, joins.network_name
        elif net.existing:
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
        if net.nat and joins is None:
            router = gcp.compute.Router(naming.child(net.name, "router"), network=self.network_id,
                                        region=plan.region, opts=child)
            gcp.compute.RouterNat(
                naming.child(net.name, "nat"), router=router.name, region=plan.region,
                nat_ip_allocate_option="AUTO_ONLY",
                source_subnetwork_ip_ranges_to_nat="ALL_SUBNETWORKS_ALL_IP_RANGES", opts=child)
        self.register_outputs({"network": self.network_id, "subnets": self.subnet_links})

    def _subnets(self, net: NetworkDesign, project: str | None,
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
            if s.existing == ANY_SUBNET:
                found = gcp.compute.get_subnetworks_output(
                    filter=f"network eq .*/{net.existing}$", project=project, region=s.region,
                    opts=invoke)
                links[s.name] = found.apply(functools.partial(_first_subnet, net=net))
                continue
            if s.existing:
                links[s.name] = gcp.compute.get_subnetwork_output(
                    name=s.existing, region=s.region, project=project, opts=invoke).self_link
                continue
            sub = gcp.compute.Subnetwork(
                s.name, network=self.network_id, ip_cidr_range=s.cidr, region=s.region,
                private_ip_google_access=net.role == "main" and s.purpose is None,
                purpose=s.purpose, role="ACTIVE" if s.purpose else None,
                opts=pulumi.ResourceOptions(parent=self, replace_on_changes=["ip_cidr_range"]))
            links[s.name] = sub.self_link
        return links

    def _firewall(self, rule: FirewallRule, plan: Owner, target: str | None = None) -> None:
        allows = [gcp.compute.FirewallAllowArgs(protocol=p) for p in ALL_PROTOCOLS] \
            if rule.protocol == "all" else \
            [gcp.compute.FirewallAllowArgs(protocol=rule.protocol, ports=list(rule.ports))]
        tag = options_of(plan, GcpOptions).network_tag  # only fleets have rules
        sources = [tag] if rule.from_self else [bastion_tag(plan)] if rule.from_bastion else None
        gcp.compute.Firewall(
            rule.name, network=self.network_id, direction="INGRESS", allows=allows,
            source_ranges=list(rule.sources) or None, source_tags=sources,
            target_tags=[target or tag], description=rule.description,
            opts=pulumi.ResourceOptions(parent=self))


def owner_options(plan: Owner) -> GcpOptions | GatewayOptions:
    return options_of(plan, GatewayOptions) if isinstance(plan, GatewayDesign) \
        else options_of(plan, GcpOptions)


def bastion_tag(plan: Owner) -> str:
    return naming.child(options_of(plan, GcpOptions).network_tag, "bastion")


def _first_subnet(result: gcp.compute.GetSubnetworksResult, net: NetworkDesign) -> str:
    """A Shared VPC network's subnet in the region the backends file does not name: the
    first by name, as dstack takes a usable one."""
    subs = sorted(result.subnetworks, key=lambda s: str(s.name))
    if not subs:
        raise ValueError(f"the shared network {net.existing} of project {net.project} has no "
                         "subnet in the region: name one in `subnetworks`")
    return str(subs[0].self_link)
