"""aws: what the backend can do and the tables gpufleet keeps for it. Pure data."""

from __future__ import annotations

import re
from types import MappingProxyType

from gpufleet.backends.aws import buckets as _buckets
from gpufleet.backends.aws import names as _names
from gpufleet.backends.aws import quotas as _quotas
from gpufleet.codes import B012, C012, C025, G005, G015, G016
from gpufleet.traits import ALL_FEATURES as _ALL
from gpufleet.traits import (
    AccessWay,
    BackendTraits,
    CapacityCode,
    FilesystemService,
    ImageFamily,
    LustreTier,
    Machine,
    OwnFeature,
    ResourceKind,
    ZoneModel,
)
from gpufleet.traits import kinds as _kinds

# Utility machines: the smallest general-purpose x86 size with Ubuntu 22.04 (Canonical's
# owner id); disks gp3 (docs.aws.amazon.com/ebs/latest/userguide/general-purpose.html).
_UBUNTU = "099720109477/ubuntu/images/hvm-ssd/ubuntu-jammy-22.04-amd64-server-*"
_EC2_ERRORS = "docs.aws.amazon.com/AWSEC2/latest/APIReference/errors-overview.html"


def _family(instance_type: str) -> str:
    """m7i.large -> m7i."""
    return instance_type.split(".")[0]


BASTION = Machine("t3.nano", _UBUNTU, 8, "gp3")
# dstack's gateway instance, which dstack creates at `dstack apply` (priced in the bill):
# t3.micro with a 10 GB root disk (dstack 0.22.5: core/backends/aws/compute.py,
# create_gateway_replica, DEFAULT_GATEWAY_INSTANCE_TYPE and disk_size=10)
GATEWAY = Machine("t3.micro", _UBUNTU, 10, "gp3")

# What only AWS's own services give: ACM certificates on a gateway's load balancer (dstack's
# text refusing them elsewhere), Session Manager (SSM) access with no port 22, and an existing
# EC2 key pair for the nodes.
OWN_FEATURES = (
    OwnFeature("acm", "certificate", "ACM certificates",
               "acm certificate type is supported for aws backend only"),
    OwnFeature("ssm", "access", "Session Manager access", "Session Manager is an AWS service",
               AccessWay("Session Manager (no port 22)", "through AWS Systems Manager Session "
                         "Manager (`aws ssm start-session`)", "no SSH key (Session Manager)")),
    OwnFeature("key_name", "access", "existing key pairs (key_name)",
               "key pairs are an EC2 resource"),
)

