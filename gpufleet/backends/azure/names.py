"""azure: the physical names Azure accepts for the resources gpufleet creates. Pure data.

Limits from "Naming rules and restrictions for Azure resources"
(learn.microsoft.com/azure/azure-resource-manager/management/resource-name-rules). The
azure-native provider auto-names a resource with the logical name and 8 random characters."""

from __future__ import annotations

from types import MappingProxyType

from gpufleet.traits import NameBudget, NameRule, NetworkQuota

_DOCS = "learn.microsoft.com/azure/azure-resource-manager/management/resource-name-rules"

NAME_RULES = MappingProxyType({
    "azure-native:compute:VirtualMachine": NameRule(64, _DOCS, None, "vmName"),  # Linux
    "azure-native:compute:VirtualMachineScaleSet": NameRule(64, _DOCS, None, "vmScaleSetName"),
    "azure-native:network:VirtualNetwork": NameRule(64, _DOCS, None, "virtualNetworkName"),
    "azure-native:network:Subnet": NameRule(80, _DOCS, None, "subnetName"),
    "azure-native:network:NetworkInterface": NameRule(80, _DOCS, None, "networkInterfaceName"),
    "azure-native:network:NetworkSecurityGroup": NameRule(
        80, _DOCS, None, "networkSecurityGroupName"),
    "azure-native:network:PublicIPAddress": NameRule(80, _DOCS, None, "publicIpAddressName"),
    "azure-native:network:NatGateway": NameRule(80, _DOCS, None, "natGatewayName"),
    "azure-native:network:ApplicationSecurityGroup": NameRule(
        80, _DOCS, None, "applicationSecurityGroupName"),
})

NAME_BUDGETS = MappingProxyType({
    # 64 - 8 - len("-bastion"): the bastion VM (Linux VM names: 64)
    "fleet": NameBudget(48, "-bastion", "azure-native:compute:VirtualMachine"),
    # 64 - 8 - len("-net"): the gateway's VNet (dstack makes the gateway's VM itself)
    "gateway": NameBudget(52, "-net", "azure-native:network:VirtualNetwork"),
})

_LIMITS = ("learn.microsoft.com/azure/azure-resource-manager/management/"
           "azure-subscription-service-limits#networking-limits")
# The subscription's network quotas per region the stack's own resources draw on. Their
# defaults are not encoded (large, and set per subscription): preflight reads the limit and
# the use from Azure's network usages API (`live`: the usage's name; another provider's,
# as `Microsoft.Storage/NAME`).
NETWORK_QUOTAS = (
    NetworkQuota("Virtual networks", "azure-native:network:VirtualNetwork", None,
                 "a quota request in the portal (Networking)", _LIMITS,
                 live="VirtualNetworks"),
    NetworkQuota("Public IP addresses", "azure-native:network:PublicIPAddress", None,
                 "a quota request in the portal (Networking)", _LIMITS,
                 live="PublicIPAddresses"),
    NetworkQuota("Network security groups", "azure-native:network:NetworkSecurityGroup", None,
                 "a quota request in the portal (Networking)", _LIMITS,
                 live="NetworkSecurityGroups"),
    # storage accounts: a bucket's own, and Azure Files' (shared filesystems)
    NetworkQuota("Storage accounts per region", "azure-native:storage:StorageAccount", 250,
                 "a quota request in the portal (Storage)",
                 "learn.microsoft.com/azure/storage/common/scalability-targets-standard-"
                 "account", live="Microsoft.Storage/StorageAccounts"),
)
