"""A fleet against the reservation it names in the backends file's `reservations:`: the
offers under it (``in_reservation``, ``reserved_offers``) and the checks of its count and
end. Pure but for the clock ``check_reserved`` reads."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Sequence
from datetime import UTC, datetime, timedelta

from gpufleet.backends import supports, traits_of
from gpufleet.codes import O003, O004
from gpufleet.diagnostics import Diagnostic, Severity
from gpufleet.input import FleetSpec, ReservationSpec, parse_time, region_of_zone
from gpufleet.offers.offer import Offer
from gpufleet.traits import Feature, ZoneModel

# A Capacity Block or calendar reservation ending within this horizon is a warning: nodes
# planned now would be reclaimed before a week of training is over.
HORIZON = timedelta(days=7)


def check_reserved(fleet: FleetSpec, res: ReservationSpec | None,
                   now: datetime | None = None) -> list[Diagnostic]:
    """A fleet against the reservation it names: nodes within its count, not ending soon."""
    if res is None:
        return []
    out = []
    target, top = fleet.nodes.target, fleet.nodes.max
    if target > res.count:
        out.append(fleet.origin.at("nodes", O003, f"fleet '{fleet.name}' wants {target} "
                                   f"node(s) but reservation '{res.name}' holds {res.count} "
                                   f"({res.instance_type} in {res.zone})",
                                   hint=f"lower `nodes` to {res.count}, or declare the larger "
                                        "reservation you have"))
    elif top is not None and top > res.count:
        out.append(fleet.origin.at("nodes", O003, f"fleet '{fleet.name}' may grow to {top} "
                                   f"node(s) but reservation '{res.name}' holds {res.count}; "
                                   "the nodes past it get no capacity",
                                   severity=Severity.WARNING))
    ends = parse_time(res.ends) if res.ends else None
    if ends is not None:
        now = now or datetime.now(UTC)
        if ends <= now:
            out.append(fleet.origin.at("reservation", O004, f"reservation '{res.name}' "
                                       f"({res.kind}) ended at {res.ends}",
                                       hint="declare the block or reservation you have now",
                                       severity=Severity.WARNING))
        elif ends - now <= HORIZON:
            left = ends - now
            out.append(fleet.origin.at("reservation", O004, f"reservation '{res.name}' "
                                       f"({res.kind}) ends at {res.ends}, in "
                                       f"{left.days} day(s) {left.seconds // 3600} hour(s): "
                                       "its nodes are reclaimed then",
                                       severity=Severity.WARNING))
    return out


def in_reservation(res: ReservationSpec) -> Callable[[list[Offer]], list[Offer]]:
    """The offers a declared reservation can hold: its backend and type in its zone (AWS rows
    are per region: the zone is pinned), on-demand, at its declared price when it has one."""
    def run(offers: list[Offer]) -> list[Offer]:
        out = []
        for o in offers:
            if o.backend != res.backend or o.spot \
                    or o.instance_type.lower() != res.instance_type.lower():
                continue
            if o.zone is not None and o.zone.lower() != res.zone.lower():
                continue
            zones = traits_of(o.backend).zones
            if o.zone is None and zones is ZoneModel.PER_REGION and \
                    (region_of_zone(res.zone) or "").lower() != o.region.lower():
                continue
            if zones is ZoneModel.NONE and o.region.lower() != res.zone.lower():
                continue  # an Azure capacity reservation group's `zone` is its region
            price = res.price if res.price is not None else o.price
            out.append(dataclasses.replace(o, zone=res.zone if zones is not ZoneModel.NONE
                                           else None, price=price))
        return out
    return run


def reserved_offers(candidates: Sequence[Offer]) -> list[Offer]:
    """Under a reservation, the types the catalog sells only as spot in a place (A4, A3
    Ultra) are offered on-demand through the reservation, at a price the catalog does not
    know (NaN) - never $0."""
    on_demand = {(o.backend, o.location, o.instance_type) for o in candidates if not o.spot}
    out: dict[tuple[str, str, str], Offer] = {}
    for o in candidates:
        key = (o.backend, o.location, o.instance_type)
        if o.spot and key not in on_demand and supports(o.backend, Feature.RESERVATIONS):
            out.setdefault(key, dataclasses.replace(o, spot=False, price=math.nan,
                                                    reserved=True))
    return list(out.values())
