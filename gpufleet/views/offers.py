"""Text and JSON views of offer selections and of the catalog summary. Pure."""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Sequence
from typing import Any

from gpufleet.diagnostics import to_record
from gpufleet.offers import HOURS_PER_MONTH, Catalog, Offer, Selection, describe_resources


def table(headers: Sequence[str], rows: Sequence[Sequence[str]],
          right: frozenset[int] = frozenset()) -> list[str]:
    widths = [max(len(h), *(len(r[i]) for r in rows)) if rows else len(h)
              for i, h in enumerate(headers)]

    def line(cells: Sequence[str]) -> str:
        return "  ".join(c.rjust(w) if i in right else c.ljust(w)
                         for i, (c, w) in enumerate(zip(cells, widths, strict=True))).rstrip()
    return [line(headers), *(line(r) for r in rows)]


def _nodes_total(sel: Selection, offer: Offer) -> tuple[int, float]:
    n = sel.fleet.nodes.target
    return n, n * offer.price


def render_offers_text(selections: Sequence[Selection], catalog: Catalog, limit: int) -> str:
    out = [f"catalog: {catalog.describe()}"]
    for sel in selections:
        f = sel.fleet
        prof = f", profile {sel.profile}" if sel.profile else ""
        out += ["", f"fleet {f.name} ({f.origin.file}): {describe_resources(f.resources)}, "
                f"nodes {f.nodes}, spot_policy {f.spot_policy or 'on-demand'}{prof}"]
        for u in sel.unpriced:
            out.append(f"  also matches, price unknown (not selectable): {u.backend} {u.region} "
                       f"{u.instance_type} {u.resources_text()}")
        out += _refused_lines(sel)
        if not sel.offers:
            out.append("  no offers (see the error below)")
            continue
        rows = [[str(i), o.backend, o.region, o.zone or "-", o.instance_type, o.resources_text(),
                 "yes" if o.spot else "no",
                 f"${o.price:,.4f}" if o.price_known else "reserved: not declared"]
                for i, o in enumerate(sel.offers[:limit], 1)]
        out += ["  " + ln for ln in table(
            ["#", "BACKEND", "REGION", "ZONE", "INSTANCE", "RESOURCES", "SPOT", "PRICE"], rows,
            right=frozenset({0, 7}))]
        if len(sel.offers) > limit:
            out.append(f"  ... {len(sel.offers) - limit} more offer(s) (use --max)")
        best = sel.offers[0]
        n, hourly = _nodes_total(sel, best)
        if not best.price_known:
            out.append(f"  total at target: {n} node(s) through reservation "
                       f"{f.reservation}: the price you pay for it is not declared")
        else:
            out.append(f"  total at target: {n} node(s) x ${best.price:,.4f} = "
                       f"${hourly:,.2f}/h, ${hourly * HOURS_PER_MONTH:,.0f}/month")
        if f.nodes.max is not None and f.nodes.max != n and best.price_known:
            top = f.nodes.max * best.price
            out.append(f"  at max {f.nodes.max} node(s): ${top:,.2f}/h, "
                       f"${top * HOURS_PER_MONTH:,.0f}/month")
    return "\n".join(out)


def _refused_lines(sel: Selection) -> list[str]:
    """The matching offers `plan` refuses for this fleet, by type, apart from the table."""
    if not sel.refused:
        return []
    types = sorted({o.instance_type for o in sel.refused})
    return [f"  also matches, refused for this cluster ({sel.refused_code}, {len(sel.refused)} "
            f"offer(s); `plan` picks none of them): {', '.join(types)}"]


