"""Every quota a stack needs, offline (`gpufleet quota`): per cloud, scope (account, project,
subscription), region and quota, the amount in the unit the cloud counts (AWS: vCPUs per
instance family group; GCP: GPUs per GPU family; Azure: vCPUs per VM family and region),
on-demand and spot apart, with the cloud's own identifier and its source (the network quotas the
stack's own resources count against are `gpufleet.review.network_rows`).

The peak counts: a fleet's largest size (`nodes: 0..N` counts N), plus the nodes a rolling
replacement holds at once - `gpufleet replace` and the health policy's replacements run
`pulumi up --replace`, which creates each new node before it deletes the old one: one node,
or the health policy's `max_replacements_per_day`. The compute quotas are each backend's
traits (``compute_quotas``); the catalog gives a node's vCPUs and GPUs. Pure."""

from __future__ import annotations

import hashlib
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from gpufleet.backends import is_backend, traits_of
from gpufleet.compile.design import FleetDesign, ProviderDesign
from gpufleet.input import QuotaSettings
from gpufleet.offers import Catalog
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
        if plan.reservation:  # the cloud counted its capacity when it was made (preflight)
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


@dataclass(frozen=True, slots=True)
class QuotaRequestDesign:
    """An increase the stack files for one short quota (the backends file's `quotas:
    {request: true}`): the value asked is the stack's peak need plus the headroom on top of
    what is already used, and never below the current limit."""

    name: str  # the logical name: stable for the same quota and place
    backend: str
    provider: ProviderDesign  # a provider of the cloud in the quota's region
    scope: str
    region: str
    ident: str
    dimensions: tuple[tuple[str, str], ...]
    market: str
    unit: str
    title: str
    need: int
    limit: float
    used: float
    value: int
    fleets: tuple[str, ...]
    contact_email: str | None = None
    preference: str = ""  # GCP: the QuotaPreference id (at most 63 characters)


def request_value(need: int, limit: float, used: float, headroom: float) -> int:
    """What to ask for: what is used plus the need with its headroom, never below the limit."""
    return max(math.ceil(limit), math.ceil(used + need * (1 + headroom / 100.0)))


def quota_requests(rows: Sequence[QuotaRow], plans: Sequence[FleetDesign],
                   settings: QuotaSettings) -> list[QuotaRequestDesign]:
    """A request per short, requestable row whose limit the limits file records."""
    limits = {q.key: q for q in settings.limits}
    out = []
    for row in rows:
        known = limits.get(row.key)
        if known is None or not row.requestable or row.amount <= known.limit - known.used:
            continue
        provider = next((p.provider for p in plans if p.backend == row.backend and
                         (row.region == "global" or p.region == row.region)), None)
        if provider is None:
            continue
        slug = _slug(f"{row.region}-{row.ident}-{'-'.join(v for _, v in row.dimensions)}-"
                     f"{row.market}")
        digest = hashlib.sha256(repr(row.key).encode()).hexdigest()[:8]
        name = f"quota-{row.backend}-{slug[:40]}-{digest}"
        out.append(QuotaRequestDesign(
            name, row.backend, provider, row.scope, row.region, row.ident, row.dimensions,
            row.market, row.unit, row.title, row.amount, known.limit, known.used,
            request_value(row.amount, known.limit, known.used, settings.headroom),
            tuple(row.fleets), settings.contact_email, f"gpufleet-{slug[:44]}-{digest}"))
    return out


def _slug(text: str) -> str:
    return "-".join(p for p in re.split(r"[^a-z0-9]+", text.lower()) if p)
