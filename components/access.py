"""What every node boots with: the SSH key (from the plan, else from the stack config
`gpufleet:sshPublicKey`, read when `pulumi up` runs) and the host setup script."""

from __future__ import annotations

import base64
from collections.abc import Mapping
from typing import Any

import pulumi

from gpufleet.compile import KEY_CONFIG, BastionDesign, FleetDesign, node_script, render_server

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


def boot_script(plan: FleetDesign,
                targets: Mapping[str, pulumi.Output[str | None]] | None = None) -> Any:
    """What the plan's nodes boot with (a string, or an output once it waits on the fleet's
    filesystems): the host setup script and the mounts of the fleet's filesystems, filled in
    with their targets when the stack knows them (None with `host_setup: none` and no
    filesystem)."""
    if not plan.filesystems or not targets:
        return node_script(plan)
    names = sorted(targets)

    def fill(values: list[Any]) -> Any:
        return node_script(plan, {n: v for n, v in zip(names, values, strict=True) if v})

    return pulumi.Output.all(*(targets[n] for n in names)).apply(fill)


def boot_script_b64(plan: FleetDesign,
                    targets: Mapping[str, pulumi.Output[str | None]] | None = None) -> Any:
    """The same, base64-encoded, as EC2 launch data and Azure custom data take it."""
    script = boot_script(plan, targets)
    if script is None or isinstance(script, str):
        return _b64(script)
    return script.apply(_b64)


def _b64(text: Any) -> Any:
    return base64.b64encode(str(text).encode("utf-8")).decode("ascii") if text else None


def server_script(bastion: BastionDesign) -> str | None:
    """The control plane's boot script (dstack server), when the bastion hosts it."""
    return render_server(bastion.server) if bastion.server is not None else None


def server_script_b64(bastion: BastionDesign) -> str | None:
    result: str | None = _b64(server_script(bastion))
    return result
