"""The backends file's `reservations:` (declared reserved capacity -> ReservationSpec) and
`control_plane:` (where the dstack server runs -> ControlPlaneSpec). Pure."""

from __future__ import annotations

from datetime import datetime
from ipaddress import ip_network

from gpufleet.backends import traits_of
from gpufleet.codes import B012, B013, B014, B018
from gpufleet.diagnostics import Diagnostic, KeyPath
from gpufleet.input.checks.context import Ctx
from gpufleet.input.schema import Checked
from gpufleet.input.spec import ControlPlaneSpec, Origin, ReservationSpec


def parse_time(text: str) -> datetime | None:
    """An ISO 8601 time with its offset (`2026-12-01T12:00:00Z`), or None."""
    try:
        t = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None
    return t if t.tzinfo is not None else None


def check_reservations(c: Checked) -> tuple[list[ReservationSpec], list[Diagnostic]]:
    ctx = Ctx(c)
    out: list[ReservationSpec] = []
    seen: dict[str, KeyPath] = {}
    for i, raw in enumerate(ctx.entries("reservations")):
        base: KeyPath = ("reservations", i)
        if not c.ok(base):
            continue
        backend = raw["backend"]
        kinds = traits_of(backend).reservation_kinds
        kind = raw.get("kind", kinds[0])
        if kind not in kinds:
            article = "an" if backend[0] in "aeiou" else "a"
            ctx.error((*base, "kind"), f"{article} {backend} reservation is "
                      f"{' or '.join(kinds)}, not {kind}", B012,
                      hint=f"set `kind: {kinds[0]}` or remove `kind`")
            continue
        ends = raw.get("ends")
        if ends is not None and parse_time(str(ends)) is None:
            ctx.error((*base, "ends"), f"'{ends}' is not an ISO 8601 time with its offset",
                      B013, hint="write it like 2026-12-01T12:00:00Z")
            continue
        if raw["name"] in seen:
            ctx.error((*base, "name"), f"reservation '{raw['name']}' is declared twice",
                      B018, hint="keep one entry per reservation")
            continue
        seen[raw["name"]] = base
        line, col = c.doc.source.key(base)
        out.append(ReservationSpec(
            str(raw["name"]), backend, str(raw["zone"]), str(raw["instance_type"]),
            int(raw["count"]), kind, Origin(c.doc.file, line, col, c.doc.index),
            raw.get("id"), None if ends is None else str(ends),
            None if raw.get("price") is None else float(raw["price"]),
            raw.get("placement_group")))
    return out, ctx.diags


def check_control_plane(c: Checked) -> tuple[ControlPlaneSpec | None, list[Diagnostic]]:
    """The backends file's `control_plane` (where the dstack server runs)."""
    ctx = Ctx(c)
    raw = ctx.data().get("control_plane")
    base: KeyPath = ("control_plane",)
    if not isinstance(raw, dict) or not c.ok(base):
        return None, ctx.diags
    allow = raw.get("allow")
    for i, cidr in enumerate(allow or ()):
        try:
            net = ip_network(str(cidr), strict=False)
        except ValueError:
            ctx.error((*base, "allow", i), f"'{cidr}' is not a CIDR range", B014,
                      hint="write it like 203.0.113.0/24")
            return None, ctx.diags
        if net.prefixlen == 0:
            ctx.error((*base, "allow", i), f"'{cidr}' opens the dstack server to the whole "
                      "internet", B014, hint="name the ranges your team connects from")
            return None, ctx.diags
    line, col = c.doc.source.key(base)
    return ControlPlaneSpec(
        Origin(c.doc.file, line, col, c.doc.index), raw.get("fleet"),
        int(raw.get("port", 3000)), None if allow is None else tuple(str(a) for a in allow),
        raw.get("instance_type"), str(raw.get("dstack_version", "0.22.5")),
        raw.get("url")), ctx.diags
