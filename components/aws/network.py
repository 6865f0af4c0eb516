"""AWS networks: the VPC (created or looked up), its subnets, routes, NAT and the security
groups of a fleet or gateway. Makes no decisions: every number and name comes from the plan
(gpufleet.backends.aws.compile)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import pulumi
import pulumi_aws as aws

from gpufleet.backends.aws.compile import AwsOptions
from gpufleet.compile import (
    BastionDesign,
    FleetDesign,
    GatewayDesign,
    NetworkDesign,
    naming,
    options_of,
)

Owner = FleetDesign | GatewayDesign


def tags(plan: Owner, name: str) -> dict[str, str]:
    return {**dict(plan.labels), "Name": name}


class Network(pulumi.ComponentResource):
    """The fleet's VPC (created or looked up), its subnets, routes and security group."""

    vpc_id: pulumi.Output[str]
    subnet_ids: dict[str, pulumi.Output[str]]
    zone: pulumi.Output[str]

    def __init__(self, net: NetworkDesign, plan: Owner, opts: pulumi.ResourceOptions,
                 peers: Mapping[str, pulumi.Input[str]] | None = None,
                 peer_routes: Sequence[tuple[str, str]] = (),
                 joins: Network | None = None) -> None:
        """``peers``: fleet name -> the VPC to peer with (a fleet holding filesystems this one
        mounts); ``peer_routes``: (a filesystem's subnet, its fleet), routed through that
        peering from this network's route tables; ``joins``: the network whose VPC this one's
        subnets join (`network`, or a gateway sharing a fleet's)."""
        super().__init__("gpufleet:aws:Network", net.name, None, opts)
        self.peerings: dict[str, aws.ec2.VpcPeeringConnection] = {}
        child = pulumi.ResourceOptions(parent=self)
        invoke = pulumi.InvokeOptions(parent=self)
        self._azs: pulumi.Output[list[str]] | None = None
        self._invoke = invoke
        if isinstance(plan, GatewayDesign):
            self.zone = self.nth_zone(0)
        elif plan.zone:
            self.zone = pulumi.Output.from_input(plan.zone)
        else:
            self.zone = self.offering_zone(plan.instance_type)
        self.subnet_ids = {}
        # the route tables of a created network (a gateway sharing it joins its subnets)
        self.public_rt: aws.ec2.RouteTable | None = None
        self.private_rt: aws.ec2.RouteTable | None = None
        if net.existing:
            self._existing(net, invoke)
        elif joins is not None:
            self._join(net, plan, joins, child)
        else:
            self._create(net, plan, child, peers or {}, peer_routes)
        self.bastion_sg: aws.ec2.SecurityGroup | None = None
        access = plan.access if isinstance(plan, FleetDesign) else None
        if access is not None and access.bastion is not None:
            self.bastion_sg = self._bastion_group(access.bastion, plan, child)
        # a fleet's group; a gateway's network has none (dstack makes its gateway's own)
        self._sg = self._security_group(net, plan, child) if isinstance(plan, FleetDesign) \
            else None
        self.register_outputs({"vpc": self.vpc_id, "subnets": self.subnet_ids,
                               "security_group": self._sg.id if self._sg else None})

    @property
    def sg(self) -> aws.ec2.SecurityGroup:
        """The fleet's security group."""
        assert self._sg is not None, "a gateway's network has no security group"
        return self._sg

    def _bastion_group(self, b: BastionDesign, plan: Owner,
                       child: pulumi.ResourceOptions) -> aws.ec2.SecurityGroup:
        rule = b.firewall
        ingress = [ingress_rule(22, "tcp", rule.description, cidr_blocks=list(rule.sources))] \
            if rule.sources else []
        if b.server is not None:  # control_plane: the SSH tunnel to the server, from `allow`
            ingress += [ingress_rule(int(port), "tcp", b.server.firewall.description,
                                     cidr_blocks=list(b.server.firewall.sources))
                        for port in b.server.firewall.ports]
        name = naming.child(b.name, "sg")
        return aws.ec2.SecurityGroup(
            name, vpc_id=self.vpc_id, description=f"gpufleet bastion of {plan.name}",
            ingress=ingress, egress=[ALL_EGRESS], tags=tags(plan, name), opts=child)

    def zones(self) -> pulumi.Output[list[str]]:
        """The region's available Availability Zones by name; Local and Wavelength zones
        (opted in or not) are left out."""
        if self._azs is None:
            found = aws.get_availability_zones_output(
                state="available", filters=[aws.GetAvailabilityZonesFilterArgs(
                    name="zone-type", values=["availability-zone"])],
                opts=self._invoke)
            self._azs = found.names.apply(sorted)
        return self._azs

    def nth_zone(self, index: int) -> pulumi.Output[str]:
        """No AZ pinned: the N-th available AZ of the region, by name."""
        return self.zones().apply(lambda names: names[index % len(names)])

    def offering_zone(self, instance_type: str) -> pulumi.Output[str]:
        """No AZ pinned: the first AZ (by name) that offers the instance type."""
        offered = aws.ec2.get_instance_type_offerings_output(
            location_type="availability-zone",
            filters=[aws.ec2.GetInstanceTypeOfferingsFilterArgs(name="instance-type",
                                                                values=[instance_type])],
            opts=self._invoke)

        def pick(args: list[Any]) -> str:
            names, locations = args
            both = [z for z in names if z in set(locations or [])]
            if not both:
                raise ValueError(f"no Availability Zone of this region offers {instance_type}")
            return str(both[0])
        return pulumi.Output.all(self.zones(), offered.locations).apply(pick)

    def _existing(self, net: NetworkDesign, invoke: pulumi.InvokeOptions) -> None:
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
            filters=pulumi.Output.all(vpc.id, self.zone).apply(vpc_zone_filters), opts=invoke)
        for s in net.subnets:
            self.subnet_ids[s.name] = subnets.ids.apply(lambda ids: sorted(ids)[0])

    def _join(self, net: NetworkDesign, plan: Owner, joined: Network,
              child: pulumi.ResourceOptions) -> None:
        """The subnets in another network's VPC: this network's own address block associated
        with the VPC (docs.aws.amazon.com/vpc/latest/userguide/vpc-cidr-blocks.html), on the
        joined network's route tables (its internet gateway; its NAT for private subnets); no VPC,
        internet gateway or NAT of its own."""
        assert net.cidr and joined.public_rt is not None, \
            "the planner checks the joined network's routes"
        block = aws.ec2.VpcIpv4CidrBlockAssociation(
            naming.child(net.name, "cidr"), vpc_id=joined.vpc_id, cidr_block=net.cidr,
            opts=child)
        self.vpc_id = joined.vpc_id
        self.public_rt, self.private_rt = joined.public_rt, joined.private_rt
        for s in net.subnets:
            zone = s.zone or (self.nth_zone(s.zone_index) if s.zone_index is not None
                              else self.zone)
            sub = aws.ec2.Subnet(
                s.name, vpc_id=block.vpc_id, cidr_block=s.cidr, availability_zone=zone,
                map_public_ip_on_launch=False, tags=tags(plan, s.name),
                opts=pulumi.ResourceOptions(parent=self, depends_on=[block],
                                            replace_on_changes=["cidr_block",
                                                                "availability_zone"]))
            self.subnet_ids[s.name] = sub.id
            table = joined.public_rt if s.public else joined.private_rt
            assert table is not None, "the planner checks the joined network's NAT"
            aws.ec2.RouteTableAssociation(naming.child(s.name, "rt"), subnet_id=sub.id,
                                          route_table_id=table.id, opts=child)

    def _create(self, net: NetworkDesign, plan: Owner, child: pulumi.ResourceOptions,
                peers: Mapping[str, pulumi.Input[str]],
                peer_routes: Sequence[tuple[str, str]]) -> None:
        vpc = aws.ec2.Vpc(net.name, cidr_block=net.cidr, enable_dns_support=True,
                          enable_dns_hostnames=True, tags=tags(plan, net.name), opts=child)
        self.vpc_id = vpc.id
        for holder, holder_vpc in sorted(peers.items()):  # same account and region: accepted
            name = naming.child(net.name, f"peer-{holder}")
            self.peerings[holder] = aws.ec2.VpcPeeringConnection(
                name, vpc_id=vpc.id, peer_vpc_id=holder_vpc, auto_accept=True,
                tags=tags(plan, name), opts=child)
        # to each shared filesystem's subnet only, through its fleet's peering
        to_peers = [aws.ec2.RouteTableRouteArgs(cidr_block=cidr,
                                                vpc_peering_connection_id=self.peerings[h].id)
                    for cidr, h in sorted(peer_routes)]
        for s in net.subnets:
            zone = s.zone or (self.nth_zone(s.zone_index) if s.zone_index is not None
                              else self.zone)
            sub = aws.ec2.Subnet(
                s.name, vpc_id=vpc.id, cidr_block=s.cidr, availability_zone=zone,
                map_public_ip_on_launch=False, tags=tags(plan, s.name),
                opts=pulumi.ResourceOptions(parent=self,
                                            replace_on_changes=["cidr_block",
                                                                "availability_zone"]))
            self.subnet_ids[s.name] = sub.id
        igw = aws.ec2.InternetGateway(naming.child(net.name, "igw"), vpc_id=vpc.id,
                                      tags=tags(plan, naming.child(net.name, "igw")),
                                      opts=child)
        public_rt = aws.ec2.RouteTable(
            naming.child(net.name, "public-rt"), vpc_id=vpc.id,
            routes=[aws.ec2.RouteTableRouteArgs(cidr_block="0.0.0.0/0", gateway_id=igw.id),
                    *to_peers],
            tags=tags(plan, naming.child(net.name, "public-rt")), opts=child)
        for s in net.subnets:
            if s.public:
                aws.ec2.RouteTableAssociation(naming.child(s.name, "rt"),
                                              subnet_id=self.subnet_ids[s.name],
                                              route_table_id=public_rt.id, opts=child)
        private_rt = self._nat(net, plan, vpc, igw, to_peers, child) if net.nat else None
        self.public_rt, self.private_rt = public_rt, private_rt
        if isinstance(plan, FleetDesign):
            # S3 through a gateway endpoint (free): datasets and checkpoints reach S3 without
            # the NAT gateway's per-GB processing charge
            tables = [public_rt.id, *([private_rt.id] if private_rt is not None else [])]
            aws.ec2.VpcEndpoint(
                naming.child(net.name, "s3"), vpc_id=vpc.id,
                service_name=f"com.amazonaws.{plan.region}.s3", vpc_endpoint_type="Gateway",
                route_table_ids=tables, tags=tags(plan, naming.child(net.name, "s3")),
                opts=child)

    def _nat(self, net: NetworkDesign, plan: Owner, vpc: aws.ec2.Vpc,
             igw: aws.ec2.InternetGateway, to_peers: Sequence[aws.ec2.RouteTableRouteArgs],
             child: pulumi.ResourceOptions) -> aws.ec2.RouteTable:
        """A NAT gateway in the public subnet, and the private subnets' route table to it."""
        public = next(s for s in net.subnets if s.public)
        eip = aws.ec2.Eip(naming.child(net.name, "nat-eip"), domain="vpc",
                          tags=tags(plan, naming.child(net.name, "nat-eip")), opts=child)
        nat = aws.ec2.NatGateway(
            naming.child(net.name, "nat"), allocation_id=eip.allocation_id,
            subnet_id=self.subnet_ids[public.name],
            tags=tags(plan, naming.child(net.name, "nat")),
            opts=pulumi.ResourceOptions(parent=self, depends_on=[igw]))
        private_rt = aws.ec2.RouteTable(
            naming.child(net.name, "private-rt"), vpc_id=vpc.id,
            routes=[aws.ec2.RouteTableRouteArgs(cidr_block="0.0.0.0/0",
                                                nat_gateway_id=nat.id), *to_peers],
            tags=tags(plan, naming.child(net.name, "private-rt")), opts=child)
        for s in net.subnets:
            if not s.public:
                aws.ec2.RouteTableAssociation(naming.child(s.name, "rt"),
                                              subnet_id=self.subnet_ids[s.name],
                                              route_table_id=private_rt.id, opts=child)
        return private_rt

    def _security_group(self, net: NetworkDesign, plan: FleetDesign,
                        child: pulumi.ResourceOptions) -> aws.ec2.SecurityGroup:
        ingress: list[aws.ec2.SecurityGroupIngressArgs] = []
        for rule in net.firewall:
            if rule.from_self and rule.protocol == "all":
                ingress.append(ingress_rule(0, "-1", rule.description, from_self=True))
                continue
            if rule.from_self:  # single ports (k3s's) from the group itself
                ingress += [ingress_rule(p, rule.protocol, rule.description, from_self=True)
                            for p in rule.ports]
                continue
            group = self.bastion_sg if rule.from_bastion else None
            if rule.from_bastion:
                assert group is not None
                ingress += [ingress_rule(int(p), rule.protocol, rule.description,
                                     security_groups=[group.id]) for p in rule.ports]
                continue
            ingress += [ingress_rule(int(p), rule.protocol, rule.description,
                                 cidr_blocks=list(rule.sources)) for p in rule.ports]
        name = options_of(plan, AwsOptions).security_group
        return aws.ec2.SecurityGroup(
            name, vpc_id=self.vpc_id, description=f"gpufleet {plan.name}",
            ingress=ingress,
            egress=[ALL_EGRESS, aws.ec2.SecurityGroupEgressArgs(
                protocol="-1", from_port=0, to_port=0, self=True,
                description="all traffic to the fleet's own group (EFA)")],
            tags=tags(plan, name), opts=child)


ALL_EGRESS = aws.ec2.SecurityGroupEgressArgs(protocol="-1", from_port=0, to_port=0,
                                              cidr_blocks=["0.0.0.0/0"],
                                              description="all egress")


def ingress_rule(port: int | str, protocol: str, description: str, *,
             cidr_blocks: list[str] | None = None,
             security_groups: list[pulumi.Output[str]] | None = None,
             from_self: bool | None = None) -> aws.ec2.SecurityGroupIngressArgs:
    """One ingress rule for one port or range ("2379-2380"; all ports for protocol -1) from
    CIDR blocks, other security groups or the group itself."""
    low, _, high = str(port).partition("-")
    return aws.ec2.SecurityGroupIngressArgs(
        protocol=protocol, from_port=int(low), to_port=int(high or low),
        description=description,
        cidr_blocks=cidr_blocks, security_groups=security_groups, self=from_self)


def vpc_zone_filters(vpc_and_zone: list[str]) -> list[aws.ec2.GetSubnetsFilterArgs]:
    vpc_id, zone = vpc_and_zone
    return [aws.ec2.GetSubnetsFilterArgs(name="vpc-id", values=[vpc_id]),
            aws.ec2.GetSubnetsFilterArgs(name="availability-zone", values=[zone])]
