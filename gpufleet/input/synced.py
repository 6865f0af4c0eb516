"""What `gpufleet gateway sync` read from the dstack server: each gateway's address(es) or
load balancer host name, kept in the stack config (`gpufleet:gateways`) so that the stack
program points the `*.<domain>` record at dstack's gateway. Pure.

dstack 0.22.5 reports a gateway's load balancer as `Gateway.hostname` and, without one, each
replica's address as `replicas[i].hostname` ("users are expected to point the gateway's
wildcard domain name to `replicas[i].hostname`", dstack: core/models/gateways.py).
"""

from __future__ import annotations

import ipaddress
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

# RFC 1123 host names: dot-separated labels of letters, digits and hyphens, at most 253 long.
_HOST = re.compile(r"(?=.{1,253}$)([a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?)"
                   r"(\.[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?)+\.?", re.IGNORECASE)
MAX_TARGETS = 16  # dstack allows 3 replicas (GATEWAY_MAX_REPLICAS); room to spare, no more


class SyncedError(ValueError):
    """A `gpufleet:gateways` value gpufleet cannot use; the message says where."""


@dataclass(frozen=True, slots=True)
class SyncedGateway:
    """One gateway as dstack reported it."""

    project: str
    backend: str
    region: str
    targets: tuple[str, ...]  # IPv4 addresses (one per replica) or one host name
    status: str = ""
    synced_at: str = ""

    @property
    def is_hostname(self) -> bool:
        """The target is a DNS name (a load balancer): the record is a CNAME or an alias."""
        return len(self.targets) == 1 and not is_ipv4(self.targets[0])

    def to_json(self) -> dict[str, Any]:
        return {"project": self.project, "backend": self.backend, "region": self.region,
                "targets": list(self.targets), "status": self.status,
                "synced_at": self.synced_at}


def is_ipv4(value: str) -> bool:
    try:
        ipaddress.IPv4Address(value)
    except ValueError:
        return False
    return True


def check_targets(targets: Any, where: str) -> tuple[str, ...]:
    """The targets as a tuple, or a SyncedError: IPv4 addresses, or exactly one host name."""
    if not isinstance(targets, list) or not all(isinstance(t, str) for t in targets):
        raise SyncedError(f"{where}: `targets` must be a list of strings")
    if len(targets) > MAX_TARGETS:
        raise SyncedError(f"{where}: {len(targets)} targets; at most {MAX_TARGETS}")
    if len(set(targets)) != len(targets):
        raise SyncedError(f"{where}: a target is listed twice")
    names = [t for t in targets if not is_ipv4(t)]
    bad = [t for t in names if not _HOST.fullmatch(t) or t.replace(".", "").isdigit()]
    if bad:
        raise SyncedError(f"{where}: {bad[0]!r} is neither an IPv4 address nor a host name")
    if names and len(targets) > 1:
        raise SyncedError(f"{where}: a host name ({names[0]}) cannot share the record with "
                          "other targets (a CNAME stands alone)")
    return tuple(t.rstrip(".").lower() if t in names else t for t in targets)


def parse_gateways(raw: str | None) -> dict[str, SyncedGateway]:
    """`gpufleet:gateways` (JSON, as Pulumi hands it over) -> gateway name -> what dstack
    reported. Absent or empty: {}."""
    if not raw:
        return {}
    try:
        data = json.loads(raw)
    except ValueError:
        raise SyncedError("the stack config `gpufleet:gateways` is not JSON; run `gpufleet "
                          "gateway sync` again to rewrite it") from None
    if not isinstance(data, dict):
        raise SyncedError("the stack config `gpufleet:gateways` must map gateway names to "
                          "what `gpufleet gateway sync` read")
    out: dict[str, SyncedGateway] = {}
    for name, entry in data.items():
        where = f"gpufleet:gateways.{name}"
        if not isinstance(entry, dict):
            raise SyncedError(f"{where}: not a mapping")
        fields = {k: entry.get(k) for k in ("project", "backend", "region")}
        missing = [k for k, v in fields.items() if not isinstance(v, str) or not v]
        if missing:
            raise SyncedError(f"{where}: `{missing[0]}` is missing; run `gpufleet gateway "
                              "sync` again")
        out[str(name)] = SyncedGateway(
            str(fields["project"]), str(fields["backend"]), str(fields["region"]),
            check_targets(entry.get("targets"), where), str(entry.get("status") or ""),
            str(entry.get("synced_at") or ""))
    return out


def gateways_json(gateways: Mapping[str, SyncedGateway]) -> str:
    """The stack config value, one line of JSON with sorted keys (a stable diff in the
    stack file)."""
    return json.dumps({n: g.to_json() for n, g in sorted(gateways.items())},
                      sort_keys=True, separators=(",", ":"))
