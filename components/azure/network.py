"""The Azure network of a fleet or gateway: VNet, subnet(s) and NSG
(gpufleet.backends.azure.compile)."""

from __future__ import annotations

import pulumi
from pulumi_azure_native import authorization, network

from gpufleet.backends.azure.compile import AzureOptions
from gpufleet.compile import FleetDesign, NetworkDesign, naming, options_of

from .common import Owner

# NSG protocols by the plan's (Microsoft.Network securityRules: Tcp, Udp, Icmp, *)
PROTOCOLS = {"tcp": "Tcp", "udp": "Udp", "icmp": "Icmp"}


class Network(pulumi.ComponentResource):
    """VNet + subnet (created, or an existing subnet) and the fleet's NSG."""

    subnet_id: pulumi.Output[str]
    vnet_id: pulumi.Output[str]

    def __init__(self, net: NetworkDesign, plan: Owner, rg: pulumi.Output[str],
                 opts: pulumi.ResourceOptions) -> None:
        super().__init__("gpufleet:azure:Network", net.name, None, opts)
        child = pulumi.ResourceOptions(parent=self)
        invoke = pulumi.InvokeOptions(parent=self)
        access = plan.access if isinstance(plan, FleetDesign) else None
        self.bastion_asg: network.ApplicationSecurityGroup | None = None
        # The last change made to this VNet: Azure serialises changes to one VNet and answers
        # a second one in flight with AnotherOperationInProgress (pulumi-azure-native#903 and
        # #699: a dependsOn chain is the documented way round), so
        # later subnets and peerings of the VNet wait for it.
        self.last_change: list[pulumi.Resource] = []
        if access is not None and access.bastion is not None:
            # The nodes' NSG names the bastion by its application security group, so the rule
            # holds for any subnet, created or existing.
            asg = naming.child(access.bastion.name, "asg")
            self.bastion_asg = network.ApplicationSecurityGroup(
                asg, resource_group_name=rg, location=plan.region, tags=dict(plan.labels),
                opts=child)
        # a fleet's NSG (on its NICs); a gateway's network has none: dstack puts its own on
        # the gateway VM's NIC
        self._nsg = network.NetworkSecurityGroup(
            options_of(plan, AzureOptions).nsg, resource_group_name=rg, location=plan.region,
            security_rules=self._rules(net), tags=dict(plan.labels), opts=child) \
            if isinstance(plan, FleetDesign) else None
        subnet = net.subnets[0]
        if net.existing and subnet.existing not in (None, "lookup"):
            self.subnet_id = self._subnet_by_path(str(subnet.existing), plan, invoke)
            self.vnet_id = self.subnet_id.apply(lambda i: i.split("/subnets/")[0])
            self.vnet_name = pulumi.Output.from_input(str(subnet.existing).split("/")[1])
        elif net.existing:
            vnet_rg, vnet_name = str(net.existing).split("/")
            found = network.get_virtual_network_output(resource_group_name=vnet_rg,
                                                       virtual_network_name=vnet_name,
                                                       opts=invoke)
            self.vnet_id = found.id.apply(str)
            self.vnet_name = pulumi.Output.from_input(vnet_name)
            self.subnet_id = found.subnets.apply(
                lambda subs: str(sorted(subs or [], key=lambda s: s.name or "")[0].id))
        else:
            self._create(net, plan, rg, child)
        self.register_outputs({"vnet": self.vnet_id, "subnet": self.subnet_id,
                               "nsg": self._nsg.id if self._nsg else None})

    @property
    def nsg(self) -> network.NetworkSecurityGroup:
        """The fleet's NSG."""
        assert self._nsg is not None, "a gateway's network has no NSG"
        return self._nsg

    def _rules(self, net: NetworkDesign) -> list[network.SecurityRuleArgsDict]:
        rules: list[network.SecurityRuleArgsDict] = []
        for i, rule in enumerate(net.firewall):
            entry: network.SecurityRuleArgsDict = {
                "name": rule.name, "priority": 100 + i, "direction": "Inbound",
                "access": "Allow", "protocol": PROTOCOLS.get(rule.protocol, "*"),
                "source_port_range": "*",
                "destination_port_ranges": list(rule.ports),
                "destination_address_prefix": "*", "description": rule.description}
            if rule.from_bastion:
                assert self.bastion_asg is not None
                entry["source_application_security_groups"] = [{"id": self.bastion_asg.id}]
            else:
                entry["source_address_prefixes"] = list(rule.sources)
            rules.append(entry)
        return rules

    def _create(self, net: NetworkDesign, plan: Owner, rg: pulumi.Output[str],
                child: pulumi.ResourceOptions) -> None:
        """A VNet of its own, its subnet, and a NAT gateway for private nodes."""
        subnet = net.subnets[0]
        vnet = network.VirtualNetwork(
            net.name, resource_group_name=rg, location=plan.region,
            address_space={"address_prefixes": [str(net.cidr)]}, tags=dict(plan.labels),
            opts=pulumi.ResourceOptions(parent=self, ignore_changes=["subnets"]))
        nat_gateway: network.SubResourceArgsDict | None = None
        if net.nat:
            # Private nodes reach the internet (packages, images, dstack) through a NAT
            # gateway, as on AWS and GCP.
            pip = network.PublicIPAddress(
                naming.child(net.name, "nat-ip"), resource_group_name=rg,
                location=plan.region, sku={"name": "Standard"},
                public_ip_allocation_method="Static", tags=dict(plan.labels), opts=child)
            gateway = network.NatGateway(
                naming.child(net.name, "nat"), resource_group_name=rg,
                location=plan.region, sku={"name": "Standard"},
                public_ip_addresses=[{"id": pip.id}], tags=dict(plan.labels), opts=child)
            nat_gateway = {"id": gateway.id}
        # Azure Storage over the Microsoft backbone from a fleet's subnet (its service
        # endpoint), not through the NAT gateway
        endpoints: list[network.ServiceEndpointPropertiesFormatArgsDict] | None = \
            [{"service": "Microsoft.Storage"}] if isinstance(plan, FleetDesign) else None
        sub = network.Subnet(
            subnet.name, resource_group_name=rg, virtual_network_name=vnet.name,
            address_prefix=subnet.cidr,
            nat_gateway=nat_gateway, service_endpoints=endpoints,
            opts=pulumi.ResourceOptions(parent=self, replace_on_changes=["address_prefix"]))
        self.vnet_id, self.subnet_id = vnet.id, sub.id
        self.vnet_name = vnet.name
        self.last_change = [sub]

    @staticmethod
    def _subnet_by_path(path: str, plan: Owner,
                        invoke: pulumi.InvokeOptions) -> pulumi.Output[str]:
        rg, vnet, subnet = path.split("/")
        sub_id = pulumi.Output.from_input(plan.provider.scope) if plan.provider.scope else \
            authorization.get_client_config_output(opts=invoke).subscription_id
        return sub_id.apply(lambda s: f"/subscriptions/{s}/resourceGroups/{rg}/providers/"
                                      f"Microsoft.Network/virtualNetworks/{vnet}/subnets/{subnet}")
