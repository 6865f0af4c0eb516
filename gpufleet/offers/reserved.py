"""The checks of a fleet against the reservation it names in the backends file's
`reservations:` (the offers under it are ``select.in_reservation``). Pure but for the clock
``check_reserved`` reads."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from gpufleet.codes import O003, O004
from gpufleet.diagnostics import Diagnostic, Severity
from gpufleet.input import FleetSpec, ReservationSpec, parse_time

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
