"""`gpufleet lock`: compiled offers + the old lock -> the new lock entries and what moved.

Entries whose requirements are unchanged are kept exactly as they were (same offer, same
lock-time price), so re-locking never touches unrelated fleets. Pure.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Collection
from dataclasses import dataclass

from gpufleet.compile import Compiled, gateway_key
from gpufleet.input import Inputs, Lock, LockEntry
from gpufleet.offers import (
    HOURS_PER_MONTH,
    LOCKED,
    Catalog,
    entry_from_offer,
    gateway_entry,
    load_prices,
)
from gpufleet.review.bill import overhead_rates


@dataclass(frozen=True, slots=True)
class Move:
    """One entry that differs from the old lock."""

    kind: str  # "fleet" or "gateway"
    name: str
    status: str  # new, changed, upgraded, removed
    old: LockEntry | None
    new: LockEntry | None
    nodes: int = 0  # nodes of the fleet (what a new offer replaces)

    @property
    def readdressed(self) -> bool:
        """The address block moved (both recorded, and different)."""
        return self.old is not None and self.new is not None and bool(
            self.old.cidr and self.new.cidr and self.old.cidr != self.new.cidr)

    @property
    def replaces(self) -> int:
        """Nodes `pulumi up` replaces: all of them when the machine, the place or the
        address block changes."""
        if self.old is None or self.new is None or (self.old.same_offer(self.new)
                                                    and not self.readdressed):
            return 0
        return self.nodes

    @property
    def delta_per_hour(self) -> float | None:
        """Cost difference per hour for the whole fleet; None when a price is unknown."""
        if self.old is None or self.new is None or self.old.price is None \
                or self.new.price is None:
            return None
        return (self.new.price - self.old.price) * max(self.nodes, 1)

    def text(self) -> str:
        if self.status == "removed":
            assert self.old is not None
            return f"{self.kind} {self.name}: removed from the lock ({self.old.short()})"
        assert self.new is not None
        if self.old is None:
            return f"{self.kind} {self.name}: new entry {self.new.short()}"
        if self.status == "readdressed":
            return (f"{self.kind} {self.name}: address block {self.old.cidr} -> {self.new.cidr} "
                    f"(the backends file's pool no longer holds the old one): its networks are "
                    f"replaced, and with them {self.replaces} node(s)")
        out = f"{self.kind} {self.name}: {self.status} {self.old.short()} -> {self.new.short()}"
        if self.readdressed:
            out += f", address block {self.old.cidr} -> {self.new.cidr}"
        if self.old.same_offer(self.new) and not self.readdressed:
            return out + " (same machine and place, nothing replaced)"
        delta = self.delta_per_hour
        if delta is not None:
            out += (f", {'+' if delta >= 0 else '-'}${abs(delta):,.2f}/h "
                    f"({'+' if delta >= 0 else '-'}${abs(delta) * HOURS_PER_MONTH:,.0f}/month)")
        return out + f", replaces {self.replaces} node(s)"


@dataclass(frozen=True, slots=True)
class Relocked:
    fleets: dict[str, LockEntry]
    gateways: dict[str, LockEntry]
    moves: tuple[Move, ...]
    kept: tuple[str, ...]  # entries of fleets/gateways not in the inputs, kept as they were
    recorded: tuple[str, ...] = ()  # entries whose address block was recorded for the first time
    priced: tuple[str, ...] = ()  # locked entries whose overhead prices were recorded now


def _with_block(kind: str, name: str, previous: LockEntry, block: str | None,
                nodes: int, moves: list[Move], recorded: list[str]) -> LockEntry:
    """A locked entry with the block the compile allocated: recorded the first time, a move
    when the pool no longer holds the old one."""
    entry = dataclasses.replace(previous, name=name, cidr=block or previous.cidr)
    if block and not previous.cidr:
        recorded.append(f"{kind} {name}")
    elif block and previous.cidr != block:
        moves.append(Move(kind, name, "readdressed", previous, entry, nodes))
    return entry


def relock(inputs: Inputs, compiled: Compiled, lock: Lock, catalog: Catalog,
           prune: bool = False) -> Relocked:
    fleets: dict[str, LockEntry] = {}
    gateways: dict[str, LockEntry] = {}
    moves: list[Move] = []
    recorded: list[str] = []
    consumed: set[tuple[str, str]] = set()
    nodes = {p.name: p.nodes for p in compiled.plans}
    plans = {p.name: p for p in compiled.plans}
    for sel in compiled.selections:
        name = sel.fleet.name
        st = compiled.fleet_locks[name]
        block = compiled.blocks.get(name)
        count = nodes.get(name, sel.fleet.nodes.target)
        if st.previous is not None:
            consumed.add(("fleet", st.previous.name))
        if st.status == LOCKED and st.previous is not None:
            fleets[name] = _with_block("fleet", name, st.previous, block, count, moves,
                                       recorded)
            continue
        assert sel.best is not None  # compile errors stop `lock` before this
        entry = entry_from_offer(name, st.digest, sel.best, catalog, block)
        planned = plans.get(name)
        if planned is not None and planned.reservation:
            entry = dataclasses.replace(entry, reservation=planned.reservation)
        fleets[name] = entry
        if st.previous is not None and entry == dataclasses.replace(st.previous, name=name):
            continue  # upgraded to exactly what it had: nothing to report
        moves.append(Move("fleet", name, st.status, st.previous, entry, count))
    for gp in compiled.gateways:
        st = compiled.gateway_locks[gp.name]
        block = compiled.blocks.get(gateway_key(gp.name))
        if st.previous is not None:
            consumed.add(("gateway", st.previous.name))
        if st.status == LOCKED and st.previous is not None:
            gateways[gp.name] = _with_block("gateway", gp.name, st.previous, block,
                                            gp.replicas, moves, recorded)
            continue
        entry = gateway_entry(gp.name, st.digest, gp.backend, gp.region, None,
                              gp.instance_type, catalog, block)
        gateways[gp.name] = entry
        if entry == st.previous:
            continue
        moves.append(Move("gateway", gp.name, st.status, st.previous, entry, gp.replicas))
    kept: list[str] = []
    for kind, old_table, new_table in (("fleet", lock.fleets, fleets),
                                       ("gateway", lock.gateways, gateways)):
        for name, entry in old_table.items():
            if name in new_table or (kind, name) in consumed:
                continue
            if prune:
                moves.append(Move(kind, name, "removed", entry, None))
            else:
                new_table[name] = entry
                kept.append(f"{kind} {name}")
    priced = _record_overheads(compiled, fleets, gateways, catalog)
    return Relocked(fleets, gateways, tuple(moves), tuple(kept), tuple(recorded),
                    tuple(priced))


def _record_overheads(compiled: Compiled, fleets: dict[str, LockEntry],
                      gateways: dict[str, LockEntry], catalog: Catalog) -> list[str]:
    """Give every planned entry without one its overhead prices (what it runs beside the
    instances, from the price table): recorded once, kept like the offer's price."""
    prices = load_prices()
    recorded = []
    for table, plans, kind, status in (
            (fleets, compiled.plans, "fleet", compiled.fleet_locks),
            (gateways, compiled.gateways, "gateway", compiled.gateway_locks)):
        for plan in plans:
            entry = table.get(plan.name)
            if entry is None or entry.overhead is not None:
                continue
            fixed, per_node = overhead_rates(plan, prices, catalog)
            table[plan.name] = dataclasses.replace(
                entry, overhead=(fixed, per_node, prices.describe()))
            st = status.get(plan.name)
            if st is not None and st.status == LOCKED:
                recorded.append(f"{kind} {plan.name}")
    return recorded


