"""azure: the physical names Azure accepts for the resources gpufleet creates. Pure data.

Limits from "Naming rules and restrictions for Azure resources"
(learn.microsoft.com/azure/azure-resource-manager/management/resource-name-rules). The
azure-native provider auto-names a resource with the logical name and 8 random characters."""

from __future__ import annotations

from types import MappingProxyType

from gpufleet.traits import NameBudget, NameRule

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
    "gateway": NameBudget(53, "-vm", "azure-native:compute:VirtualMachine"),
})
