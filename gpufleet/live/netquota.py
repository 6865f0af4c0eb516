"""preflight's network quotas: what the stack creates of each network resource (VPCs,
addresses, NAT gateways, networks, firewall rules, ...), less what it holds already, per
region or project; ``gpufleet.live.preflight.check_network`` holds them against the
account's live limit and use, read through each backend's probe (``network_quota``). The
counts come from the offline plan and the stack's state (``gpufleet.review.network_counts``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from gpufleet.review import NetworkCount, State, network_counts


@dataclass(frozen=True, slots=True)
class NetworkNeed:
    """One quota in one place: what the plan holds there and what the stack holds now."""

    planned: NetworkCount
    existing: int

    @property
    def new(self) -> int:
        return max(self.planned.count - self.existing, 0)


def _key(c: NetworkCount) -> tuple[str, str, str | None, str]:
    return (c.backend, c.quota.name, c.scope, c.region)


def state_records(state: State | None) -> list[dict[str, Any]]:
    """A state export's resources in the shape of the plan's records."""
    if state is None:
        return []
    return [{"urn": r.urn, "type": r.type, "parent": r.parent, "provider": r.provider,
             "inputs": dict(r.inputs)} for r in state.resources]


def network_needs(planned: Sequence[Mapping[str, Any]],
                  existing: Sequence[Mapping[str, Any]]) -> list[NetworkNeed]:
    """Per quota and place, the plan's count and the state's (resources the stack holds
    already count against the quota's use, not again against what is left)."""
    now = {_key(c): c.count for c in network_counts(existing)}
    return [NetworkNeed(c, now.get(_key(c), 0)) for c in network_counts(planned)]
