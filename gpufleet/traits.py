"""What each backend can do, declared once: capabilities with the reason a missing one is
missing, region shapes and login defaults. Pure data, shared by every stage.

Modelled on dstack's compute mixins (``ComputeWithMultinodeSupport``,
``ComputeWithReservationSupport``, ``ComputeWithPrivateGatewaySupport``, ...): checks, offer
filters and messages ask ``supports(backend, Feature.X)`` instead of keeping their own lists
of backend names, so a new backend is one entry here plus its planner and components.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from types import MappingProxyType


class Feature(StrEnum):
    """A capability a backend has or lacks (the value is how messages name it)."""

    CLUSTER = "cluster placement"
    SPOT = "spot instances"
    RESERVATIONS = "reservations"
    CAPACITY_BLOCKS = "capacity blocks"
    GATEWAYS = "gateways"
    PRIVATE_GATEWAYS = "private gateways"
    GATEWAY_INSTANCE_TYPE = "a gateway instance_type"
    ACM_CERTIFICATES = "ACM certificates"
    GCP_CM_CERTIFICATES = "Certificate Manager certificates (gcp-cm)"
    GATEWAY_LOAD_BALANCER = "a gateway load balancer (`load_balancer: {type: alb}`)"
    IAP = "Identity-Aware Proxy access"
    SSM = "Session Manager access"
    KEY_PAIRS = "existing key pairs (key_name)"


@dataclass(frozen=True, slots=True)
class ResourceKind:
    """What change reports need to know of one Pulumi resource type gpufleet creates."""

    # Inputs whose change makes the provider replace the resource (curated from the
    # providers' ForceNew / replace-on-change properties).
    replaces: frozenset[str] = frozenset()
    # what the guards protect: address, dns, network, instance, storage (data lives there)
    category: str | None = None
    # Inputs that replace the resource when the resource feeding them is replaced (an Azure
    # NIC, VM or scale set cannot move to a subnet that is deleted and created again).
    replaced_with: frozenset[str] = frozenset()
    # An update gives it a new version that its dependents read (an EC2 launch template's
    # latest version), so they change with it.
    versioned: bool = False


def _kinds(**by_category: tuple[str, ...]) -> dict[str, ResourceKind]:
    return {t: ResourceKind(category=c) for c, types in by_category.items() for t in types}


@dataclass(frozen=True, slots=True)
class BackendTraits:
    """One backend's capabilities. ``unsupported`` gives the reason for each missing one
    (SkyPilot's idea: the reason travels with the refusal)."""

    name: str
    features: frozenset[Feature]
    unsupported: Mapping[Feature, str]
    region_pattern: re.Pattern[str]
    region_example: str
    default_user: str
    # Offer rows are per zone (GCP) rather than per region (AWS, Azure).
    zonal_offers: bool = False
    # Pulumi resource types of this backend's nodes (what a fleet's instances are).
    node_types: tuple[str, ...] = field(default=())
    resources: Mapping[str, ResourceKind] = field(default_factory=dict)

    def supports(self, feature: Feature) -> bool:
        return feature in self.features

    def why_not(self, feature: Feature) -> str:
        return self.unsupported.get(feature, f"{self.name} does not support {feature}")


_ALL = frozenset(Feature)

AWS = BackendTraits(
    "aws", _ALL - {Feature.IAP, Feature.GCP_CM_CERTIFICATES},
    MappingProxyType({Feature.IAP: "Identity-Aware Proxy is a Google Cloud service",
                      Feature.GCP_CM_CERTIFICATES: "gcp-cm certificate type is supported for "
                                                   "gcp backend only"}),
    re.compile(r"[a-z]{2}(-gov|-iso[a-z]?)?-[a-z]+-[0-9]{1,2}"), "us-east-1", "ubuntu",
    node_types=("aws:ec2/instance:Instance",),
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
    }))
GCP = BackendTraits(
    "gcp", _ALL - {Feature.ACM_CERTIFICATES, Feature.SSM, Feature.KEY_PAIRS,
                   Feature.CAPACITY_BLOCKS},
    MappingProxyType({
        Feature.ACM_CERTIFICATES: "acm certificate type is supported for aws backend only",
        Feature.SSM: "Session Manager is an AWS service",
        Feature.KEY_PAIRS: "key pairs are an EC2 resource",
        Feature.CAPACITY_BLOCKS: "Capacity Blocks for ML are an EC2 purchase option"}),
    re.compile(r"[a-z]+-[a-z]+[0-9]{1,2}"), "us-central1", "ubuntu", zonal_offers=True,
    node_types=("gcp:compute/instance:Instance",),
    resources=MappingProxyType({
        "gcp:compute/network:Network": ResourceKind(
            frozenset({"autoCreateSubnetworks", "networkProfile", "name", "project"}),
            "network"),
        "gcp:compute/subnetwork:Subnetwork": ResourceKind(
            frozenset({"ipCidrRange", "network", "region", "name", "project"}), "network"),
        "gcp:compute/instance:Instance": ResourceKind(
            frozenset({"zone", "bootDisk", "networkInterfaces", "reservationAffinity", "name",
                       "project"}), "instance"),
        "gcp:compute/firewall:Firewall": ResourceKind(
            frozenset({"network", "direction", "name", "project"})),
        "gcp:compute/resourcePolicy:ResourcePolicy": ResourceKind(
            frozenset({"groupPlacementPolicy", "region", "name", "project"})),
        "gcp:compute/address:Address": ResourceKind(
            frozenset({"addressType", "region", "subnetwork", "name"}), "address"),
        "gcp:dns/recordSet:RecordSet": ResourceKind(
            frozenset({"name", "type", "managedZone", "project"}), "dns"),
        "gcp:compute/router:Router": ResourceKind(frozenset({"network", "region", "name"})),
        "gcp:compute/routerNat:RouterNat": ResourceKind(frozenset({"router", "region", "name"})),
        "gcp:lustre/instance:Instance": ResourceKind(
            frozenset({"instanceId", "location", "network", "filesystem",
                       "perUnitStorageThroughput", "project"}), "storage"),
        "gcp:filestore/instance:Instance": ResourceKind(
            frozenset({"name", "location", "tier", "networks", "project"}), "storage"),
        "gcp:compute/disk:Disk": ResourceKind(
            frozenset({"zone", "name", "image", "snapshot", "project"}), "storage"),
        **_kinds(dns=("gcp:dns/managedZone:ManagedZone",)),
    }))
