"""Lambda's offline answers for `gpufleet plan`: no lookups, and the outputs the API gives its
resources (ids, addresses, a filesystem's mount point). Every value is a placeholder that says
so (``mock-...``)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from gpufleet.backends.lambda_ import names

from ..registry import Invoke


def invokes(dns_zones: Iterable[str]) -> dict[str, Invoke]:
    return {}


def outputs(typ: str, name: str, inputs: dict[str, Any]) -> dict[str, Any]:
    if typ == names.INSTANCE:  # launched: its addresses come with its wait (READY)
        return {"instance_id": f"mock-instance-id-of-{name}", "ip": None, "private_ip": None,
                "hostname": None, "status": "booting"}
    if typ == names.READY:
        node = name.removesuffix("-ready")
        return {"ip": f"mock-public-ip-of-{node}", "private_ip": f"mock-private-ip-of-{node}",
                "hostname": f"mock-hostname-of-{node}", "status": "active"}
    if typ == names.FIREWALL:
        return {"ruleset_id": f"mock-ruleset-id-of-{name}"}
    if typ == names.SSH_KEY:
        return {"key_id": f"mock-key-id-of-{name}"}
    if typ == names.FILESYSTEM:
        return {"filesystem_id": f"mock-filesystem-id-of-{name}",
                "mount_point": f"/lambda/nfs/{inputs.get('name', name)}"}
    return {}
