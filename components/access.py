"""The SSH key a fleet's nodes and bastion get: from the plan (the backends file), else from
the stack config `gpufleet:sshPublicKey`, read when `pulumi up` runs."""

from __future__ import annotations

import pulumi

from gpufleet.compile import KEY_CONFIG

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
