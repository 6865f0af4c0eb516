"""AWS ComponentResources: a FleetPlan -> VPC, subnets, routes, NAT, security group,
placement group, launch template with the EFA layout, instances and Elastic IPs.

Makes no decisions: every number and name comes from the plan (gpufleet.compile.backends.aws).
"""

from __future__ import annotations

import weakref
from typing import Any

import pulumi
import pulumi_aws as aws

from gpufleet.compile import (
    DIGEST_OUTPUT,
    BastionPlan,
    DnsRecordPlan,
    FirewallRule,
    FleetPlan,
    GatewayPlan,
    NetworkPlan,
    ProviderPlan,
    input_digest,
    naming,
)

from .access import public_key
from .renames import rename_options

Owner = FleetPlan | GatewayPlan


def provider(p: ProviderPlan) -> pulumi.ProviderResource:
    return aws.Provider(p.name, region=p.region)


def _tags(plan: Owner, name: str) -> dict[str, str]:
    return {**dict(plan.labels), "Name": name}


class Network(pulumi.ComponentResource):
    """The fleet's VPC (created or looked up), its subnets, routes and security group."""

    vpc_id: pulumi.Output[str]
    subnet_ids: dict[str, pulumi.Output[str]]
    zone: pulumi.Output[str]

    def __init__(self, net: NetworkPlan, plan: Owner, opts: pulumi.ResourceOptions) -> None:
        super().__init__("gpufleet:aws:Network", net.name, None, opts)
        child = pulumi.ResourceOptions(parent=self)
        invoke = pulumi.InvokeOptions(parent=self)
        self._azs: pulumi.Output[list[str]] | None = None
        self._invoke = invoke
        if plan.zone:
            self.zone = pulumi.Output.from_input(plan.zone)
        elif isinstance(plan, FleetPlan):
            self.zone = self.offering_zone(plan.instance_type)
        else:
            self.zone = self.nth_zone(0)
        self.subnet_ids = {}
        if net.existing:
            self._existing(net, invoke)
        else:
            self._create(net, plan, child)
        self.bastion_sg: aws.ec2.SecurityGroup | None = None
        access = plan.access if isinstance(plan, FleetPlan) else None
        if access is not None and access.bastion is not None:
            self.bastion_sg = self._bastion_group(access.bastion, plan, child)
        self.alb_sg: aws.ec2.SecurityGroup | None = None
        alb_rule = plan.options.get("alb_firewall")
        if isinstance(alb_rule, FirewallRule):
            self.alb_sg = aws.ec2.SecurityGroup(
                alb_rule.name, vpc_id=self.vpc_id, description=f"gpufleet ALB of {plan.name}",
                ingress=[_ingress(int(port), "tcp", alb_rule.description,
                                  cidr_blocks=list(alb_rule.sources))
                         for port in alb_rule.ports],
                egress=[aws.ec2.SecurityGroupEgressArgs(
                    protocol="-1", from_port=0, to_port=0,
                    cidr_blocks=[net.cidr or "0.0.0.0/0"],
                    description="to the gateway instances")],
                tags=_tags(plan, alb_rule.name), opts=child)
        self.sg = self._security_group(net, plan, child)
        self.register_outputs({"vpc": self.vpc_id, "subnets": self.subnet_ids,
                               "security_group": self.sg.id})

    def _bastion_group(self, b: BastionPlan, plan: Owner,
                       child: pulumi.ResourceOptions) -> aws.ec2.SecurityGroup:
        rule = b.firewall
        ingress = [_ingress(22, "tcp", rule.description, cidr_blocks=list(rule.sources))] \
            if rule.sources else []
        name = naming.child(b.name, "sg")
        return aws.ec2.SecurityGroup(
            name, vpc_id=self.vpc_id, description=f"gpufleet bastion of {plan.name}",
            ingress=ingress, egress=[_ALL_EGRESS], tags=_tags(plan, name), opts=child)

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
            filters=pulumi.Output.all(vpc.id, self.zone).apply(_vpc_zone_filters), opts=invoke)
        for s in net.subnets:
            self.subnet_ids[s.name] = subnets.ids.apply(lambda ids: sorted(ids)[0])

    def _create(self, net: NetworkPlan, plan: Owner, child: pulumi.ResourceOptions) -> None:
        vpc = aws.ec2.Vpc(net.name, cidr_block=net.cidr, enable_dns_support=True,
                          enable_dns_hostnames=True, tags=_tags(plan, net.name), opts=child)
        self.vpc_id = vpc.id
        for s in net.subnets:
            zone = s.zone or (self.nth_zone(s.zone_index) if s.zone_index is not None
                              else self.zone)
            sub = aws.ec2.Subnet(
                s.name, vpc_id=vpc.id, cidr_block=s.cidr, availability_zone=zone,
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
            routes=[aws.ec2.RouteTableRouteArgs(cidr_block="0.0.0.0/0", gateway_id=igw.id)],
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
                routes=[aws.ec2.RouteTableRouteArgs(cidr_block="0.0.0.0/0",
                                                    nat_gateway_id=nat.id)],
                tags=_tags(plan, naming.child(net.name, "private-rt")), opts=child)
            for s in net.subnets:
                if not s.public:
                    aws.ec2.RouteTableAssociation(naming.child(s.name, "rt"),
                                                  subnet_id=self.subnet_ids[s.name],
                                                  route_table_id=private_rt.id, opts=child)

    def _security_group(self, net: NetworkPlan, plan: Owner,
                        child: pulumi.ResourceOptions) -> aws.ec2.SecurityGroup:
        ingress: list[aws.ec2.SecurityGroupIngressArgs] = []
        for rule in net.firewall:
            if rule.from_self:
                ingress.append(_ingress(0, "-1", rule.description, from_self=True))
                continue
            group = self.alb_sg if rule.from_load_balancer else \
                self.bastion_sg if rule.from_bastion else None
            if rule.from_load_balancer or rule.from_bastion:
                assert group is not None
                ingress += [_ingress(int(p), rule.protocol, rule.description,
                                     security_groups=[group.id]) for p in rule.ports]
                continue
            ingress += [_ingress(int(p), rule.protocol, rule.description,
                                 cidr_blocks=list(rule.sources)) for p in rule.ports]
        name = str(plan.options["security_group"])
        return aws.ec2.SecurityGroup(
            name, vpc_id=self.vpc_id, description=f"gpufleet {plan.name}",
            ingress=ingress,
            egress=[_ALL_EGRESS, aws.ec2.SecurityGroupEgressArgs(
                protocol="-1", from_port=0, to_port=0, self=True,
                description="all traffic to the fleet's own group (EFA)")],
            tags=_tags(plan, name), opts=child)