def selection_json(sel: Selection, limit: int) -> dict[str, Any]:
    f = sel.fleet
    best = sel.best
    hourly = _nodes_total(sel, best)[1] if best and best.price_known else 0.0
    known = best is not None and best.price_known
    return {
        "fleet": f.name, "file": f.origin.file, "profile": sel.profile,
        "resources": describe_resources(f.resources),
        "nodes": {"min": f.nodes.min, "target": f.nodes.target, "max": f.nodes.max},
        "offers": [o.to_json() for o in sel.offers[:limit]],
        "offer_count": len(sel.offers),
        "unpriced": [o.to_json() for o in sel.unpriced],
        "refused": {"code": sel.refused_code, "offers": [o.to_json() for o in sel.refused]}
        if sel.refused else None,
        "total_per_hour": round(hourly, 4) if known else None,
        "total_per_month": round(hourly * HOURS_PER_MONTH, 2) if known else None,
        "error": to_record(sel.error) if sel.error else None,
    }


def render_offers_json(selections: Sequence[Selection], catalog: Catalog, limit: int) -> str:
    return json.dumps({"catalog": {"source": catalog.source, "version": catalog.version,
                                   "date": catalog.date},
                       "fleets": [selection_json(s, limit) for s in selections]}, indent=2)


def catalog_summary(catalog: Catalog, gpu: str | None, backend: str | None
                    ) -> list[dict[str, Any]]:
    groups: dict[tuple[str, float, str], list[Any]] = defaultdict(list)
    for r in catalog.rows:
        if not r.gpu_name or (gpu and r.gpu_name.lower() != gpu.lower()):
            continue
        if backend and r.backend != backend:
            continue
        groups[(r.gpu_name, r.gpu_memory_gib or 0, r.backend)].append(r)
    cpu: dict[tuple[str, str], list[Any]] = defaultdict(list)
    if gpu is None:
        for r in catalog.rows:
            if not r.gpu_count and (not backend or r.backend == backend):
                cpu[(r.backend, r.family)].append(r)
    out = []
    for (name, mem, be), rows in sorted(groups.items()):
        out.append({"gpu": name, "memory_gib": mem, "backend": be,
                    "counts": sorted({r.gpu_count for r in rows}), **_prices(rows)})
    for (be, family), rows in sorted(cpu.items()):
        out.append({"gpu": None, "family": family, "backend": be,
                    "vcpus": sorted({r.vcpus for r in rows}), **_prices(rows)})
    return out


def _prices(rows: list[Any]) -> dict[str, Any]:
    od = [r.price for r in rows if not r.spot]
    sp = [r.price for r in rows if r.spot]
    return {"instance_types": sorted({r.instance_type for r in rows}),
            "regions": len({r.location for r in rows}),
            "on_demand": [min(od), max(od)] if od else None,
            "spot": [min(sp), max(sp)] if sp else None}


def _span(v: list[float] | None) -> str:
    if not v:
        return "-"
    return f"${v[0]:,.2f}" if v[0] == v[1] else f"${v[0]:,.2f} - ${v[1]:,.2f}"


def render_catalog_text(catalog: Catalog, summary: list[dict[str, Any]]) -> str:
    rows = [[s["gpu"], f"{s['memory_gib']:g}GB", s["backend"],
             ",".join(str(c) for c in s["counts"]), str(s["regions"]), _span(s["on_demand"]),
             _span(s["spot"])] for s in summary if s["gpu"]]
    lines = [f"catalog: {catalog.describe()} ({len(catalog.rows)} rows)", ""]
    if rows:
        lines += table(["GPU", "MEMORY", "BACKEND", "COUNTS", "LOCATIONS", "ON-DEMAND $/h",
                        "SPOT $/h"], rows)
        lines += ["", "Prices are per instance-hour across the counts listed."]
    cpu = [[s["family"], s["backend"], ",".join(str(c) for c in s["vcpus"]),
            str(s["regions"]), _span(s["on_demand"]), _span(s["spot"])]
           for s in summary if not s["gpu"]]
    if cpu:
        lines += ["", "CPU-only instances (no GPU; offered to fleets that allow `gpu: 0`):", ""]
        lines += table(["FAMILY", "BACKEND", "VCPUS", "LOCATIONS", "ON-DEMAND $/h",
                        "SPOT $/h"], cpu)
    return "\n".join(lines)
