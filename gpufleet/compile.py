"""Resolve and plan: validated inputs + catalog -> FleetPlans (or located diagnostics). Pure.

Offers are selected per fleet, each backend's address pool is divided among the fleets that
landed on it (by fleet name, so one fleet's ranges never depend on another's), and the
backend's planner turns each fleet + offer into a finished FleetPlan.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from ipaddress import IPv4Network

from gpufleet.backends import BACKENDS_BY_NAME
from gpufleet.backends.base import located
from gpufleet.catalog import Catalog
from gpufleet.cidr import DEFAULT_POOLS, AllocationError, allocate_blocks
from gpufleet.diagnostics import Diagnostic, sort_diagnostics
from gpufleet.offers import Selection, pick_profile, select
from gpufleet.plan import FleetPlan
from gpufleet.spec import Inputs


@dataclass(frozen=True, slots=True)
class Compiled:
    plans: tuple[FleetPlan, ...]
    selections: tuple[Selection, ...]
    diagnostics: tuple[Diagnostic, ...] = field(default=())
    catalog: str = ""

    @property
    def ok(self) -> bool:
        return not any(d.is_error for d in self.diagnostics)


def pool_for(inputs: Inputs, backend: str) -> str:
    cfg = inputs.backend(backend)
    return (cfg.cidr if cfg is not None and cfg.cidr else None) or DEFAULT_POOLS[backend]


def compile_inputs(inputs: Inputs, catalog: Catalog, profile: str | None = None) -> Compiled:
    prof = pick_profile(inputs.profiles, profile)
    selections = [select(f, catalog, inputs, prof) for f in inputs.fleets]
    diags: list[Diagnostic] = [s.error for s in selections if s.error]
    chosen = [s for s in selections if s.best is not None]
    by_backend: dict[str, list[Selection]] = defaultdict(list)
    for s in chosen:
        assert s.best is not None
        by_backend[s.best.backend].append(s)
    blocks: dict[str, IPv4Network] = {}
    for backend, sels in sorted(by_backend.items()):
        impl = BACKENDS_BY_NAME.get(backend)
        if impl is None:
            diags += [located(s.fleet, "backends", "C010", f"fleet '{s.fleet.name}': the "
                              f"cheapest offer is on {backend}, which gpufleet cannot build yet",
                              f"set `backends:` to {', '.join(sorted(BACKENDS_BY_NAME))}")
                      for s in sels]
            continue
        try:
            blocks.update(allocate_blocks(pool_for(inputs, backend),
                                          [s.fleet.name for s in sels], impl.fleet_prefix))
        except AllocationError as e:
            diags += [located(s.fleet, "backends", "C004", f"address pool for {backend}: {e}",
                              "give the backend a larger `cidr` in the backends file")
                      for s in sels]
    plans: list[FleetPlan] = []
    for s in chosen:
        assert s.best is not None
        impl = BACKENDS_BY_NAME.get(s.best.backend)
        if impl is None or s.fleet.name not in blocks:
            continue
        planned = impl.plan(s.fleet, s.best, blocks[s.fleet.name],
                            inputs.backend(s.best.backend))
        diags += planned.diagnostics
        if planned.plan is not None:
            plans.append(planned.plan)
    return Compiled(tuple(plans), tuple(selections), tuple(sort_diagnostics(diags)),
                    catalog.describe())