_ALL_EGRESS = aws.ec2.SecurityGroupEgressArgs(protocol="-1", from_port=0, to_port=0,
                                              cidr_blocks=["0.0.0.0/0"],
                                              description="all egress")


def _ingress(port: int, protocol: str, description: str, *,
             cidr_blocks: list[str] | None = None,
             security_groups: list[pulumi.Output[str]] | None = None,
             from_self: bool | None = None) -> aws.ec2.SecurityGroupIngressArgs:
    """One ingress rule for one port (all ports for protocol -1) from CIDR blocks, other
    security groups or the group itself."""
    return aws.ec2.SecurityGroupIngressArgs(
        protocol=protocol, from_port=port, to_port=port, description=description,
        cidr_blocks=cidr_blocks, security_groups=security_groups, self=from_self)


class Fleet(pulumi.ComponentResource):
    """A fleet: network, cluster placement group, launch template and one instance per node."""

    def __init__(self, plan: FleetPlan, opts: pulumi.ResourceOptions | None = None) -> None:
        opts = pulumi.ResourceOptions.merge(opts, rename_options(plan.name, plan.previous_names))
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
            most_recent=True, owners=[str(plan.options["ami_owner"])],
            filters=_ami_filters(str(plan.options["ami_name"])),
            opts=pulumi.InvokeOptions(parent=self))
        self.key_name = self._key(plan)
        self.instance_profile = self._ssm(plan, child) if plan.access is not None \
            and plan.access.method == "ssm" else None
        template = self._template(plan, ami.id, placement, child)
        launch = aws.ec2.InstanceLaunchTemplateArgs(
            id=template.id, version=template.latest_version.apply(str))
        self.nodes = [aws.ec2.Instance(name, launch_template=launch, tags=_tags(plan, name),
                                       volume_tags=_tags(plan, name), opts=child)
                      for name in plan.node_names]
        self.public_ips: list[Any] = [n.public_ip if plan.public_ip else None
                                      for n in self.nodes]
        if plan.options.get("eip_per_node"):
            # AWS cannot auto-assign a public IPv4 to a multi-NIC instance (dstack#3865).
            self.public_ips = []
            for name, node in zip(plan.node_names, self.nodes, strict=True):
                eip = aws.ec2.Eip(naming.child(name, "eip"), domain="vpc",
                                  tags=_tags(plan, naming.child(name, "eip")), opts=child)
                aws.ec2.EipAssociation(naming.child(name, "eip-assoc"),
                                       allocation_id=eip.allocation_id,
                                       network_interface_id=node.primary_network_interface_id,
                                       opts=child)
                self.public_ips.append(eip.public_ip)
        self.bastion_address: pulumi.Output[str] | None = None
        if plan.access is not None and plan.access.bastion is not None:
            self.bastion_address = self._bastion(plan, child)
        self.internal_ips = [n.private_ip for n in self.nodes]
        self.network_ids = {"main": self.network.vpc_id}
        self.network_names: dict[str, pulumi.Input[str]] = {
            "main": net_plan.existing or net_plan.name}
        self.subnet_ids = dict(self.network.subnet_ids)
        self.register_outputs({"nodes": [n.id for n in self.nodes],
                               "internal_ips": self.internal_ips,
                               "networks": self.network_ids,
                               DIGEST_OUTPUT: input_digest(plan)})

    def _key(self, plan: FleetPlan) -> pulumi.Input[str] | None:
        access = plan.access
        if access is None or access.method == "ssm":
            return None
        if access.key_name:
            return access.key_name
        assert access.key_pair is not None
        return key_pair(access.key_pair, public_key(access.public_key, f"fleet '{plan.name}'"),
                        self.get_provider("aws:ec2/keyPair:KeyPair"))

    def _ssm(self, plan: FleetPlan, child: pulumi.ResourceOptions) -> pulumi.Output[str]:
        """An instance profile with AmazonSSMManagedInstanceCore: Session Manager reaches
        the private nodes through the NAT, and no port 22 is opened."""
        name = naming.child(plan.name, "ssm")
        role = aws.iam.Role(
            naming.child(name, "role"), assume_role_policy=SSM_TRUST,
            description=f"gpufleet: Session Manager access to fleet {plan.name}",
            tags=_tags(plan, naming.child(name, "role")), opts=child)
        aws.iam.RolePolicyAttachment(naming.child(name, "core"), role=role.name,
                                     policy_arn=SSM_CORE_POLICY, opts=child)
        profile = aws.iam.InstanceProfile(naming.child(name, "profile"), role=role.name,
                                          tags=_tags(plan, naming.child(name, "profile")),
                                          opts=child)
        return profile.name

    def _bastion(self, plan: FleetPlan, child: pulumi.ResourceOptions) -> pulumi.Output[str]:
        """A small instance in the public subnet with an Elastic IP; its security group
        admits SSH from ssh_cidrs only, and the nodes' group admits SSH only from it."""
        assert plan.access is not None and plan.access.bastion is not None
        b = plan.access.bastion
        assert self.network.bastion_sg is not None
        owner, name_pattern = b.image.split("/", 1)
        ami = aws.ec2.get_ami_output(most_recent=True, owners=[owner],
                                     filters=_ami_filters(name_pattern),
                                     opts=pulumi.InvokeOptions(parent=self))
        host = aws.ec2.Instance(
            b.name, ami=ami.id, instance_type=b.instance_type,
            subnet_id=self.network.subnet_ids[b.subnet],
            vpc_security_group_ids=[self.network.bastion_sg.id], key_name=self.key_name,
            metadata_options=aws.ec2.InstanceMetadataOptionsArgs(
                http_endpoint="enabled", http_tokens="required", http_put_response_hop_limit=1),
            root_block_device=aws.ec2.InstanceRootBlockDeviceArgs(
                encrypted=True, volume_type="gp3", volume_size=8),
            availability_zone=self.network.zone, tags=_tags(plan, b.name),
            volume_tags=_tags(plan, b.name), opts=child)
        eip = aws.ec2.Eip(b.address_name, domain="vpc", instance=host.id,
                          tags=_tags(plan, b.address_name), opts=child)
        return eip.public_ip

    def _template(self, plan: FleetPlan, ami: pulumi.Output[str],
                  placement: aws.ec2.PlacementGroup | None,
                  child: pulumi.ResourceOptions) -> aws.ec2.LaunchTemplate:
        sg = self.network.sg.id
        nics = [aws.ec2.LaunchTemplateNetworkInterfaceArgs(
            network_card_index=nic.card, device_index=nic.device,
            subnet_id=self.network.subnet_ids[nic.subnet], security_groups=[sg],
            delete_on_termination="true",
            interface_type=nic.nic_type if nic.nic_type != "interface" else None,
            associate_public_ip_address="true" if nic.public_ip and len(plan.nics) == 1
            else None) for nic in plan.nics]
        market = plan.options.get("market")
        market_options = None
        if market == "spot":
            market_options = aws.ec2.LaunchTemplateInstanceMarketOptionsArgs(
                market_type="spot",
                spot_options=aws.ec2.LaunchTemplateInstanceMarketOptionsSpotOptionsArgs(
                    spot_instance_type="one-time", instance_interruption_behavior="terminate",
                    max_price=f"{plan.max_price:g}" if plan.max_price is not None else None))
        elif market == "capacity-block":
            market_options = aws.ec2.LaunchTemplateInstanceMarketOptionsArgs(
                market_type="capacity-block")
        reservation = aws.ec2.LaunchTemplateCapacityReservationSpecificationArgs(
            capacity_reservation_target=aws.ec2
            .LaunchTemplateCapacityReservationSpecificationCapacityReservationTargetArgs(
                capacity_reservation_id=plan.reservation)) if plan.reservation else None
        profile_name: pulumi.Input[str] | None = \
            str(plan.options["iam_instance_profile"]) \
            if plan.options.get("iam_instance_profile") else self.instance_profile
        name = str(plan.options["launch_template"])
        return aws.ec2.LaunchTemplate(
            name, image_id=ami, instance_type=plan.instance_type, network_interfaces=nics,
            metadata_options=aws.ec2.LaunchTemplateMetadataOptionsArgs(
                http_endpoint="enabled", http_tokens="required", http_put_response_hop_limit=2),
            block_device_mappings=[aws.ec2.LaunchTemplateBlockDeviceMappingArgs(
                device_name="/dev/sda1", ebs=aws.ec2.LaunchTemplateBlockDeviceMappingEbsArgs(
                    volume_size=plan.disk_gib, volume_type=plan.disk_type, encrypted="true",
                    delete_on_termination="true"))],
            tag_specifications=[
                aws.ec2.LaunchTemplateTagSpecificationArgs(resource_type=kind,
                                                           tags=dict(plan.labels))
                for kind in ("instance", "network-interface")],
            instance_market_options=market_options,
            capacity_reservation_specification=reservation,
            placement=aws.ec2.LaunchTemplatePlacementArgs(
                group_name=placement.name if placement is not None else None,
                availability_zone=self.network.zone),
            iam_instance_profile=aws.ec2.LaunchTemplateIamInstanceProfileArgs(
                name=profile_name) if profile_name is not None else None,
            key_name=self.key_name,
            tags=_tags(plan, name), update_default_version=True, opts=child)


