"""AWS fleets: a FleetDesign -> its network, cluster placement group, launch template with
the EFA layout, instances, Elastic IPs and way in (bastion, SSM or key pair). Makes no
decisions: every number and name comes from the plan (gpufleet.backends.aws.compile)."""

from __future__ import annotations

import weakref
from typing import Any

import pulumi
import pulumi_aws as aws

from gpufleet.backends.aws import BASTION
from gpufleet.backends.aws.compile import AwsOptions, bucket_policy
from gpufleet.compile import DIGEST_OUTPUT, FleetDesign, input_digest, naming, options_of

from ..access import boot_script_b64, public_key, server_script_b64
from ..registry import network_key
from ..renames import rename_options
from ..sampling import registered_nodes
from .filesystems import aws_filesystem
from .network import Network, tags


class Fleet(pulumi.ComponentResource):
    """A fleet: network, cluster placement group, launch template and one instance per node."""

    def __init__(self, plan: FleetDesign, opts: pulumi.ResourceOptions | None = None,
                 shared: dict[str, Any] | None = None) -> None:
        opts = pulumi.ResourceOptions.merge(opts, rename_options(plan.name, plan.previous_names))
        super().__init__("gpufleet:aws:Fleet", plan.name, None, opts)
        child = pulumi.ResourceOptions(parent=self)
        net_plan = plan.networks[0]
        shared = {} if shared is None else shared
        self.network = self._network(plan, shared, child)
        placement = self._placement(plan, child)
        options = options_of(plan, AwsOptions)
        ami = aws.ec2.get_ami_output(
            most_recent=True, owners=[options.ami_owner],
            filters=ami_filters(options.ami_name),
            opts=pulumi.InvokeOptions(parent=self))
        self.key_name = self._key(plan)
        ssm = plan.access is not None and plan.access.method == "ssm"
        self.instance_profile = self._profile(plan, child, ssm) if (ssm or plan.buckets) \
            and not options.iam_instance_profile else None
        template = self._template(plan, ami.id, placement, child)
        launch = aws.ec2.InstanceLaunchTemplateArgs(
            id=template.id, version=template.latest_version.apply(str))
        # The host setup script rides on each instance, not on the template: a template
        # edit makes a new version, which replaces every node. A node keeps the script it
        # booted with (EC2 runs user data once): changing it never touches running nodes.
        self.filesystems = {fs.name: shared[fs.name].target if fs.held_by else aws_filesystem(
            fs, plan, self.network.vpc_id, self.network.subnet_ids[plan.nics[0].subnet],
            self.network.zone, child, shared) for fs in plan.filesystems}
        script = boot_script_b64(plan, self.filesystems)
        node_opts = pulumi.ResourceOptions.merge(child, pulumi.ResourceOptions(
            ignore_changes=["userDataBase64"]))
        self.nodes = [aws.ec2.Instance(name, launch_template=launch, tags=tags(plan, name),
                                       volume_tags=tags(plan, name), user_data_base64=script,
                                       opts=node_opts)
                      for name in registered_nodes(plan)]
        self.public_ips: list[Any] = [n.public_ip if plan.public_ip else None
                                      for n in self.nodes]
        if options.eip_per_node:
            # AWS cannot auto-assign a public IPv4 to a multi-NIC instance (dstack#3865).
            self.public_ips = self._elastic_ips(plan, child)
        self.bastion_address: pulumi.Output[str] | None = None
        if plan.access is not None and plan.access.bastion is not None:
            self.bastion_address = self._bastion(plan, child)
        self.internal_ips = [n.private_ip for n in self.nodes]
        self.network_ids = {"main": self.network.vpc_id}
        self.network_names: dict[str, pulumi.Input[str]] = {
            "main": net_plan.existing or (f"{net_plan.joins}-vpc" if net_plan.joins
                                          else net_plan.name)}
        self.subnet_ids = dict(self.network.subnet_ids)
        self.register_outputs({"nodes": [n.id for n in self.nodes],
                               "internal_ips": self.internal_ips,
                               "networks": self.network_ids,
                               DIGEST_OUTPUT: input_digest(plan)})

    def _network(self, plan: FleetDesign, shared: dict[str, Any],
                 child: pulumi.ResourceOptions) -> Network:
        """The fleet's network; filesystems another fleet holds: peer with its network,
        routed to their subnets, and the way back in the filesystem's own route table."""
        net_plan = plan.networks[0]
        remote = [fs for fs in plan.filesystems if fs.held_by]
        network = Network(
            net_plan, plan, child,
            peers={fs.held_by: shared[fs.name].vpc_id for fs in remote if fs.held_by},
            peer_routes=[(str(fs.subnet), str(fs.held_by)) for fs in remote],
            joins=shared[network_key(net_plan.joins)] if net_plan.joins else None)
        shared[network_key(plan.name)] = network  # fleets may join it (`network`)
        for fs in remote:
            aws.ec2.Route(naming.child(plan.name, f"fs-{fs.name}-return"),
                          route_table_id=shared[fs.name].route_table_id,
                          destination_cidr_block=net_plan.cidr,
                          vpc_peering_connection_id=network.peerings[str(fs.held_by)].id,
                          opts=child)
        return network

    @staticmethod
    def _placement(plan: FleetDesign, child: pulumi.ResourceOptions) -> pulumi.Input[str] | None:
        if plan.placement is not None and plan.placement.existing:
            return plan.placement.existing  # a Capacity Block's own group
        if plan.placement is not None:
            return aws.ec2.PlacementGroup(plan.placement.name, strategy="cluster",
                                          tags=tags(plan, plan.placement.name),
                                          opts=child).name
        return None

    def _elastic_ips(self, plan: FleetDesign, child: pulumi.ResourceOptions) -> list[Any]:
        """An Elastic IP on each node's primary interface."""
        out: list[Any] = []
        for name, node in zip(registered_nodes(plan), self.nodes, strict=True):
            eip = aws.ec2.Eip(naming.child(name, "eip"), domain="vpc",
                              tags=tags(plan, naming.child(name, "eip")), opts=child)
            aws.ec2.EipAssociation(naming.child(name, "eip-assoc"),
                                   allocation_id=eip.allocation_id,
                                   network_interface_id=node.primary_network_interface_id,
                                   opts=child)
            out.append(eip.public_ip)
        return out

    def _key(self, plan: FleetDesign) -> pulumi.Input[str] | None:
        access = plan.access
        if access is None or access.method == "ssm":
            return None
        if access.key_name:
            return access.key_name
        assert access.key_pair is not None
        return key_pair(access.key_pair, public_key(access.public_key, f"fleet '{plan.name}'"),
                        self.get_provider("aws:ec2/keyPair:KeyPair"))

    def _profile(self, plan: FleetDesign, child: pulumi.ResourceOptions, ssm: bool
                 ) -> pulumi.Output[str]:
        """The nodes' instance profile: AmazonSSMManagedInstanceCore where Session Manager
        reaches the private nodes (no port 22 opened), and the access to the buckets they
        mount (backends.aws.compile.bucket_policy), nothing else."""
        name = naming.child(plan.name, "ssm" if ssm else "nodes")
        role = aws.iam.Role(
            naming.child(name, "role"), assume_role_policy=SSM_TRUST,
            description=f"gpufleet: the nodes of fleet {plan.name}" if not ssm else
            f"gpufleet: Session Manager access to fleet {plan.name}",
            tags=tags(plan, naming.child(name, "role")), opts=child)
        if ssm:
            aws.iam.RolePolicyAttachment(naming.child(name, "core"), role=role.name,
                                         policy_arn=SSM_CORE_POLICY, opts=child)
        if plan.buckets:
            aws.iam.RolePolicy(naming.child(plan.name, "buckets"), role=role.id,
                               policy=bucket_policy(plan.buckets), opts=child)
        profile = aws.iam.InstanceProfile(naming.child(name, "profile"), role=role.name,
                                          tags=tags(plan, naming.child(name, "profile")),
                                          opts=child)
        return profile.name

    def _bastion(self, plan: FleetDesign, child: pulumi.ResourceOptions) -> pulumi.Output[str]:
        """A small instance in the public subnet with an Elastic IP; its security group
        admits SSH from ssh_cidrs only, and the nodes' group admits SSH only from it."""
        assert plan.access is not None and plan.access.bastion is not None
        b = plan.access.bastion
        assert self.network.bastion_sg is not None
        owner, name_pattern = b.image.split("/", 1)
        ami = aws.ec2.get_ami_output(most_recent=True, owners=[owner],
                                     filters=ami_filters(name_pattern),
                                     opts=pulumi.InvokeOptions(parent=self))
        host = aws.ec2.Instance(
            b.name, ami=ami.id, instance_type=b.instance_type,
            subnet_id=self.network.subnet_ids[b.subnet],
            vpc_security_group_ids=[self.network.bastion_sg.id], key_name=self.key_name,
            metadata_options=aws.ec2.InstanceMetadataOptionsArgs(
                http_endpoint="enabled", http_tokens="required", http_put_response_hop_limit=1),
            root_block_device=aws.ec2.InstanceRootBlockDeviceArgs(
                encrypted=True, volume_type=BASTION.disk_type,
                volume_size=BASTION.disk_gib),
            availability_zone=self.network.zone, tags=tags(plan, b.name),
            volume_tags=tags(plan, b.name),
            # control_plane: the dstack server; a new script makes a new bastion (EC2 runs
            # user data once), and the Elastic IP moves to it
            user_data_base64=server_script_b64(b), user_data_replace_on_change=True,
            opts=child)
        eip = aws.ec2.Eip(b.address_name, domain="vpc", instance=host.id,
                          tags=tags(plan, b.address_name), opts=child)
        return eip.public_ip

    def _template(self, plan: FleetDesign, ami: pulumi.Output[str],
                  placement: pulumi.Input[str] | None,
                  child: pulumi.ResourceOptions) -> aws.ec2.LaunchTemplate:
        sg = self.network.sg.id
        nics = [aws.ec2.LaunchTemplateNetworkInterfaceArgs(
            network_card_index=nic.card, device_index=nic.device,
            subnet_id=self.network.subnet_ids[nic.subnet], security_groups=[sg],
            delete_on_termination="true",
            interface_type=nic.nic_type if nic.nic_type != "interface" else None,
            associate_public_ip_address="true" if nic.public_ip and len(plan.nics) == 1
            else None) for nic in plan.nics]
        options = options_of(plan, AwsOptions)
        market = options.market
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
            options.iam_instance_profile or self.instance_profile
        name = options.launch_template
        # No tag specifications: a tag edit would make a new template version, and a new
        # version replaces every node launched from it ("Updating Launch Template
        # specification will force new instance", hashicorp/terraform-provider-aws#10807).
        # The instances and their volumes are tagged on the instance resource, in place.
        return aws.ec2.LaunchTemplate(
            name, image_id=ami, instance_type=plan.instance_type, network_interfaces=nics,
            metadata_options=aws.ec2.LaunchTemplateMetadataOptionsArgs(
                http_endpoint="enabled", http_tokens="required", http_put_response_hop_limit=2),
            block_device_mappings=[aws.ec2.LaunchTemplateBlockDeviceMappingArgs(
                device_name="/dev/sda1", ebs=aws.ec2.LaunchTemplateBlockDeviceMappingEbsArgs(
                    volume_size=plan.disk_gib, volume_type=plan.disk_type, encrypted="true",
                    delete_on_termination="true"))],
            instance_market_options=market_options,
            capacity_reservation_specification=reservation,
            placement=aws.ec2.LaunchTemplatePlacementArgs(
                group_name=placement,
                availability_zone=self.network.zone),
            iam_instance_profile=aws.ec2.LaunchTemplateIamInstanceProfileArgs(
                name=profile_name) if profile_name is not None else None,
            key_name=self.key_name,
            tags=tags(plan, name), update_default_version=True, opts=child)


def ami_filters(name_pattern: str) -> list[aws.ec2.GetAmiFilterArgs]:
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
