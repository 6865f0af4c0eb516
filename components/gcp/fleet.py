"""GCP fleets: a FleetDesign -> its networks, compact placement policy, VMs (gVNIC/RoCE NICs,
reservations, spot) and bastion. Makes no decisions: every number and name comes from the
plan (gpufleet.backends.gcp.compile)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import pulumi
import pulumi_gcp as gcp

from gpufleet.backends.gcp import BASTION
from gpufleet.backends.gcp.compile import GcpOptions
from gpufleet.compile import DIGEST_OUTPUT, FleetDesign, input_digest, options_of

from ..access import boot_script, public_key, server_script
from ..registry import network_key
from ..renames import rename_options
from ..sampling import registered_nodes
from .filesystems import gcp_filesystem
from .network import Network, bastion_tag


def _first_ip(nics: Sequence[gcp.compute.outputs.InstanceNetworkInterface]) -> str | None:
    return nics[0].network_ip if nics else None


def _nat_ip(nics: Sequence[gcp.compute.outputs.InstanceNetworkInterface]) -> str | None:
    configs = nics[0].access_configs if nics else None
    return configs[0].nat_ip if configs else None


def node_metadata(plan: FleetDesign, targets: Mapping[str, pulumi.Output[str | None]] | None = None
                  ) -> dict[str, pulumi.Input[str]]:
    """OS Login (IAP) or the ssh-keys entry of the access user, and the host setup script
    with the fleet's mounts (a startup script: GCP runs it on every boot; it is idempotent)."""
    access = plan.access
    script = boot_script(plan, targets)
    extra = {"startup-script": script} if script else {}
    if access is None or access.os_login:
        return {"enable-oslogin": "TRUE", **extra}
    key = public_key(access.public_key, f"fleet '{plan.name}'")
    return {"enable-oslogin": "FALSE", "ssh-keys": f"{access.user}:{key}", **extra}