def _vpc_zone_filters(vpc_and_zone: list[str]) -> list[aws.ec2.GetSubnetsFilterArgs]:
    vpc_id, zone = vpc_and_zone
    return [aws.ec2.GetSubnetsFilterArgs(name="vpc-id", values=[vpc_id]),
            aws.ec2.GetSubnetsFilterArgs(name="availability-zone", values=[zone])]


def _ami_filters(name_pattern: str) -> list[aws.ec2.GetAmiFilterArgs]:
    return [aws.ec2.GetAmiFilterArgs(name="name", values=[name_pattern]),
            aws.ec2.GetAmiFilterArgs(name="architecture", values=["x86_64"])]


SSM_CORE_POLICY = "arn:aws:iam::aws:policy/AmazonSSMManagedInstanceCore"
SSM_TRUST = ('{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Principal":'
             '{"Service":"ec2.amazonaws.com"},"Action":"sts:AssumeRole"}]}')

# One key pair per (provider, name): shared by every fleet of the region. A top-level
# resource, so removing one fleet never touches it.
_KEYS: weakref.WeakKeyDictionary[pulumi.ProviderResource, dict[str, pulumi.Output[str]]] = \
    weakref.WeakKeyDictionary()


def key_pair(name: str, key: str, prov: pulumi.ProviderResource | None) -> pulumi.Output[str]:
    assert prov is not None
    known = _KEYS.setdefault(prov, {})
    if name not in known:
        pair = aws.ec2.KeyPair(name, public_key=key, tags={"managed-by": "gpufleet",
                                                           "Name": name},
                               opts=pulumi.ResourceOptions(provider=prov))
        known[name] = pair.key_name
    return known[name]


