"""The monthly delivery report: the terms the backends file declares per fleet (`fleets:
{NAME: {contract: ...}}`) against the verdicts the evidence ledger holds for that month.

Each term is met, breached (with the entries behind it and their evidence digests) or has no
evidence. The figures: all-reduce bus bandwidth by node count (recorded NCCL checks),
storage throughput (recorded storage checks), replacements in the month and the hours each
took (recorded `gpufleet replace` runs), and the share of a burn-in batch that failed. A
breached figure term also counts the hours it stayed below the figure: from the breaching
entry to the next entry that meets it, or the end of the month."""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

STATUS = ("met", "breached", "no evidence")


@dataclass
class TermResult:
    fleet: str
    term: str
    status: str
    detail: str
    entries: list[tuple[int, str]] = field(default_factory=list)  # (seq, digest) behind it
    hours_below: float | None = None

    def to_json(self) -> dict[str, Any]:
        return {"fleet": self.fleet, "term": self.term, "status": self.status,
                "detail": self.detail, "hours_below": self.hours_below,
                "entries": [{"seq": s, "digest": d} for s, d in self.entries]}


def _when(entry: Mapping[str, Any]) -> dt.datetime:
    return dt.datetime.fromisoformat(str(entry.get("time")))


def month_of(entries: Sequence[Mapping[str, Any]], month: str | None) -> str:
    if month:
        return month
    return max((str(e.get("time", ""))[:7] for e in entries), default="")