AZURE = BackendTraits(
    "azure", _ALL - {Feature.RESERVATIONS, Feature.CAPACITY_BLOCKS, Feature.PRIVATE_GATEWAYS,
                     Feature.GATEWAY_INSTANCE_TYPE, Feature.ACM_CERTIFICATES, Feature.IAP,
                     Feature.SSM, Feature.KEY_PAIRS, Feature.GCP_CM_CERTIFICATES,
                     Feature.GATEWAY_LOAD_BALANCER},
    MappingProxyType({
        Feature.RESERVATIONS: "dstack's azure backend takes no reservation; gpufleet joins "
                              "a capacity reservation group declared in the backends file",
        Feature.CAPACITY_BLOCKS: "Capacity Blocks for ML are an EC2 purchase option",
        Feature.PRIVATE_GATEWAYS: "dstack runs Azure gateways with a public IP only",
        Feature.GATEWAY_INSTANCE_TYPE: "Azure gateways always use Standard_B1ms",
        Feature.ACM_CERTIFICATES: "acm certificate type is supported for aws backend only",
        Feature.GCP_CM_CERTIFICATES: "gcp-cm certificate type is supported for gcp backend only",
        Feature.GATEWAY_LOAD_BALANCER: "dstack fronts gateways with a load balancer on aws and "
                                       "gcp only",
        Feature.IAP: "Identity-Aware Proxy is a Google Cloud service",
        Feature.SSM: "Session Manager is an AWS service",
        Feature.KEY_PAIRS: "key pairs are an EC2 resource"}),
    re.compile(r"[a-z]+[a-z0-9]*"), "eastus", "azureuser",
    node_types=("azure-native:compute:VirtualMachine",),
    resources=MappingProxyType({
        "azure-native:network:VirtualNetwork": ResourceKind(
            frozenset({"location", "resourceGroupName"}), "network"),
        "azure-native:network:Subnet": ResourceKind(
            frozenset({"addressPrefix", "virtualNetworkName", "resourceGroupName"}), "network"),
        "azure-native:compute:VirtualMachineScaleSet": ResourceKind(
            frozenset({"location", "singlePlacementGroup", "orchestrationMode",
                       "resourceGroupName"}), "instance",
            replaced_with=frozenset({"virtualMachineProfile"})),
        "azure-native:compute:VirtualMachine": ResourceKind(
            frozenset({"location", "resourceGroupName", "osProfile"}), "instance",
            replaced_with=frozenset({"networkProfile"})),
        "azure-native:network:NetworkInterface": ResourceKind(
            replaced_with=frozenset({"ipConfigurations"})),
        "azure-native:network:PublicIPAddress": ResourceKind(
            frozenset({"location", "sku", "resourceGroupName"}), "address"),
        "azure-native:dns:RecordSet": ResourceKind(
            frozenset({"zoneName", "relativeRecordSetName", "recordType",
                       "resourceGroupName"}), "dns"),
        "azure-native:storagecache:AmlFilesystem": ResourceKind(
            frozenset({"amlFilesystemName", "location", "resourceGroupName",
                       "filesystemSubnet", "sku", "zones"}), "storage"),
        "azure-native:storage:StorageAccount": ResourceKind(
            frozenset({"accountName", "location", "resourceGroupName"}), "storage"),
        "azure-native:storage:FileShare": ResourceKind(
            frozenset({"accountName", "shareName", "resourceGroupName", "enabledProtocols"}),
            "storage"),
        "azure-native:compute:Disk": ResourceKind(
            frozenset({"diskName", "location", "resourceGroupName", "zones"}), "storage"),
        **_kinds(dns=("azure-native:dns:Zone",)),
    }))

TRAITS_BY_NAME: Mapping[str, BackendTraits] = MappingProxyType(
    {t.name: t for t in (AWS, GCP, AZURE)})
# The backends gpufleet builds, in the order messages list them.
SUPPORTED_BACKENDS: tuple[str, ...] = ("aws", "gcp", "azure")


def supports(backend: str, feature: Feature) -> bool:
    """Whether gpufleet can build ``feature`` on ``backend`` (False for unknown backends)."""
    traits = TRAITS_BY_NAME.get(backend)
    return traits is not None and traits.supports(feature)


def backends_with(feature: Feature) -> tuple[str, ...]:
    return tuple(b for b in SUPPORTED_BACKENDS if TRAITS_BY_NAME[b].supports(feature))


def node_types() -> tuple[str, ...]:
    """Pulumi types of fleet nodes on every backend."""
    return tuple(t for b in SUPPORTED_BACKENDS for t in TRAITS_BY_NAME[b].node_types)


def resource_kinds() -> dict[str, ResourceKind]:
    """Every resource type of every backend, with its replacing inputs and category."""
    return {t: k for b in SUPPORTED_BACKENDS for t, k in TRAITS_BY_NAME[b].resources.items()}
