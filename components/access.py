"""What every node boots with: the SSH key (from the plan, else from the stack config
`gpufleet:sshPublicKey`, read when `pulumi up` runs) and the host setup script."""

from __future__ import annotations

import base64

import pulumi

from gpufleet.compile import KEY_CONFIG, BastionPlan, FleetPlan, host_script, render_server

_MISSING = ("no SSH public key for {what}: set `access: {{ssh_public_key: file:~/.ssh/"
            "id_ed25519.pub}}` in the backends file, or run `pulumi config set " + KEY_CONFIG
            + " \"$(cat ~/.ssh/id_ed25519.pub)\"`")


def public_key(key: str | None, what: str) -> str:
    if key:
        return key
    name = KEY_CONFIG.split(":", 1)[1]
    found = pulumi.Config("gpufleet").get(name)
    if not found:
        raise pulumi.RunError(_MISSING.format(what=what))
    return found.strip()


def boot_script(plan: FleetPlan) -> str | None:
    """The host setup script of the plan's nodes (None with `host_setup: none`)."""
    return host_script(plan.host_setup) if plan.host_setup is not None else None


def boot_script_b64(plan: FleetPlan) -> str | None:
    """The same, base64-encoded, as EC2 launch data and Azure custom data take it."""
    script = boot_script(plan)
    return base64.b64encode(script.encode("utf-8")).decode("ascii") if script else None


def server_script(bastion: BastionPlan) -> str | None:
    """The control plane's boot script (dstack server), when the bastion hosts it."""
    return render_server(bastion.server) if bastion.server is not None else None


def server_script_b64(bastion: BastionPlan) -> str | None:
    script = server_script(bastion)
    return base64.b64encode(script.encode("utf-8")).decode("ascii") if script else None
