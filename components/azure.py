"""Azure ComponentResources: a FleetPlan -> resource group (shared per stack and region),
VNet, subnet, NSG, and either one InfiniBand VM scale set or plain VMs.

Makes no decisions: every number and name comes from the plan (gpufleet.compile.backends.azure).
"""

from __future__ import annotations

import weakref
from typing import Any, TypedDict

import pulumi
from pulumi_azure_native import authorization, compute, dns, network, resources
from pulumi_azure_native.provider import Provider

from gpufleet.compile import (
    BASTION_DISK,
    DIGEST_OUTPUT,
    GATEWAY_DISK,
    AzureOptions,
    FleetPlan,
    GatewayOptions,
    GatewayPlan,
    NetworkPlan,
    ProviderPlan,
    input_digest,
    naming,
    options_of,
)

from .access import boot_script_b64, public_key, server_script_b64
from .filesystems import (
    azure_files_target,
    azure_filesystem,
    azure_peering,
    shared_subnets_key,
)
from .renames import rename_options

Owner = FleetPlan | GatewayPlan


def _opts(plan: Owner) -> AzureOptions | GatewayOptions:
    return options_of(plan, GatewayOptions) if isinstance(plan, GatewayPlan) \
        else options_of(plan, AzureOptions)

# One resource group per (provider, region), shared by every fleet there. It is a top-level
# resource, so removing or renaming one fleet never touches it.
_GROUPS: weakref.WeakKeyDictionary[pulumi.ProviderResource, pulumi.Output[str]] = \
    weakref.WeakKeyDictionary()


def provider(p: ProviderPlan) -> pulumi.ProviderResource:
    return Provider(p.name, location=p.region, subscription_id=p.scope or None)


def resource_group(plan: Owner, prov: pulumi.ProviderResource) -> pulumi.Output[str]:
    existing = _opts(plan).resource_group
    if existing:
        return pulumi.Output.from_input(str(existing))
    if prov not in _GROUPS:
        name = f"gpufleet-{pulumi.get_stack()}-{plan.region}"
        rg = resources.ResourceGroup(
            naming.child("rg", plan.region), resource_group_name=name, location=plan.region,
            tags={"managed-by": "gpufleet"}, opts=pulumi.ResourceOptions(provider=prov))
        _GROUPS[prov] = rg.name
    return _GROUPS[prov]


def _image(ref: str) -> compute.ImageReferenceArgsDict:
    publisher, offer, sku, version = ref.split(":")
    return {"publisher": publisher, "offer": offer, "sku": sku, "version": version}


def _ssh(plan: Owner) -> tuple[str, compute.LinuxConfigurationArgsDict]:
    """The admin user and a Linux configuration that takes only its SSH key."""
    user = _opts(plan).admin_user
    kind = "fleet" if isinstance(plan, FleetPlan) else "gateway"
    data = public_key(_opts(plan).ssh_public_key, f"{kind} '{plan.name}'")
    return user, {"disable_password_authentication": True,
                  "ssh": {"public_keys": [{"path": f"/home/{user}/.ssh/authorized_keys",
                                           "key_data": data}]}}


def os_profile(plan: Owner, computer_name: str,
               custom_data: str | None = None) -> compute.OSProfileArgsDict:
    user, linux = _ssh(plan)
    profile: compute.OSProfileArgsDict = {"computer_name": computer_name,
                                          "admin_username": user, "linux_configuration": linux}
    if custom_data:  # cloud-init runs it at first boot
        profile["custom_data"] = custom_data
    return profile


def storage(image: str, disk_gib: int, disk_type: str) -> compute.StorageProfileArgsDict:
    # Managed disks are encrypted at rest (platform-managed keys) by default.
    return {"image_reference": _image(image),
            "os_disk": {"create_option": "FromImage",
                        "caching": compute.CachingTypes.READ_WRITE, "disk_size_gb": disk_gib,
                        "managed_disk": {"storage_account_type": disk_type}}}


class Priority(TypedDict, total=False):
    """The spot or regular settings of a VM or scale-set VM profile."""

    priority: str
    eviction_policy: str
    billing_profile: compute.BillingProfileArgsDict


