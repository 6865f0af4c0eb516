"""Deterministic IPv4 address allocation for fleet networks. Pure.

Each fleet gets one block of a backend's pool (``cidr`` in the backends file). A block's
position comes from a hash of the fleet *name* only, probed in a fixed order, so that
re-planning the same YAML always gives the same ranges and adding, removing or editing
another fleet leaves a fleet's range alone (unless two names hash to the same block, in
which case the name that sorts first keeps it). Inside a block, subnets are packed largest
first, so the layout of one fleet depends only on that fleet's recipe.
"""

from __future__ import annotations

import hashlib
import ipaddress
from collections.abc import Iterable, Sequence
from ipaddress import IPv4Network

DEFAULT_POOLS = {"aws": "10.0.0.0/8", "gcp": "10.0.0.0/8", "azure": "10.128.0.0/9"}
FLEET_PREFIX = 16
MAX_PROBES = 64


class AllocationError(ValueError):
    pass


def _probe(name: str, attempt: int, slots: int) -> int:
    digest = hashlib.sha256(f"{name}#{attempt}".encode()).digest()
    return int.from_bytes(digest[:8], "big") % slots


def allocate_blocks(pool: str | IPv4Network, names: Iterable[str],
                    prefix: int = FLEET_PREFIX) -> dict[str, IPv4Network]:
    """One ``/prefix`` block of ``pool`` per name; the same names always get the same blocks."""
    net = ipaddress.IPv4Network(pool)
    if net.prefixlen > prefix:
        raise AllocationError(f"pool {net} is smaller than one /{prefix} fleet block")
    blocks = list(net.subnets(new_prefix=prefix))
    unique = sorted(set(names))
    if len(unique) > len(blocks):
        raise AllocationError(f"pool {net} holds {len(blocks)} fleet block(s) of /{prefix}, "
                              f"but {len(unique)} fleets need one")
    taken: dict[int, str] = {}
    out: dict[str, IPv4Network] = {}
    for name in unique:
        for attempt in range(MAX_PROBES):
            slot = _probe(name, attempt, len(blocks))
            if slot not in taken:
                break
        else:  # a nearly full pool: fall back to the first free block in address order
            slot = next(i for i in range(len(blocks)) if i not in taken)
        taken[slot] = name
        out[name] = blocks[slot]
    return out


def pack(block: IPv4Network, requests: Sequence[tuple[str, int]]) -> dict[str, IPv4Network]:
    """Place each (key, prefixlen) request inside ``block``: largest first, then request order.

    Raises AllocationError when the requests do not fit.
    """
    order = sorted(range(len(requests)), key=lambda i: (requests[i][1], i))
    cursor = int(block.network_address)
    end = int(block.broadcast_address) + 1
    out: dict[str, IPv4Network] = {}
    for i in order:
        key, plen = requests[i]
        if plen < block.prefixlen:
            raise AllocationError(f"/{plen} for {key} does not fit in {block}")
        size = 1 << (32 - plen)
        cursor = (cursor + size - 1) // size * size  # align
        if cursor + size > end:
            raise AllocationError(f"{block} has no room for /{plen} ({key})")
        out[key] = IPv4Network((cursor, plen))
        cursor += size
    return out


def split(net: IPv4Network, count: int) -> list[IPv4Network]:
    """``net`` cut into ``count`` equal parts (count a power of two)."""
    bits = (count - 1).bit_length()
    if 1 << bits != count:
        raise AllocationError(f"cannot split {net} into {count} equal subnets")
    return list(net.subnets(prefixlen_diff=bits))


def usable_hosts(net: IPv4Network, reserved: int) -> int:
    """Addresses a cloud lets instances use (AWS reserves 5 per subnet, GCP 4, Azure 5)."""
    return max(0, net.num_addresses - reserved)
