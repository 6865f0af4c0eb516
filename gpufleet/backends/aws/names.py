"""aws: the physical names the APIs accept for the resources gpufleet creates. Pure data.

The aws provider auto-names a named resource: the logical name, `-` and 7 random characters
(Pulumi docs, "Resource names and identity: autonaming"). Most EC2 resources gpufleet makes
carry a `Name` tag only; the names below are the API's own."""

from __future__ import annotations

import re
from types import MappingProxyType

from gpufleet.traits import NameBudget, NameRule, NetworkQuota

_ELB = "docs.aws.amazon.com/elasticloadbalancing/latest/APIReference/API_{}.html"
_LB_NAME = re.compile(r"[a-zA-Z0-9](?:[a-zA-Z0-9-]*[a-zA-Z0-9])?")
# a load balancer's name "must not begin with internal-" (CreateLoadBalancer, Name)
_ALB_NAME = re.compile(r"(?!internal-)[a-zA-Z0-9](?:[a-zA-Z0-9-]*[a-zA-Z0-9])?")

NAME_RULES = MappingProxyType({
    # "can have a maximum of 32 characters, must contain only alphanumeric characters or
    # hyphens, must not begin or end with a hyphen, and must not begin with internal-"
    "aws:lb/loadBalancer:LoadBalancer": NameRule(
        32, _ELB.format("CreateLoadBalancer"), _ALB_NAME, "name"),
    "aws:lb/targetGroup:TargetGroup": NameRule(
        32, _ELB.format("CreateTargetGroup"), _LB_NAME, "name"),
    "aws:ec2/launchTemplate:LaunchTemplate": NameRule(
        128, "docs.aws.amazon.com/AWSEC2/latest/APIReference/API_CreateLaunchTemplate.html",
        re.compile(r"[a-zA-Z0-9().\-/_]{3,}"), "name"),
    # "Constraints: Up to 255 characters in length. Cannot start with sg-."
    "aws:ec2/securityGroup:SecurityGroup": NameRule(
        255, "docs.aws.amazon.com/AWSEC2/latest/APIReference/API_CreateSecurityGroup.html",
        re.compile(r"(?!sg-).+", re.DOTALL), "name"),
    "aws:ec2/placementGroup:PlacementGroup": NameRule(
        255, "docs.aws.amazon.com/AWSEC2/latest/APIReference/API_CreatePlacementGroup.html",
        None, "name"),
})

# No budget: dstack names its gateways' load balancers itself (a short random name, "as LB
# and target groups have length limit of 32", dstack: core/backends/aws/compute.py), and
# the names gpufleet gives are Name tags, which take 256 characters.
NAME_BUDGETS: MappingProxyType[str, NameBudget] = MappingProxyType({})

_VPC_QUOTAS = "docs.aws.amazon.com/vpc/latest/userguide/amazon-vpc-limits.html"
# Default quotas per Region that each private fleet (a VPC, an internet gateway, a NAT
# gateway, the NAT gateway's and the bastion's Elastic IPs) and each gateway draw on;
# `live` is the Service Quotas service and quota code preflight reads.
NETWORK_QUOTAS = (
    NetworkQuota("VPCs per Region", "aws:ec2/vpc:Vpc", 5,
                 "Service Quotas code L-F678F1CE (Amazon VPC)", _VPC_QUOTAS,
                 live="vpc:L-F678F1CE"),
    NetworkQuota("Internet gateways per Region", "aws:ec2/internetGateway:InternetGateway", 5,
                 "Service Quotas code L-A4707A72 (Amazon VPC)", _VPC_QUOTAS,
                 live="vpc:L-A4707A72"),
    NetworkQuota("EC2-VPC Elastic IPs", "aws:ec2/eip:Eip", 5,
                 "Service Quotas code L-0263D0A3 (Amazon EC2)",
                 "docs.aws.amazon.com/AWSEC2/latest/UserGuide/elastic-ip-addresses-eip.html",
                 live="ec2:L-0263D0A3"),
    # per Availability Zone: the fleets' NAT gateways sit in their node subnets' zones,
    # which the same first-offering rule makes one zone for most fleets of a region
    NetworkQuota("NAT gateways per Availability Zone", "aws:ec2/natGateway:NatGateway", 5,
                 "Service Quotas code L-FE5A380F (Amazon VPC)", _VPC_QUOTAS,
                 live="vpc:L-FE5A380F"),
    NetworkQuota("VPC security groups per Region", "aws:ec2/securityGroup:SecurityGroup",
                 2500, "Service Quotas code L-E79EC296 (Amazon VPC)", _VPC_QUOTAS,
                 live="vpc:L-E79EC296"),
    # the backends file's buckets: account-wide, seen and raised from US East (N. Virginia)
    # only (preflight reads it there)
    NetworkQuota("General purpose buckets", "aws:s3/bucket:Bucket", 10000,
                 "Service Quotas code L-DC2B2D3D (Amazon S3), in US East (N. Virginia)",
                 "docs.aws.amazon.com/AmazonS3/latest/userguide/BucketRestrictions.html",
                 live="s3:L-DC2B2D3D", scope="global"),
)