def vm_with_nic(owner: pulumi.Resource, plan: Owner, name: str, subnet_id: pulumi.Input[str],
                nsg_id: pulumi.Input[str], rg: pulumi.Input[str], size: str,
                storage_profile: compute.StorageProfileArgsDict,
                public_ip_id: pulumi.Input[str] | None, accelerated: bool,
                priority: Priority, reservation: str | None = None,
                custom_data: str | None = None) -> network.NetworkInterface:
    """One VM with its own NIC (and a public IP when given), in a capacity reservation
    group when ``reservation`` (its resource id) is given. ``custom_data`` (base64): Azure
    refuses to change it on an existing VM, so a new script reaches new VMs only."""
    child = pulumi.ResourceOptions(parent=owner)
    ip_config: network.NetworkInterfaceIPConfigurationArgsDict = {
        "name": "ipconfig", "primary": True, "private_ip_allocation_method": "Dynamic",
        "subnet": {"id": subnet_id}}
    if public_ip_id is not None:
        ip_config["public_ip_address"] = {"id": public_ip_id}
    nic = network.NetworkInterface(
        naming.child(name, "nic"), resource_group_name=rg, location=plan.region,
        ip_configurations=[ip_config], enable_accelerated_networking=accelerated,
        network_security_group={"id": nsg_id}, tags=dict(plan.labels), opts=child)
    compute.VirtualMachine(
        name, resource_group_name=rg, location=plan.region, hardware_profile={"vm_size": size},
        os_profile=os_profile(plan, name, custom_data), storage_profile=storage_profile,
        network_profile={"network_interfaces": [{"id": nic.id, "primary": True}]},
        priority=priority.get("priority"), eviction_policy=priority.get("eviction_policy"),
        billing_profile=priority.get("billing_profile"),
        capacity_reservation={"capacity_reservation_group": {"id": reservation}}
        if reservation else None, tags=dict(plan.labels),
        opts=pulumi.ResourceOptions.merge(child, pulumi.ResourceOptions(
            ignore_changes=["osProfile.customData"])) if custom_data else child)
    return nic


class Network(pulumi.ComponentResource):
    """VNet + subnet (created, or an existing subnet) and the fleet's NSG."""

    subnet_id: pulumi.Output[str]
    vnet_id: pulumi.Output[str]

    def __init__(self, net: NetworkPlan, plan: Owner, rg: pulumi.Output[str],
                 opts: pulumi.ResourceOptions) -> None:
        super().__init__("gpufleet:azure:Network", net.name, None, opts)
        child = pulumi.ResourceOptions(parent=self)
        invoke = pulumi.InvokeOptions(parent=self)
        access = plan.access if isinstance(plan, FleetPlan) else None
        self.bastion_asg: network.ApplicationSecurityGroup | None = None
        if access is not None and access.bastion is not None:
            # The nodes' NSG names the bastion by its application security group, so the rule
            # holds for any subnet, created or existing.
            asg = naming.child(access.bastion.name, "asg")
            self.bastion_asg = network.ApplicationSecurityGroup(
                asg, resource_group_name=rg, location=plan.region, tags=dict(plan.labels),
                opts=child)
        rules: list[network.SecurityRuleArgsDict] = []
        for i, rule in enumerate(net.firewall):
            entry: network.SecurityRuleArgsDict = {
                "name": rule.name, "priority": 100 + i, "direction": "Inbound",
                "access": "Allow", "protocol": "Tcp", "source_port_range": "*",
                "destination_port_ranges": list(rule.ports),
                "destination_address_prefix": "*", "description": rule.description}
            if rule.from_bastion:
                assert self.bastion_asg is not None
                entry["source_application_security_groups"] = [{"id": self.bastion_asg.id}]
            else:
                entry["source_address_prefixes"] = list(rule.sources)
            rules.append(entry)
        self.nsg = network.NetworkSecurityGroup(
            _opts(plan).nsg, resource_group_name=rg, location=plan.region,
            security_rules=rules, tags=dict(plan.labels), opts=child)
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
                [{"service": "Microsoft.Storage"}] if isinstance(plan, FleetPlan) else None
            sub = network.Subnet(
                subnet.name, resource_group_name=rg, virtual_network_name=vnet.name,
                address_prefix=subnet.cidr,
                nat_gateway=nat_gateway, service_endpoints=endpoints,
                opts=pulumi.ResourceOptions(parent=self, replace_on_changes=["address_prefix"]))
            self.vnet_id, self.subnet_id = vnet.id, sub.id
            self.vnet_name = vnet.name
        self.register_outputs({"vnet": self.vnet_id, "subnet": self.subnet_id,
                               "nsg": self.nsg.id})

    @staticmethod
    def _subnet_by_path(path: str, plan: Owner,
                        invoke: pulumi.InvokeOptions) -> pulumi.Output[str]:
        rg, vnet, subnet = path.split("/")
        sub_id = pulumi.Output.from_input(plan.provider.scope) if plan.provider.scope else \
            authorization.get_client_config_output(opts=invoke).subscription_id
        return sub_id.apply(lambda s: f"/subscriptions/{s}/resourceGroups/{rg}/providers/"
                                      f"Microsoft.Network/virtualNetworks/{vnet}/subnets/{subnet}")


