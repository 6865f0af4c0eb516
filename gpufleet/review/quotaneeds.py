"""The network quotas of `gpufleet quota`: what the stack's own resources count against
(``network_counts``), as rows beside the compute quotas (gpufleet.compile's quota rows).
Pure."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from gpufleet.backends import traits_of
from gpufleet.compile import QuotaRow
from gpufleet.review.quotas import network_counts


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
