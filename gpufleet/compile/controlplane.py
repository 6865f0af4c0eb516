"""The backends file's `control_plane`: the dstack server on a fleet's bastion. Pure.

A dstack server provisions into private networks (`public_ips: false`) and reaches their
nodes only from inside them. The bastion already sits in the fleet's network with a static
address and SSH from `ssh_cidrs`; as the control plane it gets a size that runs the server,
SSH open to `allow` as well, and a boot script that installs dstack and runs `dstack server`
under systemd on the loopback address only: the API is reached through an SSH tunnel to the
bastion (`ssh -N -L PORT:127.0.0.1:PORT`), never as plain HTTP on a public address.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from gpufleet.backends import traits_of
from gpufleet.codes import B015, B016, B017
from gpufleet.compile import naming
from gpufleet.compile.design import FirewallRule, FleetDesign, ServerDesign
from gpufleet.diagnostics import Diagnostic
from gpufleet.input import BackendConfig, ControlPlaneSpec


def attach_control_plane(plans: Sequence[FleetDesign], spec: ControlPlaneSpec | None,
                         backends: Sequence[BackendConfig]) -> tuple[list[FleetDesign],
                                                                     list[Diagnostic]]:
    """The plans with the control plane's fleet's bastion turned into the server VM."""
    out = list(plans)
    if spec is None or spec.fleet is None:
        return out, []
    index = next((i for i, p in enumerate(out) if p.name == spec.fleet), None)
    if index is None:
        return out, [spec.origin.at("fleet", B015, f"control_plane.fleet '{spec.fleet}' "
                                    "names no fleet of these files",
                                    "name one of the fleets, or give `url:` instead")]
    plan = out[index]
    access = plan.access
    bastion = access.bastion if access is not None else None
    if access is None or bastion is None:
        how = access.method if access is not None else "no access"
        return out, [spec.origin.at("fleet", B016, f"fleet '{spec.fleet}' has no bastion to "
                                    f"host the dstack server (its nodes are reached: {how})",
                                    "pick a fleet with private nodes behind a bastion (the "
                                    "default), or run the server yourself and give `url:`")]
    config = next((b for b in backends if b.type == plan.backend), None)
    sources = spec.allow if spec.allow is not None else \
        (tuple(config.ssh_cidrs) if config is not None else ())
    if not sources:
        return out, [spec.origin.at("allow", B017, "the dstack server's port would be open "
                                    "to no one: no `allow` and no `ssh_cidrs`",
                                    "list the ranges your team connects from in `allow`")]
    # the server listens on the bastion's loopback only: its API (the admin token, the SSH
    # fleets' keys) never crosses a network in clear; it is reached through an SSH tunnel
    # to the bastion, whose port 22 the rule opens to `allow`
    server = ServerDesign(spec.port, FirewallRule(
        naming.child(bastion.name, "dstack"), "SSH tunnel to the dstack server from "
        "control_plane.allow" if spec.allow is not None else
        "SSH tunnel to the dstack server from ssh_cidrs", "tcp", ("22",),
        tuple(sources)), spec.dstack_version, access.user)
    bastion = dataclasses.replace(bastion, server=server, instance_type=spec.instance_type
                                  or traits_of(plan.backend).server_size)
    out[index] = dataclasses.replace(plan, access=dataclasses.replace(access, bastion=bastion))
    return out, []
