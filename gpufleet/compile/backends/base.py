"""The backend seam: what every backend provides to the pure planner. Pure.

A backend is one object with a name, the module path of its Pulumi components (imported
only when a plan is emitted), a ``check`` for backend-specific rules and a ``plan`` that
turns a fleet and its chosen offer into a finished :class:`FleetPlan`.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from ipaddress import IPv4Network
from typing import Any, Protocol

from gpufleet.compile import naming
from gpufleet.compile.plan import FirewallRule, FleetPlan, ProviderPlan
from gpufleet.diagnostics import Diagnostic
from gpufleet.input import BackendConfig, FleetSpec
from gpufleet.offers import Offer

DEFAULT_DISK_GIB = 100


@dataclass(frozen=True, slots=True)
class Planned:
    plan: FleetPlan | None
    diagnostics: tuple[Diagnostic, ...] = ()


class Backend(Protocol):
    name: str
    component: str  # module implementing emit(), e.g. "gpufleet.components.gcp"
    fleet_prefix: int  # size of the address block each fleet gets from the pool

    def plan(self, fleet: FleetSpec, offer: Offer, block: IPv4Network,
             config: BackendConfig | None) -> Planned: ...


def common_fields(fleet: FleetSpec, offer: Offer, scope: str | None) -> dict[str, Any]:
    """The FleetPlan fields every backend fills the same way from the fleet and its offer."""
    return {
        "name": fleet.name, "file": fleet.origin.file, "backend": offer.backend,
        "provider": ProviderPlan(offer.backend, naming.provider(offer.backend, scope,
                                                                offer.region),
                                 offer.region, scope),
        "region": offer.region, "instance_type": offer.instance_type,
        "gpu": f"{offer.gpu_count}x{offer.gpu_name}" if offer.gpu_count else "none",
        "nodes": fleet.nodes.target, "nodes_min": fleet.nodes.min,
        "nodes_max": fleet.nodes.max, "spot": offer.spot, "price_per_hour": offer.price,
        "max_price": fleet.max_price,
        "node_names": tuple(naming.node(fleet.name, i) for i in range(fleet.nodes.target)),
        "disk_gib": disk_gib(fleet), "previous_names": fleet.previous_names,
        "rdma": offer.rdma, "rdma_interfaces": offer.rdma_interfaces,
    }


def disk_gib(fleet: FleetSpec) -> int:
    """The smallest size the fleet accepts (dstack takes the low end of the range)."""
    disk = fleet.resources.disk
    return int(disk.min) if disk is not None and disk.min else DEFAULT_DISK_GIB


def merged_tags(fleet: FleetSpec, config: BackendConfig | None) -> dict[str, str]:
    """Fleet tags, then backend tags (the backend wins, as in dstack), then gpufleet's own."""
    tags = dict(fleet.tags)
    if config is not None:
        tags.update(config.get("tags") or {})
    tags.update({"managed-by": "gpufleet", "gpufleet-fleet": fleet.name})
    return tags


_LABEL_BAD = re.compile(r"[^a-z0-9_-]")


def gcp_labels(tags: Mapping[str, str]) -> dict[str, str]:
    """GCP labels: lower case, [a-z0-9_-], keys start with a letter, at most 63 chars, 64 labels."""
    out: dict[str, str] = {}
    for k, v in tags.items():
        key = _LABEL_BAD.sub("_", k.lower())[:63]
        if not key or not key[0].isalpha():
            key = ("t" + key)[:63]
        out[key] = _LABEL_BAD.sub("_", str(v).lower())[:63]
    return dict(sorted(out.items())[:64])


def ssh_rule(fleet: str, config: BackendConfig | None) -> tuple[FirewallRule, ...]:
    cidrs = tuple(config.ssh_cidrs) if config is not None else ()
    if not cidrs:
        return ()
    return (FirewallRule(f"{fleet}-ssh", "SSH from the ranges in ssh_cidrs", "tcp", ("22",),
                         cidrs),)


def public_ips(config: BackendConfig | None) -> bool:
    """gpufleet's default is private nodes; `public_ips: true` in the backends file opts in."""
    return bool(config is not None and config.public_ips)