def unknown_names(names: Collection[str], inputs: Inputs) -> list[str]:
    known = {f.name for f in inputs.fleets} | {g.name for g in inputs.gateways}
    return sorted(set(names) - known)


def total_delta(moves: Collection[Move]) -> float:
    return sum(d for m in moves if (d := m.delta_per_hour) is not None and not math.isnan(d))


def lock_report(relocked: Relocked, upgrade: bool) -> list[str]:
    """What `gpufleet lock` says of a relock: each move, the upgrade total, kept entries."""
    lines = [m.text() for m in relocked.moves]
    if upgrade and relocked.moves:
        delta = total_delta(relocked.moves)
        replaced = sum(m.replaces for m in relocked.moves)
        lines.append(f"upgrade: {'+' if delta >= 0 else '-'}${abs(delta):,.2f}/h in total, "
                     f"replaces {replaced} node(s)")
    if relocked.recorded:
        n = len(relocked.recorded)
        lines.append(f"recorded the address block of {n} entr{'y' if n == 1 else 'ies'} "
                     f"({', '.join(relocked.recorded)}): the blocks they have now, so adding, "
                     "removing or moving other fleets never moves them")
    if relocked.priced:
        n = len(relocked.priced)
        lines.append(f"recorded the overhead prices of {n} entr{'y' if n == 1 else 'ies'} "
                     f"({', '.join(relocked.priced)}): what they run beside the instances; "
                     "no offer moves")
    if relocked.kept:
        kept = relocked.kept
        lines.append(f"kept {len(kept)} entr{'y' if len(kept) == 1 else 'ies'} not in these "
                     f"files ({', '.join(kept)}); --prune drops them")
    return lines

