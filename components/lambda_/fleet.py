"""A Lambda fleet: its SSH key, its firewall ruleset (SSH from ssh_cidrs, nothing else), the
filesystems it holds, and one instance per node launched with them and the host setup as
user data (gpufleet.backends.lambda_.compile), each with the wait for it to be active
(`<node>-ready`) that the fleet's addresses come from."""

from __future__ import annotations

import hashlib
from typing import Any

import pulumi

from gpufleet.backends.lambda_.compile import LambdaOptions
from gpufleet.backends.lambda_.names import tags as lambda_tags
from gpufleet.compile import DIGEST_OUTPUT, FleetDesign, input_digest, options_of

from ..access import boot_script, public_key
from ..renames import rename_options
from ..sampling import registered_nodes
from .dynamic import Filesystem, FirewallRuleset, Instance, InstanceReady, SshKey


def stack_suffix() -> str:
    """7 hex characters of the project and stack: what keeps two stacks' names apart in one
    Lambda account (SSH keys and filesystems are named per account)."""
    seed = f"{pulumi.get_project()}/{pulumi.get_stack()}".encode()
    return hashlib.sha256(seed).hexdigest()[:7]


def physical(logical: str) -> str:
    return f"{logical}-{stack_suffix()}"


class Fleet(pulumi.ComponentResource):
    def __init__(self, plan: FleetDesign, opts: pulumi.ResourceOptions | None = None,
                 shared: dict[str, Any] | None = None) -> None:
        opts = pulumi.ResourceOptions.merge(opts, rename_options(plan.name, plan.previous_names))
        super().__init__("gpufleet:lambda:Fleet", plan.name, None, opts)
        shared = {} if shared is None else shared
        o = options_of(plan, LambdaOptions)
        child = pulumi.ResourceOptions(parent=self)
        key_name = physical(o.ssh_key)
        key = SshKey(o.ssh_key, {"name": key_name,
                                 "public_key": public_key(o.public_key, f"fleet {plan.name}")},
                     child)
        ruleset = FirewallRuleset(o.firewall, {
            "name": physical(o.firewall), "region": plan.region,
            "rules": [{"protocol": "tcp", "port_range": [int(p), int(p)],
                       "source_network": src, "description": r.description}
                      for r in o.firewall_rules for p in r.ports for src in r.sources]},
            child)
        self.filesystems: dict[str, Any] = {}
        mounts = []
        for fs in plan.filesystems:
            held = shared.get(fs.name) if fs.held_by else None
            if held is None:
                held = Filesystem(fs.name, {"name": physical(fs.name), "region": plan.region},
                                  pulumi.ResourceOptions(parent=self, protect=True))
                shared[fs.name] = held
            self.filesystems[fs.name] = held.mount_point
            # by the resource's id, known in a preview of an update (an output is not: the
            # dynamic provider cannot preview, so an update would hide it and the engine
            # would see every node's launch input change)
            mounts.append({"mount_point": fs.mount, "file_system_id": held.id})
        script = boot_script(plan)
        props: dict[str, Any] = {
            "region_name": plan.region, "instance_type_name": plan.instance_type,
            "ssh_key_names": [key_name], "tags": [{"key": k, "value": v} for k, v in
                                                  sorted(lambda_tags(plan.labels).items())],
            "firewall_rulesets": [{"id": ruleset.id}],  # known in a preview (see above)
            **({"user_data": script} if script else {}),
            **({"file_system_mounts": mounts} if mounts else {}),
            **({"image": {"family": o.image}} if o.image else {})}
        # the launch names the key (a plain string, no dependency of itself) and the ruleset
        # and filesystems by id (outputs): an instance waits for the key explicitly
        # as on every cloud, a running node keeps the boot script it booted with: the API
        # takes user data and tags only at launch, and a change to either must not
        # terminate every node (`gpufleet replace` replaces the ones asked for)
        after = pulumi.ResourceOptions(parent=self, depends_on=[key],
                                       ignore_changes=["user_data", "tags"])
        # each node's launch returns at once and its InstanceReady waits for `active`: the
        # provider serves four operations at a time, and the launches queue first
        nodes = [InstanceReady(f"{name}-ready", {"instance_id": Instance(
                     name, {**props, "name": physical(name)}, after).id, "node": name}, child)
                 for name in registered_nodes(plan)]
        self.internal_ips: list[Any] = [n.private_ip for n in nodes]
        self.public_ips: list[Any] = [n.ip for n in nodes]
        self.bastion_address: Any = None
        self.network_ids: dict[str, Any] = {}
        self.network_names: dict[str, Any] = {}
        self.subnet_ids: dict[str, Any] = {}
        self.register_outputs({"public_ips": self.public_ips, DIGEST_OUTPUT: input_digest(plan)})
