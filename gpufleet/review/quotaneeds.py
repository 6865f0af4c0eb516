"""Every quota a stack needs, offline (`gpufleet quota`): per cloud, scope (account, project,
subscription), region and quota, the amount in the unit the cloud counts (AWS: vCPUs per
instance family group; GCP: GPUs per GPU family; Azure: vCPUs per VM family and region),
on-demand and spot apart, with the cloud's own identifier and its source - and the network
quotas the stack's own resources count against (`network_counts`).

The peak counts: a fleet's largest size (`nodes: 0..N` counts N), plus the nodes a rolling
replacement holds at once - `gpufleet replace` and the health policy's replacements run
`pulumi up --replace`, which creates each new node before it deletes the old one: one node,
or the health policy's `max_replacements_per_day`. The compute quotas are each backend's
traits (``compute_quotas``); the catalog gives a node's vCPUs and GPUs. Pure."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from gpufleet.backends import is_backend, traits_of
from gpufleet.compile import FleetDesign
from gpufleet.offers import Catalog
from gpufleet.review.quotas import network_counts
from gpufleet.traits import NetworkQuota, QuotaAsk


@dataclass
class QuotaRow:
    """One quota in one place, and how much of it the stack needs at its peak."""

    backend: str
    scope_kind: str  # "account", "project", "subscription"
    scope: str  # the project or subscription id; "default" for the credentials' own
    region: str  # or "global"
    title: str
    ident: str  # the quota code / id / name the cloud's quota API takes
    unit: str
    market: str  # "on-demand", "spot", "all" (both count), or "-" for a network quota
    amount: int = 0
    source: str = ""
    dimensions: tuple[tuple[str, str], ...] = ()
    fleets: list[str] = field(default_factory=list)
    kind: str = "compute"  # or "network"
    live: str = ""  # the name the live reader reads its limit and use by
    requestable: bool = True
    default: int | None = None  # a network quota's documented default
    # --live: the limit and use now, and the shortfall (None: not read)
    limit: float | None = None
    used: float | None = None
    note: str = ""
    network: NetworkQuota | None = None  # a network row's quota (the live reader asks it)

    @property
    def key(self) -> tuple[str, str, str, str, tuple[tuple[str, str], ...], str]:
        return (self.backend, self.scope, self.region, self.ident, self.dimensions, self.market)

    @property
    def shortfall(self) -> float | None:
        """How much the limit lacks for the stack (0: enough); None when not read."""
        if self.limit is None or math.isnan(self.limit):
            return None
        used = 0.0 if self.used is None or math.isnan(self.used) else self.used
        return max(self.amount - (self.limit - used), 0.0)


def peak_nodes(plan: FleetDesign, health: Mapping[str, Any] | None = None) -> tuple[int, int]:
    """(the fleet's largest size, the nodes a rolling replacement adds at once); ``health``:
    the fleet's health policy, which may replace up to `max_replacements_per_day` nodes."""
    top = plan.nodes if plan.nodes_max is None else max(plan.nodes, plan.nodes_max)
    if top <= 0:
        return 0, 0
    per_day = (health or {}).get("max_replacements_per_day")
    per_day = per_day if isinstance(per_day, int) and not isinstance(per_day, bool) else 0
    return top, max(1, min(per_day, top))


def _ask(plan: FleetDesign, catalog: Catalog) -> QuotaAsk:
    row = next((r for r in catalog.rows if r.backend == plan.backend
                and r.instance_type == plan.instance_type), None)
    gpus = int(plan.gpu.split("x", 1)[0]) if plan.gpu[:1].isdigit() else 0
    return QuotaAsk(plan.instance_type, plan.spot,
                    plan.gpu.split("x", 1)[1] if gpus else None,
                    row.gpu_memory_gib if row is not None else None, gpus,
                    row.vcpus if row is not None else 0)


def compute_rows(plans: Sequence[FleetDesign], catalog: Catalog,
                 health: Mapping[str, Mapping[str, Any]] | None = None) -> list[QuotaRow]:
    """The compute quotas of every fleet with nodes, summed per quota and place."""
    found: dict[tuple[Any, ...], QuotaRow] = {}
    for plan in plans:
        if not is_backend(plan.backend):
            continue
        top, rolling = peak_nodes(plan, (health or {}).get(plan.name))
        if top <= 0:
            continue
        t = traits_of(plan.backend)
        market = "spot" if plan.spot else "on-demand"
        for q in t.compute_quotas(_ask(plan, catalog)):
            region = "global" if q.scope == "global" else plan.region
            row = QuotaRow(plan.backend, t.quota_scope, plan.provider.scope or "default",
                           region, q.title, q.ident, q.unit,
                           "all" if q.every_market else market, source=q.source,
                           dimensions=q.dimensions, live=q.live or q.ident,
                           requestable=q.requestable)
            row = found.setdefault(row.key, row)
            row.amount += q.per_node * (top + rolling)
            row.fleets.append(f"{plan.name} ({top}+{rolling})")
    return sorted(found.values(), key=lambda r: (r.backend, r.scope, r.region, r.ident,
                                                 r.market))


def network_rows(resources: Sequence[Mapping[str, Any]]) -> list[QuotaRow]:
    """The network quotas the stack's own resources count against, as rows."""
    out = []
    for c in network_counts(resources):
        t = traits_of(c.backend)
        out.append(QuotaRow(
            c.backend, t.quota_scope, c.scope or "default", c.region, c.quota.name,
            c.quota.live or c.quota.raise_how, "count", "-", c.count, c.quota.source,
            fleets=[o for o in c.owners if o], kind="network", live=c.quota.live,
            requestable=bool(c.quota.live), default=c.quota.default, network=c.quota))
    return out
