"""The cost guard: each fleet's hourly cost before and after a change.

Before is what the lock recorded (its price per node-hour) times the nodes running today:
the export's instances for `diff`, the plan's own node count for `plan`. After is the plan's
offer price times its nodes. Pure.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from gpufleet.compile import FleetPlan
from gpufleet.input import Lock
from gpufleet.offers import HOURS_PER_MONTH


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
        return None if self.before <= 0 else 100.0 * (self.after - self.before) / self.before

    def lines(self) -> list[str]:
        pct = self.increase_pct
        head = (f"cost: ${self.before:,.2f}/h -> ${self.after:,.2f}/h "
                f"(${self.before * HOURS_PER_MONTH:,.0f} -> ${self.after * HOURS_PER_MONTH:,.0f}"
                f"/month" + (f", {pct:+.1f}%" if pct is not None else "") + f"; before = "
                f"{self.basis})")
        return [head] + [f"  {f.name}: ${f.before:,.2f}/h -> ${f.after:,.2f}/h "
                         f"({'+' if f.delta >= 0 else '-'}${abs(f.delta):,.2f}/h)"
                         for f in self.fleets if f.before or f.after]


def _price(value: float | None) -> float:
    return 0.0 if value is None or math.isnan(value) else float(value)


def fleet_costs(plans: Sequence[FleetPlan], lock: Lock | None,
                running: Mapping[str, int] | None = None) -> Costs:
    out = []
    names = {p.name for p in plans}
    for p in plans:
        entry = lock.fleets.get(p.name) if lock is not None else None
        if running is not None:  # what the stack runs; a fleet it lacks runs nothing yet
            nodes_before = running.get(p.name, 0)
        else:
            nodes_before = p.nodes if entry is not None else 0
        before = _price(entry.price) * nodes_before if entry is not None else 0.0
        out.append(FleetCost(p.name, before, _price(p.price_per_hour) * p.nodes))
    for name, count in sorted((running or {}).items()):  # fleets the YAML no longer has
        entry = lock.fleets.get(name) if lock is not None else None
        if name not in names and entry is not None:
            out.append(FleetCost(name, _price(entry.price) * count, 0.0))
    basis = "lock prices x the export's nodes" if running is not None else \
        "lock prices x the planned nodes (new fleets: $0)"
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