class Fleet(pulumi.ComponentResource):
    """A fleet: its network, then one InfiniBand scale set or one VM per node."""

    def __init__(self, plan: FleetPlan, rg: pulumi.Output[str],
                 opts: pulumi.ResourceOptions | None = None,
                 hosted: dict[str, Any] | None = None) -> None:
        opts = pulumi.ResourceOptions.merge(opts, rename_options(plan.name, plan.previous_names))
        super().__init__("gpufleet:azure:Fleet", plan.name, None, opts)
        self.network = Network(plan.networks[0], plan, rg, pulumi.ResourceOptions(parent=self))
        self.rg = rg
        hosted = {} if hosted is None else hosted
        child = pulumi.ResourceOptions(parent=self)
        self.filesystems: dict[str, Any] = {}
        peered: set[str] = set()  # one peering per fleet holding filesystems we mount
        for fs in plan.filesystems:
            if fs.host and fs.service == "amlfs":  # held by a fleet built before this one
                if fs.host not in peered:
                    azure_peering(plan, fs, rg, self.network.vnet_id, self.network.vnet_name,
                                  hosted, child)
                    peered.add(fs.host)
                self.filesystems[fs.name] = hosted[fs.name].target
            elif fs.host:  # Azure Files: its account, built after this fleet, admits us
                hosted.setdefault(shared_subnets_key(fs), []).append(self.network.subnet_id)
                self.filesystems[fs.name] = azure_files_target(fs.host, fs)
            else:
                self.filesystems[fs.name] = azure_filesystem(
                    fs, plan, rg, (self.network.vnet_id, self.network.vnet_name),
                    self.network.subnet_id, child, hosted)
        self.public_ips: list[Any] = []
        if plan.placement is not None:
            # Scale-set instances are listed by Azure, not by the stack: no per-node IPs here.
            self.scale_set = self._scale_set(plan)
            self.internal_ips: list[Any] = [None] * plan.nodes
            self.public_ips = [None] * plan.nodes
        else:
            vms = [self._vm(plan, name) for name in plan.node_names]
            self.internal_ips = [nic.ip_configurations.apply(
                lambda cfgs: cfgs[0].private_ip_address if cfgs else None) for nic in vms]
        self.bastion_address: pulumi.Output[str] | None = None
        if plan.access is not None and plan.access.bastion is not None:
            self.bastion_address = self._bastion(plan)
        self.network_ids = {"main": self.network.vnet_id}
        self.network_names = {"main": self.network.vnet_name}
        self.subnet_ids = {plan.networks[0].subnets[0].name: self.network.subnet_id}
        self.resource_group = rg
        self.register_outputs({"internal_ips": self.internal_ips,
                               "networks": self.network_ids,
                               DIGEST_OUTPUT: input_digest(plan)})

    def _bastion(self, plan: FleetPlan) -> pulumi.Output[str]:
        """A small VM with a static public IP and its own NSG (SSH from ssh_cidrs only), in
        the application security group the nodes' NSG admits SSH from."""
        assert plan.access is not None and plan.access.bastion is not None
        b = plan.access.bastion
        child = pulumi.ResourceOptions(parent=self)
        rule = b.firewall
        rules: list[network.SecurityRuleArgsDict] = [{
            "name": rule.name, "priority": 100, "direction": "Inbound", "access": "Allow",
            "protocol": "Tcp", "source_port_range": "*", "destination_port_ranges": ["22"],
            "destination_address_prefix": "*", "source_address_prefixes": list(rule.sources),
            "description": rule.description}] if rule.sources else []
        if b.server is not None:  # control_plane: the dstack server's port, from `allow`
            rules.append({
                "name": b.server.firewall.name, "priority": 110, "direction": "Inbound",
                "access": "Allow", "protocol": "Tcp", "source_port_range": "*",
                "destination_port_ranges": [str(b.server.port)],
                "destination_address_prefix": "*",
                "source_address_prefixes": list(b.server.firewall.sources),
                "description": b.server.firewall.description})
        nsg = network.NetworkSecurityGroup(
            naming.child(b.name, "nsg"), resource_group_name=self.rg, location=plan.region,
            security_rules=rules, tags=dict(plan.labels), opts=child)
        pip = network.PublicIPAddress(
            b.address_name, resource_group_name=self.rg, location=plan.region,
            sku={"name": "Standard"}, public_ip_allocation_method="Static",
            tags=dict(plan.labels), opts=child)
        assert self.network.bastion_asg is not None
        nic = network.NetworkInterface(
            naming.child(b.name, "nic"), resource_group_name=self.rg, location=plan.region,
            ip_configurations=[{
                "name": "ipconfig", "primary": True, "private_ip_allocation_method": "Dynamic",
                "subnet": {"id": self.network.subnet_id},
                "public_ip_address": {"id": pip.id},
                "application_security_groups": [{"id": self.network.bastion_asg.id}]}],
            network_security_group={"id": nsg.id}, tags=dict(plan.labels), opts=child)
        compute.VirtualMachine(
            b.name, resource_group_name=self.rg, location=plan.region,
            hardware_profile={"vm_size": b.instance_type},
            os_profile=os_profile(plan, b.name, server_script_b64(b)),
            storage_profile=storage(b.image, *BASTION_DISK["azure"]),
            network_profile={"network_interfaces": [{"id": nic.id, "primary": True}]},
            tags=dict(plan.labels),
            # Azure refuses to change custom data: a new server script makes a new VM (the
            # static public IP and the NIC stay)
            opts=pulumi.ResourceOptions.merge(child, pulumi.ResourceOptions(
                replace_on_changes=["osProfile.customData"])))
        return pip.ip_address.apply(lambda ip: ip or "")

    @staticmethod
    def _priority(plan: FleetPlan) -> Priority:
        if not plan.spot:
            return {"priority": "Regular"}
        return {"priority": "Spot", "eviction_policy": "Delete",
                "billing_profile": {"max_price": plan.max_price if plan.max_price else -1}}

    def _scale_set(self, plan: FleetPlan) -> compute.VirtualMachineScaleSet:
        assert plan.placement is not None
        nic = plan.nics[0]
        ip_config: compute.VirtualMachineScaleSetIPConfigurationArgsDict = {
            "name": "ipconfig", "primary": True, "subnet": {"id": self.network.subnet_id}}
        if nic.public_ip:
            ip_config["public_ip_address_configuration"] = {"name": "public-ip"}
        user, linux = _ssh(plan)
        priority = self._priority(plan)
        script = boot_script_b64(plan, self.filesystems)  # the model's: new instances boot with it
        profile: compute.VirtualMachineScaleSetVMProfileArgsDict = {
            "os_profile": {"computer_name_prefix": plan.name[:9], "admin_username": user,
                           "linux_configuration": linux,
                           **({"custom_data": script} if script else {})},
            "storage_profile": {"image_reference": _image(plan.image),
                                "os_disk": {"create_option": "FromImage",
                                            "caching": compute.CachingTypes.READ_WRITE,
                                            "disk_size_gb": plan.disk_gib,
                                            "managed_disk": {
                                                "storage_account_type": plan.disk_type}}},
            "network_profile": {"network_interface_configurations": [{
                "name": naming.child(plan.name, "nic"), "primary": True,
                "enable_accelerated_networking":
                    options_of(plan, AzureOptions).accelerated_networking,
                "network_security_group": {"id": self.network.nsg.id},
                "ip_configurations": [ip_config]}]},
        }
        if "eviction_policy" in priority:
            profile["eviction_policy"] = priority["eviction_policy"]
        if "billing_profile" in priority:
            profile["billing_profile"] = priority["billing_profile"]
        profile["priority"] = priority["priority"]
        if plan.reservation:  # a capacity reservation group declared in the backends file
            profile["capacity_reservation"] = {
                "capacity_reservation_group": {"id": plan.reservation}}
        return compute.VirtualMachineScaleSet(
            plan.placement.name, resource_group_name=self.rg, location=plan.region,
            sku={"name": plan.instance_type, "tier": "Standard", "capacity": plan.nodes},
            single_placement_group=True, platform_fault_domain_count=1, overprovision=False,
            orchestration_mode="Uniform", upgrade_policy={"mode": compute.UpgradeMode.MANUAL},
            virtual_machine_profile=profile, tags=dict(plan.labels),
            opts=pulumi.ResourceOptions(parent=self))

    def _vm(self, plan: FleetPlan, name: str) -> network.NetworkInterface:
        pip_id = None
        if plan.nics[0].public_ip:
            pip = network.PublicIPAddress(
                naming.child(name, "pip"), resource_group_name=self.rg, location=plan.region,
                sku={"name": "Standard"}, public_ip_allocation_method="Static",
                tags=dict(plan.labels), opts=pulumi.ResourceOptions(parent=self))
            pip_id = pip.id
            self.public_ips.append(pip.ip_address)
        else:
            self.public_ips.append(None)
        return vm_with_nic(self, plan, name, self.network.subnet_id, self.network.nsg.id,
                           self.rg, plan.instance_type,
                           storage(plan.image, plan.disk_gib, plan.disk_type), pip_id,
                           options_of(plan, AzureOptions).accelerated_networking,
                           self._priority(plan), plan.reservation,
                           boot_script_b64(plan, self.filesystems))


