"""AWS ComponentResources: a FleetPlan -> VPC, subnets, routes, NAT, security group,
placement group, launch template with the EFA layout, instances and Elastic IPs.

Makes no decisions: every number and name comes from the plan (gpufleet.backends.aws).
"""

from __future__ import annotations

from typing import Any

import pulumi
import pulumi_aws as aws

from gpufleet import naming
from gpufleet.plan import FleetPlan, NetworkPlan, ProviderPlan


def provider(p: ProviderPlan) -> pulumi.ProviderResource:
    return aws.Provider(p.name, region=p.region)


def _tags(plan: FleetPlan, name: str) -> dict[str, str]:
    return {**dict(plan.labels), "Name": name}


class Network(pulumi.ComponentResource):
    """The fleet's VPC (created or looked up), its subnets, routes and security group."""

    vpc_id: pulumi.Output[str]
    subnet_ids: dict[str, pulumi.Output[str]]
    zone: pulumi.Output[str]

    def __init__(self, net: NetworkPlan, plan: FleetPlan, opts: pulumi.ResourceOptions) -> None:
        super().__init__("gpufleet:aws:Network", net.name, None, opts)
        child = pulumi.ResourceOptions(parent=self)
        invoke = pulumi.InvokeOptions(parent=self)
        if plan.zone:
            self.zone = pulumi.Output.from_input(plan.zone)
        else:  # no AZ pinned: the first available AZ of the region, by name
            azs = aws.get_availability_zones_output(state="available", opts=invoke)
            self.zone = azs.names.apply(lambda names: sorted(names)[0])
        self.subnet_ids = {}
        if net.existing:
            self._existing(net, invoke)
        else:
            self._create(net, plan, child)
        self.sg = self._security_group(net, plan, child)
        self.register_outputs({"vpc": self.vpc_id, "subnets": self.subnet_ids,
                               "security_group": self.sg.id})

    def _existing(self, net: NetworkPlan, invoke: pulumi.InvokeOptions) -> None:
        assert net.existing is not None
        if net.existing == "default":
            vpc = aws.ec2.get_vpc_output(default=True, opts=invoke)
        elif net.existing.startswith("vpc-"):
            vpc = aws.ec2.get_vpc_output(id=net.existing, opts=invoke)
        else:
            vpc = aws.ec2.get_vpc_output(tags={"Name": net.existing}, opts=invoke)
        self.vpc_id = vpc.id
        # dstack's rule: use the VPC's own subnets in the node AZ (the user owns routing).
        subnets = aws.ec2.get_subnets_output(
            filters=[{"name": "vpc-id", "values": [vpc.id]},
                     {"name": "availability-zone", "values": [self.zone]}], opts=invoke)
        for s in net.subnets:
            self.subnet_ids[s.name] = subnets.ids.apply(lambda ids: sorted(ids)[0])

    def _create(self, net: NetworkPlan, plan: FleetPlan, child: pulumi.ResourceOptions) -> None:
        vpc = aws.ec2.Vpc(net.name, cidr_block=net.cidr, enable_dns_support=True,
                          enable_dns_hostnames=True, tags=_tags(plan, net.name), opts=child)
        self.vpc_id = vpc.id
        for s in net.subnets:
            sub = aws.ec2.Subnet(
                s.name, vpc_id=vpc.id, cidr_block=s.cidr, availability_zone=self.zone,
                map_public_ip_on_launch=False, tags=_tags(plan, s.name),
                opts=pulumi.ResourceOptions(parent=self,
                                            replace_on_changes=["cidr_block",
                                                                "availability_zone"]))
            self.subnet_ids[s.name] = sub.id
        igw = aws.ec2.InternetGateway(naming.child(net.name, "igw"), vpc_id=vpc.id,
                                      tags=_tags(plan, naming.child(net.name, "igw")),
                                      opts=child)
        public_rt = aws.ec2.RouteTable(
            naming.child(net.name, "public-rt"), vpc_id=vpc.id,
            routes=[{"cidr_block": "0.0.0.0/0", "gateway_id": igw.id}],
            tags=_tags(plan, naming.child(net.name, "public-rt")), opts=child)
        for s in net.subnets:
            if s.public:
                aws.ec2.RouteTableAssociation(naming.child(s.name, "rt"),
                                              subnet_id=self.subnet_ids[s.name],
                                              route_table_id=public_rt.id, opts=child)
        if net.nat:
            public = next(s for s in net.subnets if s.public)
            eip = aws.ec2.Eip(naming.child(net.name, "nat-eip"), domain="vpc",
                              tags=_tags(plan, naming.child(net.name, "nat-eip")), opts=child)
            nat = aws.ec2.NatGateway(
                naming.child(net.name, "nat"), allocation_id=eip.allocation_id,
                subnet_id=self.subnet_ids[public.name],
                tags=_tags(plan, naming.child(net.name, "nat")),
                opts=pulumi.ResourceOptions(parent=self, depends_on=[igw]))
            private_rt = aws.ec2.RouteTable(
                naming.child(net.name, "private-rt"), vpc_id=vpc.id,
                routes=[{"cidr_block": "0.0.0.0/0", "nat_gateway_id": nat.id}],
                tags=_tags(plan, naming.child(net.name, "private-rt")), opts=child)
            for s in net.subnets:
                if not s.public:
                    aws.ec2.RouteTableAssociation(naming.child(s.name, "rt"),
                                                  subnet_id=self.subnet_ids[s.name],
                                                  route_table_id=private_rt.id, opts=child)

    def _security_group(self, net: NetworkPlan, plan: FleetPlan,
                        child: pulumi.ResourceOptions) -> aws.ec2.SecurityGroup:
        ingress: list[dict[str, Any]] = []
        for rule in net.firewall:
            if rule.from_self:
                ingress.append({"protocol": "-1", "from_port": 0, "to_port": 0, "self": True,
                                "description": rule.description})
            else:
                port = int(rule.ports[0]) if rule.ports else 0
                ingress.append({"protocol": rule.protocol, "from_port": port, "to_port": port,
                                "cidr_blocks": list(rule.sources),
                                "description": rule.description})
        name = str(plan.options["security_group"])
        return aws.ec2.SecurityGroup(
            name, vpc_id=self.vpc_id, description=f"gpufleet fleet {plan.name}",
            ingress=ingress,
            egress=[{"protocol": "-1", "from_port": 0, "to_port": 0,
                     "cidr_blocks": ["0.0.0.0/0"], "description": "all egress"},
                    {"protocol": "-1", "from_port": 0, "to_port": 0, "self": True,
                     "description": "all traffic to the fleet's own group (EFA)"}],
            tags=_tags(plan, name), opts=child)


