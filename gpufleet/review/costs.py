"""The cost guard: each fleet's and gateway's hourly cost before and after a change.

Before is what the lock recorded (its price per node-hour, and the overhead prices beside the
instances) for the nodes running today: the export's instances for `diff` and `up`, the plan's
own node count for `plan`. After is the plan's whole bill (``gpufleet.review.bill``). An entry
locked before overheads were recorded is taken to have today's overhead. Pure.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from gpufleet.compile import FleetPlan, GatewayPlan, VolumePlan
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


def fleet_costs(plans: Sequence[FleetPlan], lock: Lock | None,
                running: Mapping[str, int] | None = None,
                gateways: Sequence[GatewayPlan] = (),
                catalog: Catalog | None = None, volumes: Sequence[VolumePlan] = ()) -> Costs:
    """Each fleet's and gateway's whole bill per hour, before and after (nodes and what runs
    beside them: bastion, NAT, addresses, disks, load balancer, DNS zone)."""
    prices = load_prices()
    out = []
    names = {p.name for p in plans}
    for p in plans:
        entry = lock.fleets.get(p.name) if lock is not None else None
        if running is not None:  # what the stack runs; a fleet it lacks runs nothing yet
            nodes_before = running.get(p.name, 0)
            exists = p.name in running
        else:
            nodes_before = p.nodes if entry is not None else 0
            exists = entry is not None
        fixed, per_node = overhead_rates(p, prices, catalog)
        before = 0.0
        if entry is not None and exists:
            fixed, per_node = entry.overhead[:2] if entry.overhead else (fixed, per_node)
            before = (_price(entry.price) + per_node) * nodes_before + fixed
        out.append(FleetCost(p.name, before, fleet_bill(p, prices, catalog).total))
    for name, count in sorted((running or {}).items()):  # fleets the YAML no longer has
        entry = lock.fleets.get(name) if lock is not None else None
        if name not in names and entry is not None:
            fixed, per_node = entry.overhead[:2] if entry.overhead else (0.0, 0.0)
            out.append(FleetCost(name, (_price(entry.price) + per_node) * count + fixed, 0.0))
    for g in gateways:
        entry = lock.gateways.get(g.name) if lock is not None else None
        now = gateway_bill(g, prices, catalog).total
        was = entry.overhead[0] if entry is not None and entry.overhead else now
        exists = entry is not None if running is None else g.name in running
        out.append(FleetCost(g.name, was if exists else 0.0, now))
    for v in volumes:  # no offer to lock: the file is the record; the export says if it exists
        if v.created:
            now = volume_bill(v, prices).total
            held = running is None or f"volume:{v.name}" in running
            out.append(FleetCost(f"volume:{v.name}", now if held else 0.0, now))
    basis = ("lock prices x the export's nodes, with what runs beside them"
             if running is not None else
             "lock prices x the planned nodes, with what runs beside them (new: $0)")
    return Costs(tuple(out), basis)


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
