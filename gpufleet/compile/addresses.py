"""The address step of the compiler: each backend's pool divided among the fleets and
gateways on it, keeping every block the lock records. Pure.

A block recorded in the lock stays where it is while it lies in the pool; blocks recorded
for entries of other files are never handed out; fleets locked before blocks were recorded
are placed first, as they always were; new fleets come last. So adding, removing, renaming
or moving one fleet never moves another fleet's network, and a request that cannot fit is
an error naming who holds the pool, never a silent move.
"""

from __future__ import annotations

import ipaddress
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from ipaddress import IPv4Network

from gpufleet.backends import traits_of
from gpufleet.codes import C004, C010, C016
from gpufleet.compile.cidr import AllocationError, allocate_blocks, fits
from gpufleet.compile.planners import PLANNERS
from gpufleet.diagnostics import Diagnostic, Severity
from gpufleet.input import FleetSpec, Inputs, Lock, LockEntry, Origin
from gpufleet.offers import LockStatus, Selection


def address_key(fleet: FleetSpec) -> str:
    """A fleet's address block follows its first name, so a rename with `previous_names`
    (oldest first) keeps its ranges and nothing is replaced."""
    return fleet.previous_names[0] if fleet.previous_names else fleet.name


def gateway_key(name: str) -> str:
    """Gateways share a backend's pool with fleets; the prefix keeps the names apart."""
    return f"gateway:{name}"


def pool_for(inputs: Inputs, backend: str) -> str:
    cfg = inputs.backend(backend)
    return (cfg.cidr if cfg is not None and cfg.cidr else None) or traits_of(backend).address_pool


# What the planner of a backend without networks (traits `networkless`) gets for a block:
# nothing is allocated, and the lock records none.
NO_BLOCK = IPv4Network("0.0.0.0/32")


@dataclass(frozen=True, slots=True)
class Addresses:
    """The blocks of one compile: by fleet name and by ``gateway:<name>``."""

    blocks: Mapping[str, IPv4Network] = field(default_factory=dict)
    # Blocks that differ from the one the lock records (the pool changed): name -> old.
    moved: Mapping[str, str] = field(default_factory=dict)
    diagnostics: tuple[Diagnostic, ...] = ()


@dataclass(frozen=True, slots=True)
class _Claim:
    """One fleet or gateway asking for a block: its allocation key, its lock entry."""

    key: str
    name: str  # fleet name, or gateway:<name>
    origin: Origin
    previous: LockEntry | None


def _claims(inputs: Inputs, sels: Sequence[Selection], backend: str,
            fleet_locks: Mapping[str, LockStatus],
            gateway_locks: Mapping[str, LockStatus]) -> list[_Claim]:
    out = [_Claim(address_key(s.fleet), s.fleet.name, s.fleet.origin,
                  _st_previous(fleet_locks.get(s.fleet.name))) for s in sels]
    out += [_Claim(gateway_key(g.name), gateway_key(g.name), g.origin,
                   _st_previous(gateway_locks.get(g.name)))
            for g in inputs.gateways if g.backend == backend]
    return out


def _st_previous(st: LockStatus | None) -> LockEntry | None:
    return st.previous if st is not None else None


def _block(entry: LockEntry | None, backend: str) -> IPv4Network | None:
    if entry is None or entry.backend != backend or not entry.cidr:
        return None
    return IPv4Network(entry.cidr)


def _reserved(lock: Lock | None, backend: str, claims: Iterable[_Claim]) -> dict[str, IPv4Network]:
    """Blocks the lock records for entries no current fleet or gateway takes over."""
    if lock is None:
        return {}
    used = {id(c.previous) for c in claims if c.previous is not None}
    entries = [*((f"fleet {n}", e) for n, e in lock.fleets.items()),
               *((f"gateway {n}", e) for n, e in lock.gateways.items())]
    return {label: block for label, e in entries
            if id(e) not in used and (block := _block(e, backend)) is not None}


def allocate_addresses(inputs: Inputs, chosen: Sequence[Selection], lock: Lock | None = None,
                       fleet_locks: Mapping[str, LockStatus] | None = None,
                       gateway_locks: Mapping[str, LockStatus] | None = None) -> Addresses:
    """Each backend's address pool divided among the fleets and gateways on it; fleets on a
    backend gpufleet cannot build are reported instead."""
    diags: list[Diagnostic] = []
    by_backend: dict[str, list[Selection]] = defaultdict(list)
    for s in chosen:
        assert s.best is not None
        by_backend[s.best.backend].append(s)
    blocks: dict[str, IPv4Network] = {}
    moved: dict[str, str] = {}
    for backend in sorted(set(by_backend) | {g.backend for g in inputs.gateways}):
        sels = by_backend.get(backend, [])
        impl = PLANNERS.get(backend)
        if impl is None:
            diags += [s.fleet.origin.at("backends", C010, f"fleet '{s.fleet.name}': the "
                              f"cheapest offer is on {backend}, which gpufleet cannot build yet",
                              f"set `backends:` to {', '.join(sorted(PLANNERS))}")
                      for s in sels]
            continue
        if traits_of(backend).networkless:
            continue
        claims = _claims(inputs, sels, backend, fleet_locks or {}, gateway_locks or {})
        pool = ipaddress.IPv4Network(pool_for(inputs, backend))
        recorded = {c.key: b for c in claims if (b := _block(c.previous, backend)) is not None}
        first = {c.key for c in claims if c.previous is not None
                 and c.previous.backend == backend and not c.previous.cidr}
        try:
            allocated = allocate_blocks(pool, [c.key for c in claims], impl.fleet_prefix,
                                        recorded, _reserved(lock, backend, claims), first)
        except AllocationError as e:
            hint = ("the lock was edited or merged by hand: restore it, or run `gpufleet lock`"
                    if "both record" in str(e) else
                    "give the backend a larger `cidr` in the backends file, or fewer fleets")
            diags += [c.origin.at("backends", C004, f"address pool for {backend}: {e}", hint)
                      for c in claims]
            continue
        for c in claims:
            blocks[c.name] = allocated[c.key]
            old = recorded.get(c.key)
            if old is not None and not fits(old, pool, impl.fleet_prefix):
                moved[c.name] = str(old)
                diags.append(c.origin.at(
                    "backends", C016, f"{c.name.replace('gateway:', 'gateway ')}: the lock "
                    f"records the address block {old}, which the {backend} pool {pool} no "
                    f"longer holds; it moves to {allocated[c.key]}, and `pulumi up` replaces "
                    "its networks and every node on them", "keep the old `cidr` in the "
                    "backends file if the move is not intended", Severity.WARNING))
    return Addresses(blocks, moved, tuple(diags))
