"""The cost guard: each fleet's and gateway's hourly cost before and after a change.

Before is what runs now: the export's instances for `diff` and `up`, priced from the lock
(its price per node-hour and the overhead prices beside the instances) where it has the
entry, else from today's catalog and price table; `plan` starts from an empty stack, so its
before is $0. After is the plan's whole bill (``gpufleet.review.bill``). An entry locked
before overheads were recorded is taken to have today's overhead. Pure.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from gpufleet.compile import FleetDesign, GatewayDesign, VolumeDesign
from gpufleet.input import Lock
from gpufleet.offers import HOURS_PER_MONTH, Catalog, load_prices
from gpufleet.review.bill import fleet_bill, gateway_bill, overhead_rates, volume_bill


@dataclass(frozen=True, slots=True)
class FleetCost:
    name: str
    before: float  # $/h
    after: float  # $/h

    @property
    def delta(self) -> float:
        return self.after - self.before


@dataclass(frozen=True, slots=True)
class Costs:
    fleets: tuple[FleetCost, ...]
    basis: str  # what "before" is made of

    @property
    def before(self) -> float:
        return sum(f.before for f in self.fleets)

    @property
    def after(self) -> float:
        return sum(f.after for f in self.fleets)

    @property
    def increase_pct(self) -> float | None:
        if self.before <= 0:
            return None
        if abs(self.after - self.before) < 1e-4:  # the lock's rounding, not a change
            return 0.0
        return 100.0 * (self.after - self.before) / self.before

    def lines(self) -> list[str]:
        pct = self.increase_pct
        head = (f"cost: ${self.before:,.2f}/h -> ${self.after:,.2f}/h "
                f"(${self.before * HOURS_PER_MONTH:,.0f} -> ${self.after * HOURS_PER_MONTH:,.0f}"
                f"/month" + (f", {pct:+.1f}%" if pct is not None else "") + f"; before = "
                f"{self.basis})")
        return [head] + [f"  {f.name}: ${f.before:,.2f}/h -> ${f.after:,.2f}/h "
                         f"({'+' if f.delta > -0.005 else '-'}${abs(f.delta):,.2f}/h)"
                         for f in self.fleets if f.before or f.after]


def _price(value: float | None) -> float:
    return 0.0 if value is None or math.isnan(value) else float(value)


def fleet_costs(plans: Sequence[FleetDesign], lock: Lock | None,
                running: Mapping[str, int] | None = None,
                gateways: Sequence[GatewayDesign] = (),
                catalog: Catalog | None = None, volumes: Sequence[VolumeDesign] = ()) -> Costs:
    """Each fleet's and gateway's whole bill per hour, before and after (nodes and what runs
    beside them: bastion, NAT, addresses, disks, load balancer, DNS zone).

    Before is what runs: ``running`` (fleet, gateway or `volume:NAME` -> its running nodes,
    from a stack export) priced from the lock where it has the entry, else from the catalog
    at today's offer; without ``running`` the stack is taken to be empty ($0 before)."""
    prices = load_prices()
    held = running or {}
    out: list[FleetCost] = []
    from_lock: list[str] = []
    from_catalog: list[str] = []

    def was(name: str, entry: Any, fallback: tuple[float, float, float] | None,
            count: int) -> float:
        """The hourly cost of ``count`` running nodes: the lock's, else today's prices."""
        if entry is not None:
            fixed, per_node = entry.overhead[:2] if entry.overhead else (
                fallback[1:] if fallback else (0.0, 0.0))
            from_lock.append(name)
            return (_price(entry.price) + per_node) * count + fixed
        if fallback is None:
            return 0.0
        from_catalog.append(name)
        price, fixed, per_node = fallback
        return (price + per_node) * count + fixed

    names = {p.name for p in plans}
    for p in plans:
        entry = lock.fleets.get(p.name) if lock is not None else None
        fixed, per_node = overhead_rates(p, prices, catalog)
        before = was(p.name, entry, (_price(p.price_per_hour), fixed, per_node),
                     held[p.name]) if p.name in held else 0.0
        out.append(FleetCost(p.name, before, fleet_bill(p, prices, catalog).total))
    for name, count in sorted(held.items()):  # fleets the YAML no longer has
        entry = lock.fleets.get(name) if lock is not None else None
        if name not in names and entry is not None:
            out.append(FleetCost(name, was(name, entry, None, count), 0.0))
    for g in gateways:
        entry = lock.gateways.get(g.name) if lock is not None else None
        now = gateway_bill(g, prices, catalog).total
        out.append(FleetCost(g.name, was(g.name, entry, (0.0, now, 0.0), 0)
                             if g.name in held else 0.0, now))
    for v in volumes:  # no offer to lock: the file is the record; the export says if it exists
        if v.created:
            now = volume_bill(v, prices).total
            key = f"volume:{v.name}"
            out.append(FleetCost(key, was(key, None, (0.0, now, 0.0), 0)
                                 if key in held else 0.0, now))
    return Costs(tuple(out), _basis(running is not None, from_lock, from_catalog))


def _basis(deployed: bool, from_lock: Sequence[str], from_catalog: Sequence[str]) -> str:
    """What "before" is made of, in words."""
    if not deployed:
        return ("$0: the plan starts from an empty stack (`gpufleet diff --state` prices "
                "what runs)")
    if not from_lock and not from_catalog:
        return "$0: the stack runs none of these"
    parts = []
    if from_lock:
        parts.append(f"the lock's prices for {', '.join(from_lock)}")
    if from_catalog:
        parts.append(f"today's catalog and price table for {', '.join(from_catalog)} "
                     "(not in the lock)")
    return "what the export runs, at " + "; ".join(parts)


def cost_violations(costs: Costs, max_per_hour: float | None,
                    max_increase_pct: float | None) -> list[str]:
    out = []
    if max_per_hour is not None and costs.after > max_per_hour:
        top = ", ".join(f"{f.name} ${f.after:,.2f}/h"
                        for f in sorted(costs.fleets, key=lambda f: -f.after)[:3])
        out.append(f"the fleets cost ${costs.after:,.2f}/h, over --max-cost-per-hour "
                   f"{max_per_hour:g} (most: {top})")
    pct = costs.increase_pct
    if max_increase_pct is not None and (
            (pct is not None and pct > max_increase_pct)
            or (pct is None and costs.after > 0)):
        up = [f for f in sorted(costs.fleets, key=lambda f: -f.delta) if f.delta > 0][:3]
        out.append(f"the cost rises {'from $0' if pct is None else f'{pct:.1f}%'}, over "
                   f"--max-cost-increase {max_increase_pct:g}% (by: "
                   f"{', '.join(f'{f.name} +${f.delta:,.2f}/h' for f in up)})")
    return out
