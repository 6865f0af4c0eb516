"""Resolve and plan: validated inputs + catalog -> FleetPlans (or located diagnostics). Pure.

Offers are selected per fleet, each backend's address pool is divided among the fleets that
landed on it (by fleet name, so one fleet's ranges never depend on another's), and the
backend's planner turns each fleet + offer into a finished FleetPlan.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from ipaddress import IPv4Network

from gpufleet.compile.backends import BACKENDS_BY_NAME
from gpufleet.compile.backends.gateway import plan_gateway
from gpufleet.compile.cidr import DEFAULT_POOLS, AllocationError, allocate_blocks
from gpufleet.compile.plan import FleetPlan, GatewayPlan
from gpufleet.diagnostics import Diagnostic, sort_diagnostics
from gpufleet.input import (
    FleetSpec,
    Inputs,
    Lock,
    Validated,
    access_for,
    load_lock,
    validate_paths,
)
from gpufleet.offers import (
    LOCKED,
    Catalog,
    LockStatus,
    Selection,
    default_lock_path,
    gateway_status,
    load_catalog,
    pick_profile,
    select_locked,
    stale_diagnostic,
)


@dataclass(frozen=True, slots=True)
class Compiled:
    plans: tuple[FleetPlan, ...]
    selections: tuple[Selection, ...]
    diagnostics: tuple[Diagnostic, ...] = field(default=())
    catalog: str = ""
    gateways: tuple[GatewayPlan, ...] = ()
    # How each fleet's / gateway's offer relates to the lock (empty without a lock).
    fleet_locks: Mapping[str, LockStatus] = field(default_factory=dict)
    gateway_locks: Mapping[str, LockStatus] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return not any(d.is_error for d in self.diagnostics)


def compile_files(paths: Sequence[str], profile: str | None = None,
                  catalog_dir: str | None = None, lock_path: str | None = None
                  ) -> tuple[Validated, Compiled | None]:
    """Files -> validated inputs -> plans, the way `pulumi up` runs: with ``lock_path``
    (default: gpufleet.lock beside the first file) strictly, so that every fleet and gateway
    must be locked as written. ``None`` for the plans when the input or the lock is invalid."""
    validated = validate_paths(paths)
    if not validated.ok:
        return validated, None
    lock, lock_result = load_lock(lock_path or default_lock_path(paths))
    if lock is None:
        validated.diagnostics.extend(lock_result.diagnostics)
        validated.sources.update(lock_result.sources)
        return validated, None
    return validated, compile_inputs(validated.inputs, load_catalog(catalog_dir), profile,
                                     lock, locked=True)


def pool_for(inputs: Inputs, backend: str) -> str:
    cfg = inputs.backend(backend)
    return (cfg.cidr if cfg is not None and cfg.cidr else None) or DEFAULT_POOLS[backend]


def compile_inputs(inputs: Inputs, catalog: Catalog, profile: str | None = None,
                   lock: Lock | None = None, upgrade: Collection[str] | bool = (),
                   locked: bool = False) -> Compiled:
    """``lock``: use its offers where the requirements are unchanged; ``upgrade``: fleet and
    gateway names (or True for all) to pick again regardless; ``locked``: an error for every
    fleet or gateway the lock does not cover (`plan --locked`, the stack program)."""
    prof = pick_profile(inputs.profiles, profile)
    diags: list[Diagnostic] = []
    selections: list[Selection] = []
    fleet_locks: dict[str, LockStatus] = {}
    def again(name: str) -> bool:
        return upgrade is True or (upgrade is not False and name in upgrade)

    for f in inputs.fleets:
        sel, st, more = select_locked(f, catalog, inputs, prof, lock, again(f.name))
        selections.append(sel)
        fleet_locks[f.name] = st
        diags += more
        if locked and st.status != LOCKED:
            diags.append(stale_diagnostic("fleet", f.name, f.origin, st, lock))
        elif sel.error:
            diags.append(sel.error)
    gateway_locks: dict[str, LockStatus] = {}
    for g in inputs.gateways:
        st = gateway_status(g, lock, again(g.name))
        gateway_locks[g.name] = st
        if locked and st.status != LOCKED:
            diags.append(stale_diagnostic("gateway", g.name, g.origin, st, lock))
    chosen = [s for s in selections if s.best is not None]
    by_backend: dict[str, list[Selection]] = defaultdict(list)
    for s in chosen:
        assert s.best is not None
        by_backend[s.best.backend].append(s)
    blocks: dict[str, IPv4Network] = {}
    for backend in sorted(set(by_backend) | {g.backend for g in inputs.gateways}):
        sels = by_backend.get(backend, [])
        impl = BACKENDS_BY_NAME.get(backend)
        if impl is None:
            diags += [s.fleet.origin.at("backends", "C010", f"fleet '{s.fleet.name}': the "
                              f"cheapest offer is on {backend}, which gpufleet cannot build yet",
                              f"set `backends:` to {', '.join(sorted(BACKENDS_BY_NAME))}")
                      for s in sels]
            continue
        keys = {address_key(s.fleet): s.fleet.name for s in sels}
        keys.update({gateway_key(g.name): gateway_key(g.name)
                     for g in inputs.gateways if g.backend == backend})
        try:
            allocated = allocate_blocks(pool_for(inputs, backend), keys, impl.fleet_prefix)
            blocks.update({keys[k]: net for k, net in allocated.items()})
        except AllocationError as e:
            diags += [s.fleet.origin.at("backends", "C004", f"address pool for {backend}: {e}",
                              "give the backend a larger `cidr` in the backends file")
                      for s in sels]
    plans: list[FleetPlan] = []
    for s in chosen:
        assert s.best is not None
        impl = BACKENDS_BY_NAME.get(s.best.backend)
        if impl is None or s.fleet.name not in blocks:
            continue
        planned = impl.plan(s.fleet, s.best, blocks[s.fleet.name],
                            inputs.backend(s.best.backend), access_for(inputs, s.best.backend))
        diags += planned.diagnostics
        if planned.plan is not None:
            plans.append(planned.plan)
    gateways: list[GatewayPlan] = []
    for g in inputs.gateways:
        if gateway_key(g.name) not in blocks:
            continue
        gplan, gdiags = plan_gateway(g, blocks[gateway_key(g.name)], inputs.backend(g.backend),
                                     access_for(inputs, g.backend))
        diags += gdiags
        if gplan is not None:
            gateways.append(gplan)
    owners: dict[tuple[str, str], str] = {}
    for g, gp in ((g, gp) for g in inputs.gateways for gp in gateways if gp.name == g.name):
        if gp.record is None or not gp.record.create_zone:
            continue
        key = (gp.backend, gp.record.zone)
        if key in owners:
            diags.append(g.origin.at("create_dns_zone", "G013", f"gateway '{g.name}' and "
                                    f"'{owners[key]}' both create the zone {key[1]}",
                                    "let one gateway create it; the other looks it up"))
        owners.setdefault(key, g.name)
    return Compiled(tuple(plans), tuple(selections), tuple(sort_diagnostics(diags)),
                    catalog.describe(), tuple(gateways), fleet_locks if lock else {},
                    gateway_locks if lock else {})


def address_key(fleet: FleetSpec) -> str:
    """A fleet's address block follows its first name, so a rename with `previous_names`
    (oldest first) keeps its ranges and nothing is replaced."""
    return fleet.previous_names[0] if fleet.previous_names else fleet.name


def gateway_key(name: str) -> str:
    """Gateways share a backend's pool with fleets; the prefix keeps the names apart."""
    return f"gateway:{name}"
