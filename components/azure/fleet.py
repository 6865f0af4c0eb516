"""An Azure fleet: its network, filesystems, bastion, and either one InfiniBand VM scale set
or plain VMs (gpufleet.backends.azure.compile)."""

from __future__ import annotations

from typing import Any

import pulumi
from pulumi_azure_native import compute, network

from gpufleet.backends.azure import BASTION
from gpufleet.backends.azure.compile import AzureOptions
from gpufleet.compile import DIGEST_OUTPUT, FleetDesign, input_digest, naming, options_of

from ..access import boot_script_b64, server_script_b64
from ..renames import rename_options
from ..sampling import registered_nodes
from .common import (
    Priority,
    admin_ssh,
    image_reference,
    os_profile,
    resource_group,
    storage,
    vm_with_nic,
)
from .filesystems import azure_files_target, azure_filesystem, azure_peering, shared_subnets_key
from .network import Network


class Fleet(pulumi.ComponentResource):
    """A fleet: its network, then one InfiniBand scale set or one VM per node."""

    def __init__(self, plan: FleetDesign, rg: pulumi.Output[str],
                 opts: pulumi.ResourceOptions | None = None,
                 shared: dict[str, Any] | None = None) -> None:
        opts = pulumi.ResourceOptions.merge(opts, rename_options(plan.name, plan.previous_names))
        super().__init__("gpufleet:azure:Fleet", plan.name, None, opts)
        self.network = Network(plan.networks[0], plan, rg, pulumi.ResourceOptions(parent=self))
        self.rg = rg
        shared = {} if shared is None else shared
        child = pulumi.ResourceOptions(parent=self)
        self.filesystems: dict[str, Any] = {}
        peered: set[str] = set()  # one peering per fleet holding filesystems we mount
        for fs in plan.filesystems:
            if fs.held_by and fs.service == "amlfs":  # held by a fleet built before this one
                if fs.held_by not in peered:
                    azure_peering(plan, fs, rg, self.network.vnet_id, self.network.vnet_name,
                                  shared, child, self.network.last_change)
                    peered.add(fs.held_by)
                self.filesystems[fs.name] = shared[fs.name].target
            elif fs.held_by:  # Azure Files: its account, built after this fleet, admits us
                shared.setdefault(shared_subnets_key(fs), []).append(self.network.subnet_id)
                self.filesystems[fs.name] = azure_files_target(fs.held_by, fs)
            else:
                self.filesystems[fs.name] = azure_filesystem(
                    fs, plan, rg, (self.network.vnet_id, self.network.vnet_name),
                    self.network.subnet_id, child, shared, self.network.last_change)
        self.public_ips: list[Any] = []
        # the nodes' identities, which the buckets the fleet mounts grant (none without)
        self.principal_ids: list[pulumi.Output[str]] = []
        if plan.placement is not None:
            # Scale-set instances are listed by Azure, not by the stack: no per-node IPs here.
            self.scale_set = self._scale_set(plan)
            self.internal_ips: list[Any] = [None] * len(registered_nodes(plan))
            self.public_ips = [None] * len(registered_nodes(plan))
        else:
            vms = [self._vm(plan, name) for name in registered_nodes(plan)]
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

    def _bastion(self, plan: FleetDesign) -> pulumi.Output[str]:
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
        if b.server is not None:  # control_plane: the SSH tunnel to the server, from `allow`
            rules.append({
                "name": b.server.firewall.name, "priority": 110, "direction": "Inbound",
                "access": "Allow", "protocol": "Tcp", "source_port_range": "*",
                "destination_port_ranges": list(b.server.firewall.ports),
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
            storage_profile=storage(b.image, BASTION.disk_gib, BASTION.disk_type),
            network_profile={"network_interfaces": [{"id": nic.id, "primary": True}]},
            tags=dict(plan.labels),
            # Azure refuses to change custom data: a new server script makes a new VM (the
            # static public IP and the NIC stay)
            opts=pulumi.ResourceOptions.merge(child, pulumi.ResourceOptions(
                replace_on_changes=["osProfile.customData"])))
        return pip.ip_address.apply(lambda ip: ip or "")

    @staticmethod
    def _priority(plan: FleetDesign) -> Priority:
        if not plan.spot:
            return {"priority": "Regular"}
        return {"priority": "Spot", "eviction_policy": "Delete",
                "billing_profile": {"max_price": plan.max_price if plan.max_price else -1}}

    def _scale_set(self, plan: FleetDesign) -> compute.VirtualMachineScaleSet:
        assert plan.placement is not None
        nic = plan.nics[0]
        ip_config: compute.VirtualMachineScaleSetIPConfigurationArgsDict = {
            "name": "ipconfig", "primary": True, "subnet": {"id": self.network.subnet_id}}
        if nic.public_ip:
            ip_config["public_ip_address_configuration"] = {"name": "public-ip"}
        user, linux = admin_ssh(plan)
        priority = self._priority(plan)
        script = boot_script_b64(plan, self.filesystems)  # the model's: new instances boot with it
        profile: compute.VirtualMachineScaleSetVMProfileArgsDict = {
            "os_profile": {"computer_name_prefix": plan.name[:9], "admin_username": user,
                           "linux_configuration": linux,
                           **({"custom_data": script} if script else {})},
            "storage_profile": {"image_reference": image_reference(plan.image),
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
        vmss = compute.VirtualMachineScaleSet(
            plan.placement.name, resource_group_name=self.rg, location=plan.region,
            sku={"name": plan.instance_type, "tier": "Standard", "capacity": plan.nodes},
            single_placement_group=True, platform_fault_domain_count=1, overprovision=False,
            orchestration_mode="Uniform", upgrade_policy={"mode": compute.UpgradeMode.MANUAL},
            virtual_machine_profile=profile, tags=dict(plan.labels),
            identity={"type": compute.ResourceIdentityType.SYSTEM_ASSIGNED}
            if plan.buckets else None, opts=pulumi.ResourceOptions(parent=self))
        if plan.buckets:
            self.principal_ids.append(vmss.identity.apply(lambda i: i.principal_id if i else ""))
        return vmss

    def _vm(self, plan: FleetDesign, name: str) -> network.NetworkInterface:
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
                           boot_script_b64(plan, self.filesystems),
                           self.principal_ids if plan.buckets else None)


def emit(plan: FleetDesign, prov: pulumi.ProviderResource, shared: dict[str, Any]) -> Fleet:
    rg = resource_group(plan, prov)
    return Fleet(plan, rg, pulumi.ResourceOptions(providers={"azure-native": prov}), shared)