TRAITS = BackendTraits(
    "aws", _ALL, MappingProxyType({}),
    re.compile(r"[a-z]{2}(-gov|-iso[a-z]?)?-[a-z]+-[0-9]{1,2}"), "us-east-1", "ubuntu",
    zones=ZoneModel.PER_REGION,
    zone_pattern=re.compile(r"^([a-z]{2}(?:-gov)?-[a-z]+-\d+)[a-z]$"),
    own_features=OWN_FEATURES,
    code_notes=MappingProxyType({
        G005: "acm (AWS Certificate Manager)", G015: "an ACM certificate's full ARN",
        G016: "an ALB with acm or no certificate",
        C012: "Session Manager (`access: {ssm: true}`)",
        C025: "4 joining fleets (CIDR blocks per VPC)",
        B012: "capacity-reservation or capacity-block"}),
    node_types=("aws:ec2/instance:Instance",),
    # a private gateway's fixed address: an ENI under the gateway component
    gateway_address_types=("aws:ec2/networkInterface:NetworkInterface",),
    billed=MappingProxyType({
        "aws:ec2/instance:Instance": "instance", "aws:ec2/eip:Eip": "address",
        "aws:ec2/natGateway:NatGateway": "nat", "aws:lb/loadBalancer:LoadBalancer": "load_balancer",
        "aws:route53/zone:Zone": "dns_zone", "aws:ebs/volume:Volume": "volume",  # dstack volumes
        "aws:fsx/lustreFileSystem:LustreFileSystem": "filesystem",
        "aws:efs/fileSystem:FileSystem": "filesystem"}),
    resources=MappingProxyType({
        "aws:ec2/vpc:Vpc": ResourceKind(frozenset({"cidrBlock"}), "network"),
        "aws:ec2/subnet:Subnet": ResourceKind(
            frozenset({"cidrBlock", "availabilityZone", "vpcId"}), "network"),
        "aws:ec2/instance:Instance": ResourceKind(
            frozenset({"ami", "availabilityZone", "subnetId", "launchTemplate",
                       "networkInterfaces", "keyName"}), "instance"),
        "aws:ec2/securityGroup:SecurityGroup": ResourceKind(
            frozenset({"vpcId", "name", "description"})),
        "aws:ec2/placementGroup:PlacementGroup": ResourceKind(frozenset({"strategy", "name"})),
        # An instance's launch template (id or version) is replace-on-change: "Updating Launch
        # Template specification will force new instance" (hashicorp/terraform-provider-aws
        # #10807), so a new template version replaces the instances launched from it.
        "aws:ec2/launchTemplate:LaunchTemplate": ResourceKind(versioned=True),
        "aws:ec2/eip:Eip": ResourceKind(frozenset({"domain"}), "address"),
        "aws:route53/record:Record": ResourceKind(frozenset({"name", "type", "zoneId"}), "dns"),
        "aws:ec2/routeTable:RouteTable": ResourceKind(frozenset({"vpcId"})),
        "aws:ec2/routeTableAssociation:RouteTableAssociation": ResourceKind(
            frozenset({"subnetId", "gatewayId"})),
        "aws:ec2/natGateway:NatGateway": ResourceKind(
            frozenset({"subnetId", "allocationId", "connectivityType"})),
        "aws:ec2/eipAssociation:EipAssociation": ResourceKind(
            frozenset({"allocationId", "instanceId", "networkInterfaceId",
                       "privateIpAddress"})),
        "aws:ec2/networkInterface:NetworkInterface": ResourceKind(frozenset({"subnetId"})),
        "aws:ec2/keyPair:KeyPair": ResourceKind(frozenset({"publicKey", "keyName"})),
        "aws:lb/targetGroup:TargetGroup": ResourceKind(
            frozenset({"vpcId", "port", "protocol", "targetType"})),
        "aws:lb/targetGroupAttachment:TargetGroupAttachment": ResourceKind(
            frozenset({"targetGroupArn", "targetId", "port"})),
        "aws:ec2/vpcPeeringConnection:VpcPeeringConnection": ResourceKind(
            frozenset({"vpcId", "peerVpcId", "peerOwnerId", "peerRegion"}), "network"),
        "aws:ec2/route:Route": ResourceKind(
            frozenset({"routeTableId", "destinationCidrBlock"})),
        # storage: replacing one loses its data (the providers' ForceNew arguments)
        "aws:fsx/lustreFileSystem:LustreFileSystem": ResourceKind(
            frozenset({"subnetIds", "deploymentType", "storageType", "securityGroupIds",
                       "fileSystemTypeVersion", "kmsKeyId"}), "storage"),
        "aws:efs/fileSystem:FileSystem": ResourceKind(
            frozenset({"encrypted", "performanceMode", "kmsKeyId", "creationToken",
                       "availabilityZoneName"}), "storage"),
        "aws:efs/mountTarget:MountTarget": ResourceKind(
            frozenset({"fileSystemId", "subnetId", "ipAddress"})),
        "aws:ebs/volume:Volume": ResourceKind(
            frozenset({"availabilityZone", "encrypted", "kmsKeyId", "snapshotId"}), "storage"),
        **_kinds(dns=("aws:route53/zone:Zone",)),
    }),
    bastion=BASTION,
    gateway=GATEWAY,
    server_size="t3.medium", address_pool="10.0.0.0/8", gpu_image=ImageFamily(
        "aws-dlami", True, "NVIDIA driver, CUDA, Docker, NVIDIA Container Toolkit, EFA (AWS "
        "Deep Learning Base OSS Nvidia Driver GPU AMI release notes)"),
    volume_disk_type="gp3",
    # gp3's baseline, 125 MiB/s, with nothing provisioned above it:
    # docs.aws.amazon.com/ebs/latest/userguide/general-purpose.html#gp3-performance
    volume_throughput=MappingProxyType({"gp3": (131.1, "gp3's baseline 125 MiB/s "
                                                "(docs.aws.amazon.com/ebs/latest/userguide/"
                                                "general-purpose.html)")}),
    # FSx for Lustre PERSISTENT_2 SSD: 1.2 TiB, then 2.4 TiB steps at every tier; no maximum
    # but the account's quota (docs.aws.amazon.com/fsx/latest/LustreGuide/
    # managing-storage-capacity.html)
    lustre_tiers=MappingProxyType({t: LustreTier(2400, smallest=1200)
                                   for t in (125, 250, 500, 1000)}),
    default_lustre_throughput=250, nfs_sizes=None,
    filesystems=MappingProxyType({
        # FSx sizes storage in 1.2 TiB steps of 1,200 GiB and its throughput per TiB of
        # that: 4,800 GiB at 250 MB/s per TiB is 1,200 MB/s
        # (docs.aws.amazon.com/fsx/latest/LustreGuide/managing-throughput-capacity.html)
        "lustre": FilesystemService("fsx-lustre", "FSx for Lustre (PERSISTENT_2 SSD)", True,
                                    range_prefix=None, gib_per_tib=1000,
                                    mount_options="defaults,_netdev,noatime,flock"),
        "nfs": FilesystemService(
            "efs", "EFS (elastic)", False, range_prefix=28,
            mount_options="nfsvers=4.1,rsize=1048576,wsize=1048576,hard,timeo=600,retrans=2,"
                          "noresvport,_netdev")}),
    filesystem_range_in_network=True, shared_filesystem_subnet=True,
    shared_filesystem_way="through a VPC peering routed to its subnet {subnet} only",
    # the host names Elastic Load Balancing gives load balancers (Route 53 aliases them:
    # docs.aws.amazon.com/Route53/latest/DeveloperGuide/routing-to-elb-load-balancer.html)
    dns_alias_suffix=".elb.amazonaws.com",
    lb_certificate="acm", lb_certificate_hint=", or `{type: acm, arn: <arn>}` (AWS ACM)",
    load_balancer_title="ALB {name} (two AZs)",
    reservation_use=MappingProxyType({
        "capacity-block": "the Capacity Block (market type capacity-block)",
        None: "a Capacity Reservation targeted by the launch template"}),
    reservation_zone_hint="set `availability_zones: [{zone}]` on the fleet, or declare the "
                          "reservation with its zone in the backends file",
    zone_at_deploy="chosen at `pulumi up`: the first Availability Zone of {region} (by name) "
                   "that offers {instance_type}; Local and Wavelength zones are skipped",
    address_kinds=MappingProxyType({True: "Elastic IP", False: "fixed private ENI"}),
    pulumi_package="aws",
    reservation_kinds=("capacity-reservation", "capacity-block"),
    capacity_errors=(
        CapacityCode("aws", "InsufficientInstanceCapacity", _EC2_ERRORS),
        CapacityCode("aws", "InsufficientCapacityOnHost", _EC2_ERRORS),
        CapacityCode("aws", "InsufficientReservedInstanceCapacity", _EC2_ERRORS),
        CapacityCode("aws", "Unsupported", f"{_EC2_ERRORS} (the instance type is not offered "
                     "in the requested Availability Zone)"),
    ),
    # burstable families take no cluster placement group (docs.aws.amazon.com/AWSEC2/latest/
    # UserGuide/placement-strategies.html)
    no_cluster_families=("t2.", "t3.", "t3a."),
    family=_family,
    name_rules=_names.NAME_RULES, name_budgets=_names.NAME_BUDGETS,
    network_quotas=_names.NETWORK_QUOTAS,
    buckets=_buckets.BUCKETS, secret_store=_buckets.SECRETS,
    compute_quotas=_quotas.compute_quotas, quota_scope="account",
    quota_lag=("minutes when Service Quotas approves it on its own; days when AWS Support "
               "reviews it, as it often does for GPU families "
               "(docs.aws.amazon.com/servicequotas/latest/userguide/request-quota-"
               "increase.html); meanwhile keep the fleet at `nodes: 0`, or plan it on another "
               "offer"),
    # a VPC takes 5 IPv4 CIDR blocks by default (Service Quotas L-83CA0A9D, "IPv4 CIDR
    # blocks per VPC"; docs.aws.amazon.com/vpc/latest/userguide/amazon-vpc-limits.html):
    # its own and one per fleet that joins it
    shared_network_limit=4,
    offline_run_cost=35,  # pulumi-aws's ec2 modules, 2026-11-28
)
