"""Azure helpers every Azure component shares: the provider, the stack's resource group per
region, OS and storage profiles, and one VM with its own NIC."""

from __future__ import annotations

import weakref
from typing import TypedDict

import pulumi
from pulumi_azure_native import compute, network, resources
from pulumi_azure_native.provider import Provider

from gpufleet.backends.azure.compile import AzureOptions
from gpufleet.compile import (
    FleetDesign,
    GatewayDesign,
    GatewayOptions,
    ProviderDesign,
    naming,
    options_of,
)

from ..access import public_key

Owner = FleetDesign | GatewayDesign


def opts_of(plan: Owner) -> AzureOptions | GatewayOptions:
    return options_of(plan, GatewayOptions) if isinstance(plan, GatewayDesign) \
        else options_of(plan, AzureOptions)

# One resource group per (provider, region), shared by every fleet there. It is a top-level
# resource, so removing or renaming one fleet never touches it.
_GROUPS: weakref.WeakKeyDictionary[pulumi.ProviderResource, pulumi.Output[str]] = \
    weakref.WeakKeyDictionary()


def provider(p: ProviderDesign) -> pulumi.ProviderResource:
    return Provider(p.name, location=p.region, subscription_id=p.scope or None)


def resource_group(plan: Owner, prov: pulumi.ProviderResource) -> pulumi.Output[str]:
    return group_for(plan.region, opts_of(plan).resource_group, prov)


def group_for(region: str, existing: str | None, prov: pulumi.ProviderResource
              ) -> pulumi.Output[str]:
    """The resource group given (``existing``), else the stack's one in the region."""
    if existing:
        return pulumi.Output.from_input(str(existing))
    if prov not in _GROUPS:
        name = f"gpufleet-{pulumi.get_stack()}-{region}"
        rg = resources.ResourceGroup(
            naming.child("rg", region), resource_group_name=name, location=region,
            tags={"managed-by": "gpufleet"}, opts=pulumi.ResourceOptions(provider=prov))
        _GROUPS[prov] = rg.name
    return _GROUPS[prov]


def image_reference(ref: str) -> compute.ImageReferenceArgsDict:
    publisher, offer, sku, version = ref.split(":")
    return {"publisher": publisher, "offer": offer, "sku": sku, "version": version}


def admin_ssh(plan: FleetDesign) -> tuple[str, compute.LinuxConfigurationArgsDict]:
    """The admin user and a Linux configuration that takes only its SSH key."""
    options = options_of(plan, AzureOptions)
    user = options.admin_user
    data = public_key(options.ssh_public_key, f"fleet '{plan.name}'")
    return user, {"disable_password_authentication": True,
                  "ssh": {"public_keys": [{"path": f"/home/{user}/.ssh/authorized_keys",
                                           "key_data": data}]}}


def os_profile(plan: FleetDesign, computer_name: str,
               custom_data: str | None = None) -> compute.OSProfileArgsDict:
    user, linux = admin_ssh(plan)
    profile: compute.OSProfileArgsDict = {"computer_name": computer_name,
                                          "admin_username": user, "linux_configuration": linux}
    if custom_data:  # cloud-init runs it at first boot
        profile["custom_data"] = custom_data
    return profile


def storage(image: str, disk_gib: int, disk_type: str) -> compute.StorageProfileArgsDict:
    # Managed disks are encrypted at rest (platform-managed keys) by default.
    return {"image_reference": image_reference(image),
            "os_disk": {"create_option": "FromImage",
                        "caching": compute.CachingTypes.READ_WRITE, "disk_size_gb": disk_gib,
                        "managed_disk": {"storage_account_type": disk_type}}}


class Priority(TypedDict, total=False):
    """The spot or regular settings of a VM or scale-set VM profile."""

    priority: str
    eviction_policy: str
    billing_profile: compute.BillingProfileArgsDict


def vm_with_nic(owner: pulumi.Resource, plan: FleetDesign, name: str, subnet_id: pulumi.Input[str],
                nsg_id: pulumi.Input[str], rg: pulumi.Input[str], size: str,
                storage_profile: compute.StorageProfileArgsDict,
                public_ip_id: pulumi.Input[str] | None, accelerated: bool,
                priority: Priority, reservation: str | None = None,
                custom_data: str | None = None,
                principals: list[pulumi.Output[str]] | None = None) -> network.NetworkInterface:
    """One VM with its own NIC (and a public IP when given), in a capacity reservation
    group when ``reservation`` (its resource id) is given. ``custom_data`` (base64): Azure
    refuses to change it on an existing VM, so a new script reaches new VMs only.
    ``principals``: the VM gets a system-assigned identity, whose principal id is added
    there (the buckets its fleet mounts grant it)."""
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
    vm = compute.VirtualMachine(
        name, resource_group_name=rg, location=plan.region, hardware_profile={"vm_size": size},
        identity={"type": compute.ResourceIdentityType.SYSTEM_ASSIGNED}
        if principals is not None else None,
        os_profile=os_profile(plan, name, custom_data), storage_profile=storage_profile,
        network_profile={"network_interfaces": [{"id": nic.id, "primary": True}]},
        priority=priority.get("priority"), eviction_policy=priority.get("eviction_policy"),
        billing_profile=priority.get("billing_profile"),
        capacity_reservation={"capacity_reservation_group": {"id": reservation}}
        if reservation else None, tags=dict(plan.labels),
        opts=pulumi.ResourceOptions.merge(child, pulumi.ResourceOptions(
            ignore_changes=["osProfile.customData"])) if custom_data else child)
    if principals is not None:
        principals.append(vm.identity.apply(lambda i: i.principal_id if i else ""))
    return nic