class Fleet(pulumi.ComponentResource):
    """A fleet: its networks, its placement policy, one VM per node and its way in."""

    def __init__(self, plan: FleetDesign, opts: pulumi.ResourceOptions | None = None,
                 shared: dict[str, Any] | None = None) -> None:
        opts = pulumi.ResourceOptions.merge(opts, rename_options(plan.name, plan.previous_names))
        super().__init__("gpufleet:gcp:Fleet", plan.name, None, opts)
        child = pulumi.ResourceOptions(parent=self)
        shared = {} if shared is None else shared
        self.networks = {n.role: Network(n, plan, child, joins=shared[network_key(n.joins)]
                                         if n.joins else None) for n in plan.networks}
        shared[network_key(plan.name)] = self.networks["main"]  # fleets may join it
        policies = []
        if plan.placement is not None:
            policy = gcp.compute.ResourcePolicy(
                plan.placement.name, region=plan.region,
                group_placement_policy=gcp.compute.ResourcePolicyGroupPlacementPolicyArgs(
                    availability_domain_count=plan.placement.options
                    .availability_domain_count or 1,
                    collocation=plan.placement.kind),
                opts=child)
            policies.append(policy.self_link)
        main = self.networks["main"]
        self.filesystems = {fs.name: gcp_filesystem(fs, plan, main.network_id,
                                                    main.network_name, child)
                            for fs in plan.filesystems}
        self.metadata = node_metadata(plan, self.filesystems)
        self.nodes = [self._node(plan, name, policies) for name in registered_nodes(plan)]
        self.bastion_address: pulumi.Output[str] | None = None
        if plan.access is not None and plan.access.bastion is not None:
            self.bastion_address = self._bastion(plan)
        self.internal_ips = [n.network_interfaces.apply(_first_ip) for n in self.nodes]
        self.network_ids = {role: n.network_id for role, n in self.networks.items()}
        self.network_names = {role: n.network_name for role, n in self.networks.items()}
        self.subnet_ids = {name: link for n in self.networks.values()
                           for name, link in n.subnet_links.items()}
        self.public_ips: list[pulumi.Output[str | None] | None] = [
            n.network_interfaces.apply(_nat_ip) if plan.public_ip else None
            for n in self.nodes]
        self.register_outputs({"nodes": [n.name for n in self.nodes],
                               "internal_ips": self.internal_ips, "networks": self.network_ids,
                               DIGEST_OUTPUT: input_digest(plan)})

    def _node(self, plan: FleetDesign, name: str, policies: list[pulumi.Output[str]]
              ) -> gcp.compute.Instance:
        # The arguments as the SDK's dictionaries (``...ArgsDict``, checked by mypy), not its
        # ``...Args`` classes: the SDK reads every property of an ``Args`` object, set or not
        # (an ``InstanceNetworkInterfaceArgs`` has 17), when it sends a registration; a
        # dictionary holds only what is set. The same registration; a 1,000-node A4 fleet's
        # program run 5.97-6.18 -> 5.76-5.78 processor-seconds (bench/plan.py's every node).
        options = options_of(plan, GcpOptions)
        nics: list[gcp.compute.InstanceNetworkInterfaceArgsDict] = []
        for nic in plan.nics:
            net = self.networks[nic.network]
            args: gcp.compute.InstanceNetworkInterfaceArgsDict = {
                "network": net.network_id, "subnetwork": net.subnet_links[nic.subnet],
                "nic_type": nic.nic_type}
            if nic.public_ip:
                args["access_configs"] = [{}]
            nics.append(args)
        scheduling: gcp.compute.InstanceSchedulingArgsDict
        if plan.spot:
            scheduling = {"on_host_maintenance": "TERMINATE", "provisioning_model": "SPOT",
                          "preemptible": True, "automatic_restart": False,
                          "instance_termination_action": "STOP"}
        else:
            scheduling = {"on_host_maintenance": options.on_host_maintenance or "TERMINATE",
                          "provisioning_model": "STANDARD", "automatic_restart": True}
        reservation: gcp.compute.InstanceReservationAffinityArgsDict | None = {
            "type": "SPECIFIC_RESERVATION",
            "specific_reservation": {"key": "compute.googleapis.com/reservation-name",
                                     "values": [plan.reservation]},
        } if plan.reservation else None
        account = options.service_account
        service_account: gcp.compute.InstanceServiceAccountArgsDict | None = {
            "email": account, "scopes": ["cloud-platform"]} if account else None
        disk: gcp.compute.InstanceBootDiskArgsDict = {"initialize_params": {
            "image": plan.image, "size": plan.disk_gib, "type": plan.disk_type}}
        return gcp.compute.Instance(
            name, machine_type=plan.instance_type, zone=plan.zone, boot_disk=disk,
            network_interfaces=nics, scheduling=scheduling,
            resource_policies=policies[0] if policies else None, labels=dict(plan.labels),
            tags=[options.network_tag], metadata=self.metadata,
            reservation_affinity=reservation, service_account=service_account,
            allow_stopping_for_update=True, opts=pulumi.ResourceOptions(parent=self))

    def _bastion(self, plan: FleetDesign) -> pulumi.Output[str]:
        """A small VM with a static external address in the main subnet; SSH reaches it
        from ssh_cidrs only, and the nodes accept SSH only from its tag."""
        assert plan.access is not None and plan.access.bastion is not None
        b = plan.access.bastion
        child = pulumi.ResourceOptions(parent=self)
        main = self.networks["main"]
        if b.firewall.sources and not plan.network("main").project:  # host's rules otherwise
            main._firewall(b.firewall, plan, target=bastion_tag(plan))
        if b.server is not None:  # control_plane: the SSH tunnel to the server, from `allow`
            main._firewall(b.server.firewall, plan, target=bastion_tag(plan))
        address = gcp.compute.Address(b.address_name, region=plan.region,
                                      address_type="EXTERNAL", network_tier="PREMIUM",
                                      description=f"gpufleet bastion of fleet {plan.name}",
                                      opts=child)
        key = public_key(plan.access.public_key, f"the bastion of fleet '{plan.name}'")
        gcp.compute.Instance(
            b.name, machine_type=b.instance_type, zone=plan.zone,
            boot_disk=gcp.compute.InstanceBootDiskArgs(
                initialize_params=gcp.compute.InstanceBootDiskInitializeParamsArgs(
                    image=b.image, size=BASTION.disk_gib,
                    type=BASTION.disk_type)),
            network_interfaces=[gcp.compute.InstanceNetworkInterfaceArgs(
                network=main.network_id, subnetwork=main.subnet_links[b.subnet],
                access_configs=[gcp.compute.InstanceNetworkInterfaceAccessConfigArgs(
                    nat_ip=address.address)])],
            tags=[bastion_tag(plan)], labels=dict(plan.labels),
            metadata={"enable-oslogin": "FALSE", "ssh-keys": f"{plan.access.user}:{key}",
                      "serial-port-enable": "FALSE",
                      **({"startup-script": server} if (server := server_script(b)) else {})},
            shielded_instance_config=gcp.compute.InstanceShieldedInstanceConfigArgs(
                enable_secure_boot=True, enable_vtpm=True, enable_integrity_monitoring=True),
            allow_stopping_for_update=True, opts=child)
        return address.address