class Fleet(pulumi.ComponentResource):
    """A fleet: network, cluster placement group, launch template and one instance per node."""

    def __init__(self, plan: FleetPlan, opts: pulumi.ResourceOptions | None = None) -> None:
        aliases = [pulumi.Alias(name=old) for old in plan.previous_names]
        opts = pulumi.ResourceOptions.merge(opts, pulumi.ResourceOptions(aliases=aliases))
        super().__init__("gpufleet:aws:Fleet", plan.name, None, opts)
        child = pulumi.ResourceOptions(parent=self)
        net_plan = plan.networks[0]
        self.network = Network(net_plan, plan, child)
        placement = None
        if plan.placement is not None:
            placement = aws.ec2.PlacementGroup(plan.placement.name, strategy="cluster",
                                               tags=_tags(plan, plan.placement.name),
                                               opts=child)
        ami = aws.ec2.get_ami_output(
            most_recent=True, owners=[plan.options["ami_owner"]],
            filters=[{"name": "name", "values": [plan.options["ami_name"]]},
                     {"name": "architecture", "values": ["x86_64"]}],
            opts=pulumi.InvokeOptions(parent=self))
        template = self._template(plan, ami.id, placement, child)
        self.nodes = [aws.ec2.Instance(
            name, launch_template={"id": template.id,
                                   "version": template.latest_version.apply(str)},
            tags=_tags(plan, name), volume_tags=_tags(plan, name), opts=child)
            for name in plan.node_names]
        if plan.options.get("eip_per_node"):
            # AWS cannot auto-assign a public IPv4 to a multi-NIC instance (dstack#3865).
            for name, node in zip(plan.node_names, self.nodes, strict=True):
                eip = aws.ec2.Eip(naming.child(name, "eip"), domain="vpc",
                                  tags=_tags(plan, naming.child(name, "eip")), opts=child)
                aws.ec2.EipAssociation(naming.child(name, "eip-assoc"),
                                       allocation_id=eip.allocation_id,
                                       network_interface_id=node.primary_network_interface_id,
                                       opts=child)
        self.internal_ips = [n.private_ip for n in self.nodes]
        self.network_ids = {"main": self.network.vpc_id}
        self.register_outputs({"nodes": [n.id for n in self.nodes],
                               "internal_ips": self.internal_ips,
                               "networks": self.network_ids})

    def _template(self, plan: FleetPlan, ami: pulumi.Output[str],
                  placement: aws.ec2.PlacementGroup | None,
                  child: pulumi.ResourceOptions) -> aws.ec2.LaunchTemplate:
        sg = self.network.sg.id
        nics = []
        for nic in plan.nics:
            entry: dict[str, Any] = {
                "network_card_index": nic.card, "device_index": nic.device,
                "subnet_id": self.network.subnet_ids[nic.subnet], "security_groups": [sg],
                "delete_on_termination": "true"}
            if nic.nic_type != "interface":
                entry["interface_type"] = nic.nic_type
            if nic.public_ip and len(plan.nics) == 1:
                entry["associate_public_ip_address"] = "true"
            nics.append(entry)
        extra: dict[str, Any] = {}
        market = plan.options.get("market")
        if market == "spot":
            spot: dict[str, Any] = {"spot_instance_type": "one-time",
                                    "instance_interruption_behavior": "terminate"}
            if plan.max_price is not None:
                spot["max_price"] = f"{plan.max_price:g}"
            extra["instance_market_options"] = {"market_type": "spot", "spot_options": spot}
        elif market == "capacity-block":
            extra["instance_market_options"] = {"market_type": "capacity-block"}
        if plan.reservation:
            extra["capacity_reservation_specification"] = {
                "capacity_reservation_target": {"capacity_reservation_id": plan.reservation}}
        if placement is not None:
            extra["placement"] = {"group_name": placement.name,
                                  "availability_zone": self.network.zone}
        else:
            extra["placement"] = {"availability_zone": self.network.zone}
        if plan.options.get("iam_instance_profile"):
            extra["iam_instance_profile"] = {"name": plan.options["iam_instance_profile"]}
        name = str(plan.options["launch_template"])
        return aws.ec2.LaunchTemplate(
            name, image_id=ami, instance_type=plan.instance_type, network_interfaces=nics,
            metadata_options={"http_endpoint": "enabled", "http_tokens": "required",
                              "http_put_response_hop_limit": 2},
            block_device_mappings=[{"device_name": "/dev/sda1", "ebs": {
                "volume_size": plan.disk_gib, "volume_type": plan.disk_type,
                "encrypted": "true", "delete_on_termination": "true"}}],
            tag_specifications=[{"resource_type": "instance", "tags": dict(plan.labels)},
                                {"resource_type": "network-interface",
                                 "tags": dict(plan.labels)}],
            tags=_tags(plan, name), update_default_version=True, opts=child, **extra)


def emit(plan: FleetPlan, prov: pulumi.ProviderResource) -> Fleet:
    return Fleet(plan, pulumi.ResourceOptions(providers={"aws": prov}))
