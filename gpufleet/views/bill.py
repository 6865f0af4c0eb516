"""The whole bill in text, JSON and Markdown: per fleet nodes / network / storage, per
gateway, the total, where the prices come from and what is not priced. Pure."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from gpufleet.backends import backend_names
from gpufleet.offers import HOURS_PER_MONTH, PriceTable
from gpufleet.review import PARTS, Bill


def money(v: float) -> str:
    return f"${v:,.2f}" if v >= 0.01 or v == 0 else f"${v:,.4f}"


def parts_text(b: Bill) -> str:
    """`nodes $220.16, network $0.06, storage $0.22` (the parts a bill has)."""
    names = {"nodes": "instances"} if b.kind == "gateway" else {}
    return ", ".join(f"{names.get(p, p)} {money(b.part(p))}" for p in PARTS if any(
        i.part == p for i in b.items))


def cost_line(b: Bill) -> str:
    text = f"{money(b.total)}/h, {money(b.total * HOURS_PER_MONTH)}/month"
    parts = parts_text(b)
    text += f" ({parts})" if parts else ""
    return text + (f"; NOT PRICED: {'; '.join(b.unpriced)}" if b.unpriced else "")


def _label(b: Bill) -> str:
    return f"{b.kind} {b.owner}"


def priced_from(catalog: str, prices: PriceTable | None) -> str:
    table = "" if prices is None else f"; the rest: {prices.describe()}, list prices of " \
        f"{', '.join(f'{k} {prices.region(k)}' for k in backend_names())}"
    return f"instances: {catalog}{table}"


def bill_lines(bills: Mapping[str, Bill], catalog: str, prices: PriceTable | None) -> list[str]:
    """The cost table of the text plan."""
    if not bills:
        return []
    rows = [(_label(b), *(money(b.part(p)) for p in PARTS), money(b.total),
             money(b.total * HOURS_PER_MONTH)) for b in bills.values()]
    total = sum(b.total for b in bills.values())
    rows.append(("total", *(money(sum(b.part(p) for b in bills.values())) for p in PARTS),
                 money(total), money(total * HOURS_PER_MONTH)))
    head = ("cost per hour", *PARTS, "total/h", "total/month")
    widths = [max(len(r[i]) for r in (head, *rows)) for i in range(len(head))]
    out = ["  ".join(c.ljust(widths[0]) if i == 0 else c.rjust(widths[i])
                     for i, c in enumerate(r)) for r in (head, *rows)]
    out.append(f"priced from: {priced_from(catalog, prices)}")
    unpriced = [f"{b.owner}: {u}" for b in bills.values() for u in b.unpriced]
    if unpriced:
        out.append("NOT PRICED (left out of the totals): " + "; ".join(unpriced))
    moved = [i for b in bills.values() if b.kind == "bucket" for i in b.items
             if i.kind in ("transfer", "requests")]
    out += [f"  {i.kind}: {i.what}: {money(i.per_hour * HOURS_PER_MONTH)}/month"
            for i in moved]
    out += [f"  {kind} priced from: {source}" for kind, source in dict.fromkeys(
        (i.kind, i.source) for i in moved)]
    if prices is not None:
        out.append("not included: " + ", ".join(prices.not_priced)
                   + (" (but the buckets' declared `transfer:`, priced above)" if moved else ""))
    return out


def bill_json(bills: Mapping[str, Bill], catalog: str, prices: PriceTable | None
              ) -> dict[str, Any]:
    total = sum(b.total for b in bills.values())
    return {
        "priced_from": priced_from(catalog, prices),
        "price_table": None if prices is None else {"version": prices.version,
                                                    "date": prices.date},
        "not_included": [] if prices is None else list(prices.not_priced),
        "total_per_hour": round(total, 4),
        "total_per_month": round(total * HOURS_PER_MONTH, 2),
        "items": [{"owner": b.owner, "kind": b.kind,
                   **{p: round(b.part(p), 6) for p in PARTS},
                   "total_per_hour": round(b.total, 6),
                   "total_per_month": round(b.total * HOURS_PER_MONTH, 2),
                   "lines": [{"part": i.part, "kind": i.kind, "what": i.what,
                              "count": i.count, "per_hour": round(i.per_hour, 6),
                              "source": i.source,
                              **({"by_dstack": True} if i.by_dstack else {})}
                             for i in b.items],
                   "not_priced": list(b.unpriced)} for b in bills.values()],
    }


def bill_markdown(bills: Mapping[str, Bill], catalog: str, prices: PriceTable | None
                  ) -> list[str]:
    if not bills:
        return []
    out = ["| cost | nodes $/h | network $/h | storage $/h | total $/h | $/month |",
           "|---|---:|---:|---:|---:|---:|"]
    out += [f"| {b.kind} `{b.owner}` | " + " | ".join(money(b.part(p)) for p in PARTS)
            + f" | {money(b.total)} | {money(b.total * HOURS_PER_MONTH)} |"
            for b in bills.values()]
    total = sum(b.total for b in bills.values())
    out.append("| **total** | " + " | ".join(money(sum(b.part(p) for b in bills.values()))
                                             for p in PARTS)
               + f" | **{money(total)}** | **{money(total * HOURS_PER_MONTH)}** |")
    out += ["", f"Priced from: {priced_from(catalog, prices)}."]
    unpriced = [f"`{b.owner}`: {u}" for b in bills.values() for u in b.unpriced]
    if unpriced:
        out.append("**Not priced** (left out of the totals): " + "; ".join(unpriced) + ".")
    if prices is not None:
        out.append("Not included: " + ", ".join(prices.not_priced) + ".")
    return [*out, ""]