def emit(plan: FleetPlan, prov: pulumi.ProviderResource) -> Fleet:
    return Fleet(plan, pulumi.ResourceOptions(providers={"aws": prov}))


class Gateway(pulumi.ComponentResource):
    """A gateway: network, one Elastic IP (or fixed private ENI) per replica as its own
    protected resource, the instances, an ALB for ACM, and the `*.<domain>` record."""

    def __init__(self, plan: GatewayPlan, opts: pulumi.ResourceOptions) -> None:
        super().__init__("gpufleet:aws:Gateway", plan.name, None, opts)
        child = pulumi.ResourceOptions(parent=self)
        keep = pulumi.ResourceOptions(parent=self, protect=plan.protect_address)
        self.network = Network(plan.network, plan, child)
        subnets = [self.network.subnet_ids[s.name] for s in plan.network.subnets
                   if s.public == plan.public][:2]
        user, image = plan.image.split("/", 1)
        ami = aws.ec2.get_ami_output(most_recent=True, owners=[user],
                                     filters=[aws.ec2.GetAmiFilterArgs(name="name",
                                                                       values=[image])],
                                     opts=pulumi.InvokeOptions(parent=self))
        sg = self.network.sg.id
        self.addresses: list[pulumi.Output[str]] = []
        self.instances = []
        if plan.load_balancer:
            self._behind_load_balancer(plan, ami.id, sg, child)
        addressed = [] if plan.load_balancer else list(zip(plan.address_names,
                                                            plan.instance_names, strict=True))
        for i, (addr, vm) in enumerate(addressed):
            subnet = subnets[i % len(subnets)]
            if plan.public:
                eip = aws.ec2.Eip(addr, domain="vpc", tags=_tags(plan, addr), opts=keep)
                inst = _gateway_vm(vm, plan, ami.id, child, subnet_id=subnet,
                                   vpc_security_group_ids=[sg])
                aws.ec2.EipAssociation(naming.child(addr, "assoc"),
                                       allocation_id=eip.allocation_id, instance_id=inst.id,
                                       opts=child)
                self.addresses.append(eip.public_ip)
            else:
                eni = aws.ec2.NetworkInterface(addr, subnet_id=subnet, security_groups=[sg],
                                               tags=_tags(plan, addr), opts=keep)
                inst = _gateway_vm(vm, plan, ami.id, child, network_interfaces=[
                    aws.ec2.InstanceNetworkInterfaceArgs(network_interface_id=eni.id,
                                                         device_index=0)])
                self.addresses.append(eni.private_ip)
            self.instances.append(inst)
        self.alb = None
        if plan.load_balancer:
            assert self.network.alb_sg is not None
            self.alb = self._load_balancer(plan, subnets, self.network.alb_sg.id, child)
        if plan.record is not None:
            self._record(plan, plan.record)
        self.register_outputs({"addresses": self.addresses,
                               "record": plan.record.fqdn if plan.record else None,
                               DIGEST_OUTPUT: input_digest(plan)})

    def _behind_load_balancer(self, plan: GatewayPlan, ami: pulumi.Output[str],
                              sg: pulumi.Output[str], child: pulumi.ResourceOptions) -> None:
        """ACM: TLS ends at the ALB; the instances get no address of their own and sit in
        private subnets (egress through the NAT), reachable on port 80 from the ALB only."""
        private = [self.network.subnet_ids[s.name] for s in plan.network.subnets
                   if not s.public][:2]
        for i, vm in enumerate(plan.instance_names):
            self.instances.append(_gateway_vm(vm, plan, ami, child,
                                              subnet_id=private[i % len(private)],
                                              vpc_security_group_ids=[sg]))

    def _load_balancer(self, plan: GatewayPlan, subnets: list[pulumi.Output[str]],
                       sg: pulumi.Output[str],
                       child: pulumi.ResourceOptions) -> aws.lb.LoadBalancer:
        assert plan.load_balancer is not None
        alb = aws.lb.LoadBalancer(plan.load_balancer, load_balancer_type="application",
                                  internal=not plan.public, subnets=subnets,
                                  security_groups=[sg], tags=_tags(plan, plan.load_balancer),
                                  opts=child)
        tg = aws.lb.TargetGroup(naming.child(plan.name, "tg"), port=80, protocol="HTTP",
                                target_type="instance", vpc_id=self.network.vpc_id,
                                tags=_tags(plan, naming.child(plan.name, "tg")), opts=child)
        for vm, inst in zip(plan.instance_names, self.instances, strict=True):
            aws.lb.TargetGroupAttachment(naming.child(vm, "tg"), target_group_arn=tg.arn,
                                         target_id=inst.id, port=80, opts=child)
        aws.lb.Listener(naming.child(plan.name, "https"), load_balancer_arn=alb.arn, port=443,
                        protocol="HTTPS", certificate_arn=plan.certificate_arn,
                        ssl_policy="ELBSecurityPolicy-TLS13-1-2-2021-06",
                        default_actions=[aws.lb.ListenerDefaultActionArgs(
                            type="forward", target_group_arn=tg.arn)],
                        opts=child)
        aws.lb.Listener(naming.child(plan.name, "http"), load_balancer_arn=alb.arn, port=80,
                        protocol="HTTP", default_actions=[aws.lb.ListenerDefaultActionArgs(
                            type="redirect", redirect=aws.lb.ListenerDefaultActionRedirectArgs(
                                port="443", protocol="HTTPS", status_code="HTTP_301"))],
                        opts=child)
        return alb

    def _record(self, plan: GatewayPlan, rec: DnsRecordPlan) -> None:
        opts = pulumi.ResourceOptions(parent=self, delete_before_replace=True)
        zone_id: pulumi.Output[str]
        if rec.create_zone:
            vpcs = [aws.route53.ZoneVpcArgs(vpc_id=self.network.vpc_id)] if rec.private \
                else None
            zone = aws.route53.Zone(naming.child(plan.name, "zone"), name=rec.zone, vpcs=vpcs,
                                    tags=_tags(plan, rec.zone),
                                    opts=pulumi.ResourceOptions(parent=self, protect=True))
            zone_id = zone.zone_id
            opts = pulumi.ResourceOptions.merge(opts, pulumi.ResourceOptions(deleted_with=zone))
        else:
            zone_id = aws.route53.get_zone_output(name=rec.zone, private_zone=rec.private,
                                                  opts=pulumi.InvokeOptions(parent=self)).zone_id
        if rec.record_type == "ALIAS" and self.alb is not None:
            aws.route53.Record(rec.name, zone_id=zone_id, name=rec.fqdn, type="A",
                               aliases=[aws.route53.RecordAliasArgs(
                                   name=self.alb.dns_name, zone_id=self.alb.zone_id,
                                   evaluate_target_health=True)], opts=opts)
            return
        aws.route53.Record(rec.name, zone_id=zone_id, name=rec.fqdn, type=rec.record_type,
                           ttl=rec.ttl, records=self.addresses, opts=opts)


def _gateway_vm(name: str, plan: GatewayPlan, ami: pulumi.Input[str],
                child: pulumi.ResourceOptions, *, subnet_id: pulumi.Input[str] | None = None,
                vpc_security_group_ids: list[pulumi.Output[str]] | None = None,
                network_interfaces: list[aws.ec2.InstanceNetworkInterfaceArgs] | None = None,
                ) -> aws.ec2.Instance:
    """A gateway instance: IMDSv2 only, an encrypted 20 GB gp3 root volume."""
    return aws.ec2.Instance(
        name, ami=ami, instance_type=plan.instance_type, subnet_id=subnet_id,
        vpc_security_group_ids=vpc_security_group_ids, network_interfaces=network_interfaces,
        metadata_options=aws.ec2.InstanceMetadataOptionsArgs(http_tokens="required"),
        root_block_device=aws.ec2.InstanceRootBlockDeviceArgs(
            volume_size=20, volume_type="gp3", encrypted=True),
        tags=_tags(plan, name), opts=child)


def emit_gateway(plan: GatewayPlan, prov: pulumi.ProviderResource) -> Gateway:
    return Gateway(plan, pulumi.ResourceOptions(providers={"aws": prov}))