def _month_end(month: str) -> dt.datetime:
    year, mon = (int(x) for x in month.split("-"))
    return dt.datetime(year + mon // 12, mon % 12 + 1, 1, tzinfo=dt.UTC)


def _figure_term(fleet: str, term: str, series: list[tuple[Mapping[str, Any], float, float]],
                 unit: str, month: str) -> TermResult:
    """(entry, measured, contracted) in time order -> met or breached, hours below."""
    if not series:
        return TermResult(fleet, term, "no evidence", "no recorded check this month")
    below_since: dt.datetime | None = None
    hours = 0.0
    for entry, got, want in series:
        if got < want and below_since is None:
            below_since = _when(entry)
        elif got >= want and below_since is not None:
            hours += (_when(entry) - below_since).total_seconds() / 3600
            below_since = None
    if below_since is not None:
        hours += (_month_end(month) - below_since).total_seconds() / 3600
    bad = [(e, g, w) for e, g, w in series if g < w]
    refs = [(int(e["seq"]), str(e["digest"])) for e, _, _ in (bad or series)]
    if bad:
        worst = min(bad, key=lambda x: x[1] / x[2])
        return TermResult(fleet, term, "breached", f"{len(bad)} of {len(series)} check(s) "
                          f"under the figure; worst {worst[1]:g} {unit} against {worst[2]:g} "
                          f"(entry {worst[0]['seq']}); {hours:.1f} h below", refs, hours)
    return TermResult(fleet, term, "met", f"{len(series)} check(s), all at or above the "
                      "figure", refs, 0.0)


def _busbw(entries: list[Mapping[str, Any]], terms: Mapping[str, Any]
           ) -> list[tuple[Mapping[str, Any], float, float]]:
    figures = sorted((int(k), float(v)) for k, v in (terms.get("busbw") or {}).items())
    out = []
    for e in entries:
        peak, nodes = e["figures"].get("peak_busbw_gbps"), e.get("nodes")
        applies = [v for n, v in figures if isinstance(nodes, int) and n <= nodes]
        # a run with no verdict (cut off, incomplete) measured nothing the term can use
        if e.get("kind") == "nccl" and e.get("exit_code") != 2 and applies \
                and isinstance(peak, int | float):
            out.append((e, float(peak), applies[-1]))
    return out


def _storage(entries: list[Mapping[str, Any]], want: float
             ) -> list[tuple[Mapping[str, Any], float, float]]:
    out = []
    for e in entries:
        f = e["figures"]
        got = [f.get(k) for k in ("write_mbps_all", "read_mbps_all")]
        if e.get("kind") == "storage" and all(isinstance(g, int | float) for g in got):
            out.append((e, float(min(got)), want))
    return out


def _replacements(fleet: str, entries: list[Mapping[str, Any]], terms: Mapping[str, Any]
                  ) -> list[TermResult]:
    done = [e for e in entries if e.get("kind") == "replace"]
    refs = [(int(e["seq"]), str(e["digest"])) for e in done]
    out = []
    cap = terms.get("max_replacements_per_month")
    if cap is not None:
        count = sum(len(e["figures"].get("nodes") or []) for e in done)
        out.append(TermResult(fleet, "max_replacements_per_month",
                              "breached" if count > cap else "met",
                              f"{count} node(s) replaced in {len(done)} run(s), at most {cap}",
                              refs))
    limit = terms.get("replace_within_hours")
    if limit is not None:
        slow = [e for e in done if float(e["figures"].get("hours", 0)) > float(limit)]
        out.append(TermResult(
            fleet, "replace_within_hours", "no evidence" if not done else
            "breached" if slow else "met",
            (f"{len(slow)} of {len(done)} replacement(s) took longer than {limit:g} h: "
             + ", ".join(f"entry {e['seq']} {float(e['figures']['hours']):.1f} h"
                         for e in slow)) if slow else
            f"{len(done)} replacement(s), each within {limit:g} h",
            [(int(e["seq"]), str(e["digest"])) for e in (slow or done)]))
    return out


def _batches(fleet: str, entries: list[Mapping[str, Any]], share: float) -> TermResult:
    runs = [e for e in entries if e.get("kind") == "burn-in"
            and isinstance(e["figures"].get("failed_nodes"), int) and e.get("nodes")]
    if not runs:
        return TermResult(fleet, "max_bad_batch_share", "no evidence",
                          "no recorded burn-in this month")
    bad = [e for e in runs if e["figures"]["failed_nodes"] / int(e["nodes"]) > share]
    detail = "; ".join(f"entry {e['seq']}: {e['figures']['failed_nodes']} of {e['nodes']} "
                       "failed" for e in runs)
    return TermResult(fleet, "max_bad_batch_share", "breached" if bad else "met",
                      f"{detail} (at most {share:.0%})",
                      [(int(e["seq"]), str(e["digest"])) for e in (bad or runs)])


def contract_report(entries: Sequence[Mapping[str, Any]],
                    terms: Mapping[str, Mapping[str, Any]], month: str) -> list[TermResult]:
    """Every declared term of every fleet, judged on the month's entries (time order)."""
    out: list[TermResult] = []
    for fleet, t in sorted(terms.items()):
        mine = sorted((e for e in entries if e.get("fleet") == fleet
                       and str(e.get("time", "")).startswith(month)
                       and isinstance(e.get("figures"), dict)), key=lambda e: int(e["seq"]))
        if t.get("busbw"):
            out.append(_figure_term(fleet, "busbw", _busbw(mine, t), "GB/s", month))
        if t.get("storage_mbps") is not None:
            out.append(_figure_term(fleet, "storage_mbps",
                                    _storage(mine, float(t["storage_mbps"])), "MB/s", month))
        out += _replacements(fleet, mine, t)
        if t.get("max_bad_batch_share") is not None:
            out.append(_batches(fleet, mine, float(t["max_bad_batch_share"])))
    return out


def report_lines(results: Sequence[TermResult], month: str, markdown: bool = False
                 ) -> list[str]:
    breached = [r for r in results if r.status == "breached"]
    head = (f"contract report {month}: {len(results)} term(s), {len(breached)} breached")
    if not markdown:
        return [head, *(f"  {r.status.upper() if r.status == 'breached' else r.status:<11} "
                        f"{r.fleet} {r.term}: {r.detail}" for r in results)]
    out = [f"## Delivery report {month}", "", head, "",
           "| fleet | term | status | detail | evidence (ledger entries) |",
           "|---|---|---|---|---|"]
    for r in results:
        refs = "<br>".join(f"#{s} `{d}`" for s, d in r.entries) or "-"
        out.append(f"| {r.fleet} | {r.term} | **{r.status}** | {r.detail} | {refs} |")
    return out