def emit(plan: FleetPlan, prov: pulumi.ProviderResource, hosted: dict[str, Any]) -> Fleet:
    rg = resource_group(plan, prov)
    return Fleet(plan, rg, pulumi.ResourceOptions(providers={"azure-native": prov}), hosted)


class Gateway(pulumi.ComponentResource):
    """A gateway: network, one protected Standard static public IP per replica, the VMs
    (always Standard_B1ms), and the `*.<domain>` record in Azure DNS."""

    def __init__(self, plan: GatewayPlan, rg: pulumi.Output[str],
                 opts: pulumi.ResourceOptions) -> None:
        super().__init__("gpufleet:azure:Gateway", plan.name, None, opts)
        keep = pulumi.ResourceOptions(parent=self, protect=plan.protect_address)
        self.network = Network(plan.network, plan, rg, pulumi.ResourceOptions(parent=self))
        self.addresses: list[pulumi.Output[str]] = []
        for addr, vm in zip(plan.address_names, plan.instance_names, strict=True):
            pip = network.PublicIPAddress(
                addr, resource_group_name=rg, location=plan.region, sku={"name": "Standard"},
                public_ip_allocation_method="Static", tags=dict(plan.labels), opts=keep)
            vm_with_nic(self, plan, vm, self.network.subnet_id, self.network.nsg.id, rg,
                        plan.instance_type, storage(plan.image, *GATEWAY_DISK["azure"]), pip.id,
                        False, {})
            self.addresses.append(pip.ip_address.apply(lambda a: a or ""))
        if plan.record is not None:
            rec = plan.record
            relative = rec.fqdn.rstrip(".")[: -len(rec.zone) - 1]
            opts = pulumi.ResourceOptions(parent=self, delete_before_replace=True)
            zone_rg = options_of(plan, GatewayOptions).dns_resource_group
            if rec.create_zone:
                zone = dns.Zone(naming.child(plan.name, "zone"), zone_name=rec.zone,
                                resource_group_name=zone_rg, location="global",
                                tags=dict(plan.labels),
                                opts=pulumi.ResourceOptions(parent=self, protect=True))
                opts = pulumi.ResourceOptions.merge(opts,
                                                    pulumi.ResourceOptions(deleted_with=zone))
            dns.RecordSet(rec.name, resource_group_name=zone_rg, zone_name=rec.zone,
                          relative_record_set_name=relative, record_type=rec.record_type,
                          ttl=rec.ttl, a_records=[{"ipv4_address": a} for a in self.addresses],
                          opts=opts)
        self.register_outputs({"addresses": self.addresses,
                               "record": plan.record.fqdn if plan.record else None,
                               DIGEST_OUTPUT: input_digest(plan)})


def emit_gateway(plan: GatewayPlan, prov: pulumi.ProviderResource) -> Gateway:
    rg = resource_group(plan, prov)
    return Gateway(plan, rg, pulumi.ResourceOptions(providers={"azure-native": prov}))
