"""The offline plan as data: what `gpufleet plan` found, ready for the views. Pure.

Built from the compiled plans and what the stack program registered when it ran under the
mock monitor (``gpufleet.components.run.plan``); rendered by ``gpufleet.views``.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from gpufleet.compile import (
    Compiled,
    FleetDesign,
    GatewayDesign,
    QuotaRequestDesign,
    VolumeDesign,
)
from gpufleet.diagnostics import Diagnostic
from gpufleet.input import Lock, SshFleetSpec, Validated
from gpufleet.offers import Catalog, LockStatus, PriceTable, load_prices
from gpufleet.review.bill import Bill, bills
from gpufleet.review.costs import Costs, fleet_costs
from gpufleet.review.policy import Violation


@dataclass(frozen=True, slots=True)
class PlanReport:
    stack: str
    catalog: str
    fleets: tuple[FleetDesign, ...]
    resources: tuple[Mapping[str, Any], ...]
    lookups: tuple[tuple[str, Mapping[str, Any]], ...] = ()
    exports: Mapping[str, Any] = field(default_factory=dict)
    gateways: tuple[GatewayDesign, ...] = ()
    fleet_locks: Mapping[str, LockStatus] = field(default_factory=dict)
    gateway_locks: Mapping[str, LockStatus] = field(default_factory=dict)
    lock_file: str = ""  # the lock in use ("" when none was read)
    ssh_fleets: tuple[SshFleetSpec, ...] = ()  # listed, never provisioned
    violations: tuple[Violation, ...] = ()
    costs: Costs | None = None
    # fleet or gateway -> its bill; a volume's as `volume:NAME`
    bills: Mapping[str, Bill] = field(default_factory=dict)
    prices: PriceTable | None = None
    diagnostics: tuple[Diagnostic, ...] = ()  # the warnings of the run, for every format
    volumes: tuple[VolumeDesign, ...] = ()  # dstack volume files: disks created or handed over
    quota_requests: tuple[QuotaRequestDesign, ...] = ()  # increases `pulumi up` files

    @property
    def nodes_per_hour(self) -> float:
        return sum(f.total_per_hour for f in self.fleets)

    @property
    def per_hour(self) -> float:
        """The whole bill: nodes and everything beside them, gateways included."""
        return sum(b.total for b in self.bills.values()) if self.bills else self.nodes_per_hour


def lock_label(lock: Lock | None) -> str:
    if lock is None:
        return ""
    return lock.file if lock.exists else f"{lock.file} (not written yet: `gpufleet lock`)"


def plan_report(validated: Validated, compiled: Compiled, stack: str,
                resources: Sequence[Mapping[str, Any]],
                lookups: Sequence[tuple[str, Mapping[str, Any]]],
                exports: Mapping[str, Any], lock: Lock | None,
                violations: Sequence[Violation], catalog: Catalog | None = None) -> PlanReport:
    """The report of one offline run, with the lookups in a stable order."""
    prices = load_prices()
    ordered = tuple(sorted(((t, a) for t, a in lookups),
                           key=lambda x: (x[0], json.dumps(x[1], sort_keys=True))))
    return PlanReport(stack, compiled.catalog, compiled.plans, tuple(resources), ordered,
                      exports, compiled.gateways, compiled.fleet_locks, compiled.gateway_locks,
                      lock_label(lock), validated.inputs.ssh_fleets, tuple(violations),
                      fleet_costs(compiled.plans, lock, gateways=compiled.gateways,
                                  volumes=compiled.volumes,
                                  catalog=catalog),
                      bills(compiled.plans, compiled.gateways, prices, catalog,
                            compiled.volumes, compiled.buckets), prices,
                      volumes=compiled.volumes,
                      quota_requests=compiled.quota_requests)
