"""`gpufleet quota --live`: each quota row's limit and use now, read by the same probes
`gpufleet preflight` asks (``Probe.quota`` and ``Probe.network_quota``: one reader), so the
table shows the shortfall per row."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

from gpufleet.compile import QuotaRow
from gpufleet.live.facts import Need, QuotaKey
from gpufleet.live.preflight import Probe


def read_limits(rows: Sequence[QuotaRow], needs: Sequence[Need],
                probes: Mapping[str, Probe]) -> None:
    """Fill each row's limit and use (and a note where the cloud does not list it)."""
    by_fleet = {n.fleet: n for n in needs}
    for row in rows:
        probe = probes.get(row.backend)
        if probe is None:
            row.note = "no live reader for this cloud"
            continue
        scope = None if row.scope == "default" else row.scope
        if row.kind == "network" and row.network is not None:
            facts = probe.network_quota(scope, row.region, row.network)
        else:
            names = [f.split(" (", 1)[0] for f in row.fleets]
            need = next((by_fleet[n] for n in names if n in by_fleet), None)
            if need is None:
                row.note = "its fleets are not in the lock: run `gpufleet lock`"
                continue
            name = row.live
            if row.ident == "unknown":  # the family only the cloud's SKU list names
                keys = list(probe.quota_keys(need))
                name = keys[0].name if keys else name
            facts = probe.quota(need, QuotaKey(name, row.region, row.unit, 0))
        if facts is None:
            row.note = "the cloud's quota API does not list it"
            continue
        # NaN: the cloud answered without the figure (its note says where to look)
        row.limit = None if math.isnan(facts.limit) else facts.limit
        row.used = None if math.isnan(facts.used) else facts.used
        if facts.note:
            row.note = facts.note
