"""`gpufleet quota` as text, Markdown or JSON: one row per quota and place, the stack's peak
need beside the live limit and use when read (--live), then the sources of the identifiers
and how long each cloud takes to approve an increase. Pure."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Sequence
from typing import Any

from gpufleet.backends import traits_of
from gpufleet.compile import QuotaRequestDesign, QuotaRow

HEADER = ("cloud", "scope", "region", "market", "quota", "name", "need", "unit")
LIVE = ("limit", "used", "short")
TAIL = ("fleets (peak + rolling)",)


def _ident(r: QuotaRow) -> str:
    dims = ",".join(f"{k}={v}" for k, v in r.dimensions)
    return f"{r.ident} [{dims}]" if dims else r.ident


def _num(x: float | None) -> str:
    if x is None or x != x:  # None or NaN
        return "?"
    return f"{x:,.0f}"


def _cells(r: QuotaRow, live: bool) -> list[str]:
    cells = [r.backend, f"{r.scope_kind} {r.scope}", r.region, r.market, _ident(r), r.title,
             f"{r.amount:,}", r.unit]
    if live:
        cells += [_num(r.limit), _num(r.used), _num(r.shortfall)]
    return [*cells, ", ".join(r.fleets)]


def _notes(rows: Sequence[QuotaRow], reserved: Sequence[str] = ()) -> list[str]:
    sources = sorted({(r.backend, r.source) for r in rows if r.source})
    lags = sorted({(r.backend, traits_of(r.backend).quota_lag) for r in rows
                   if traits_of(r.backend).quota_lag})
    out = ["need: each fleet's largest size plus the nodes a rolling replacement holds at "
           "once (`gpufleet replace` creates each new node before it deletes the old one)"]
    out += [f"source ({b}): {s}" for b, s in sources]
    out += [f"approval ({b}): {lag}" for b, lag in lags]
    out += [f"note: {r.backend} {r.region} {r.ident}: {r.note}" for r in rows if r.note]
    held = [r for r in reserved if " (" not in r]
    if held:
        out.append(f"reserved: {', '.join(held)} run on reservations, whose capacity the "
                   "cloud counted against the quota when they were made (as `gpufleet "
                   "preflight` counts them): no further need")
    out += [f"no quota: {r}" for r in reserved if " (" in r]
    return out


def quota_text(stack: str, rows: Sequence[QuotaRow], live: bool,
               reserved: Sequence[str] = ()) -> str:
    if not rows:
        return f"gpufleet quota - stack {stack}: no fleet plans a node; no quota is needed\n"
    table = [list(HEADER + (LIVE if live else ()) + TAIL), *(_cells(r, live) for r in rows)]
    widths = [max(len(row[i]) for row in table) for i in range(len(table[0]))]
    lines = [f"gpufleet quota - stack {stack} - {len(rows)} quota(s)"
             + (" against the live limits" if live else " (offline; --live reads the limits)")]
    lines += ["  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip()
              for row in table]
    lines += ["", *(f"  {n}" for n in _notes(rows, reserved))]
    return "\n".join(lines) + "\n"


def quota_markdown(stack: str, rows: Sequence[QuotaRow], live: bool,
                   reserved: Sequence[str] = ()) -> str:
    head = list(HEADER + (LIVE if live else ()) + TAIL)
    out = [f"### Quotas of stack `{stack}`", "", "| " + " | ".join(head) + " |",
           "|" + "---|" * len(head)]
    out += ["| " + " | ".join(c.replace("|", "\\|") for c in _cells(r, live)) + " |"
            for r in rows]
    out += ["", *(f"- {n}" for n in _notes(rows, reserved))]
    return "\n".join(out) + "\n"


def quota_json(stack: str, rows: Sequence[QuotaRow], live: bool,
               reserved: Sequence[str] = ()) -> str:
    def row(r: QuotaRow) -> dict[str, Any]:
        data = dataclasses.asdict(r)
        data["dimensions"] = dict(r.dimensions)
        data["shortfall"] = r.shortfall
        data.pop("network")
        if not live:
            for k in ("limit", "used", "shortfall"):
                data.pop(k)
        return data

    return json.dumps({"stack": stack, "live": live, "rows": [row(r) for r in rows],
                       "reserved": [r for r in reserved if " (" not in r],
                       "no_quota": [r for r in reserved if " (" in r],
                       "notes": _notes(rows, reserved)},
                      indent=2, default=str) + "\n"


def quota_request_lines(requests: Sequence[QuotaRequestDesign]) -> list[str]:
    """The plan's section of the increases `pulumi up` files (`quotas: {request: true}`)."""
    if not requests:
        return []
    out = [f"quota requests: {len(requests)} (`pulumi up` files them; each is protected)"]
    for q in requests:
        dims = "".join(f" {k}={v}" for k, v in q.dimensions)
        out.append(f"  {q.name}: {q.backend} {q.scope} {q.region} {q.ident}{dims} "
                   f"({q.market}): limit {q.limit:,.0f}, used {q.used:,.0f}, the stack needs "
                   f"{q.need:,} {q.unit} -> asks {q.value:,} (fleets {', '.join(q.fleets)})")
    for backend in sorted({q.backend for q in requests}):
        lag = traits_of(backend).quota_lag
        if lag:
            out.append(f"  approval ({backend}): {lag}")
    out.append("  `gpufleet up` launches no node of these fleets while their quota is short "
               "(--allow-pending-quota to try anyway)")
    return [*out, ""]


LIMITS_MARKER = '"written_by": "gpufleet quota --live --save"'


def limits_json(rows: Sequence[QuotaRow], read_at: str) -> str:
    """The limits file (`quota --live --save`): each read row's limit and use, what the
    backends file's `quotas: {limits: FILE}` plans requests with. Commit it."""
    limits = [{"backend": r.backend, "scope": r.scope, "region": r.region, "ident": r.ident,
               "dimensions": dict(r.dimensions), "market": r.market, "limit": r.limit,
               "used": r.used if r.used is not None else 0}
              for r in rows if r.limit is not None]
    return ("{\n  " + LIMITS_MARKER + ",\n  \"version\": 1,\n  \"read_at\": "
            + json.dumps(read_at) + ",\n  \"limits\": "
            + json.dumps(limits, indent=2).replace("\n", "\n  ") + "\n}\n")
