"""Deterministic IPv4 address allocation for fleet networks. Pure.

Each fleet gets one block of a backend's pool (``cidr`` in the backends file). The lock
records every fleet's block next to its offer, and a recorded block is kept while it lies in
the pool, so adding, removing, renaming or moving another fleet never moves a fleet's
network. A fleet without a recorded block gets the block a hash of its *name* points at,
probed in a fixed order past the blocks already taken; fleets locked before blocks were
recorded are placed before new ones, so they land where they always did. Inside a block,
subnets are packed largest first, so the layout of one fleet depends only on that fleet's
recipe.
"""

from __future__ import annotations

import hashlib
import ipaddress
from collections.abc import Collection, Iterable, Mapping, Sequence
from ipaddress import IPv4Network

FLEET_PREFIX = 16
MAX_PROBES = 64


class AllocationError(ValueError):
    pass


def _probe(name: str, attempt: int, slots: int) -> int:
    digest = hashlib.sha256(f"{name}#{attempt}".encode()).digest()
    return int.from_bytes(digest[:8], "big") % slots


def fits(block: IPv4Network, pool: IPv4Network, prefix: int) -> bool:
    """A recorded block is usable while it is one whole block of the pool's division."""
    return block.prefixlen == prefix and block.subnet_of(pool)


def allocate_blocks(pool: str | IPv4Network, names: Iterable[str],
                    prefix: int = FLEET_PREFIX,
                    recorded: Mapping[str, IPv4Network] | None = None,
                    reserved: Mapping[str, IPv4Network] | None = None,
                    first: Collection[str] = ()) -> dict[str, IPv4Network]:
    """One ``/prefix`` block of ``pool`` per name.

    Args:
        recorded: blocks the lock records for some of the names: kept where they fit the
            pool (after the pool itself changed, such a name is placed anew).
        reserved: blocks held by lock entries that are not among the names (fleets of other
            files): never handed out.
        first: names placed by hash before the others (fleets locked before blocks were
            recorded: they get the block they always had).

    Raises:
        AllocationError: two names record one block, or the pool has no free block left;
            the message names the holders and the free space.
    """
    net = ipaddress.IPv4Network(pool)
    if net.prefixlen > prefix:
        raise AllocationError(f"pool {net} is smaller than one /{prefix} fleet block")
    blocks = _Blocks(net, prefix)
    wanted = sorted(set(names))
    taken: dict[int, str] = {}
    out: dict[str, IPv4Network] = {}
    held = {**{f"{n} (another file)": b for n, b in (reserved or {}).items()},
            **{n: b for n, b in (recorded or {}).items() if n in wanted}}
    for name, block in sorted(held.items()):
        if not fits(block, net, prefix):
            continue
        slot = blocks.index(block)
        if slot in taken:
            raise AllocationError(f"{taken[slot]} and {name} both record {block} in the lock")
        taken[slot] = name
        if name in wanted:
            out[name] = block
    later = [n for n in wanted if n not in out]
    for name in [*[n for n in later if n in first], *[n for n in later if n not in first]]:
        free = _free_slot(name, taken, len(blocks))
        if free is None:
            raise AllocationError(_full(net, prefix, name, taken, blocks))
        taken[free] = name
        out[name] = blocks[free]
    return out


class _Blocks:
    """The ``/prefix`` blocks of ``net`` in address order, each made when asked for (a /9
    pool holds 2,048 blocks of /20; a plan asks for a few)."""

    def __init__(self, net: IPv4Network, prefix: int) -> None:
        self.base = int(net.network_address)
        self.prefix = prefix
        self.size = 1 << (32 - prefix)
        self.count = 1 << (prefix - net.prefixlen)

    def __len__(self) -> int:
        return self.count

    def __getitem__(self, slot: int) -> IPv4Network:
        if not 0 <= slot < self.count:
            raise IndexError(slot)
        return IPv4Network((self.base + slot * self.size, self.prefix))

    def index(self, block: IPv4Network) -> int:
        """The slot of a block that ``fits`` the pool's division."""
        return (int(block.network_address) - self.base) // self.size


def _free_slot(name: str, taken: Mapping[int, str], slots: int) -> int | None:
    for attempt in range(MAX_PROBES):
        slot = _probe(name, attempt, slots)
        if slot not in taken:
            return slot
    # a nearly full pool: the first free block in address order
    return next((i for i in range(slots) if i not in taken), None)


def _full(net: IPv4Network, prefix: int, name: str, taken: Mapping[int, str],
          blocks: _Blocks) -> str:
    holders = sorted(taken.items())
    shown = ", ".join(f"{n} {blocks[i]}" for i, n in holders[:5])
    more = f" (+{len(holders) - 5})" if len(holders) > 5 else ""
    return (f"pool {net} holds {len(blocks)} block(s) of /{prefix} and all are taken "
            f"({shown}{more}); '{name}' does not fit, 0 free")


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
