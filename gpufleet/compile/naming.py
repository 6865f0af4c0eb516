"""Logical names of every cloud resource, made from YAML names only. Pure.

Names never contain regions, offers, list positions of files or random parts, so
re-planning the same YAML gives the same URNs, and changing the chosen offer, the node
count or another fleet never renames anything. Every child name starts with its fleet or
gateway name, so a Pulumi alias on the component also moves its children.
"""

from __future__ import annotations


def child(owner: str, role: str, index: int | None = None) -> str:
    """``a4-net``, ``a4-roce-3``, ``a4-node-0``."""
    return f"{owner}-{role}" if index is None else f"{owner}-{role}-{index}"


def node(fleet: str, index: int) -> str:
    return child(fleet, "node", index)


def provider(backend: str, scope: str | None, region: str) -> str:
    """Explicit provider per (backend, account/project/subscription, region)."""
    return "-".join(p for p in (backend, scope, region) if p)


def network_tag(fleet: str) -> str:
    """The tag/label that scopes a fleet's firewall rules to its own nodes."""
    return f"gpufleet-{fleet}"
