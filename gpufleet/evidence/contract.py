"""The monthly delivery report: the terms the backends file declares per fleet (`fleets:
{NAME: {contract: ...}}`) against the verdicts the evidence ledger holds for that month.

Each term is met, breached (with the entries behind it and their evidence digests) or has no
evidence. The figures: all-reduce bus bandwidth by node count (recorded NCCL checks),
storage throughput (recorded storage checks), replacements in the month and the hours each
took (recorded `gpufleet replace` runs), and the share of a burn-in batch that failed. A
breached figure term also counts the hours it stayed below the figure: from the breaching
entry to the next entry that meets it, or the end of the month.

Only what passed meets a term: a check that failed (an NCCL run with wrong results, a storage
run with a fio job in error) is a breach of the term it measures, a check without a verdict
(cut off, unreadable) is no evidence, and only replacements that happened count. Every entry
the report reads is type-checked first (a time with its offset, filed by its month in UTC;
whole numbers where counts belong; finite figures); a malformed one stops the report
(:class:`ContractError`, naming its line) rather than being guessed at."""

from __future__ import annotations

import datetime as dt
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from gpufleet.evidence.acceptance import is_count

STATUS = ("met", "breached", "no evidence")
VERDICT_CODES = {"pass": 0, "fail": 1, "no verdict": 2}
MONTH = re.compile(r"[0-9]{4}-(0[1-9]|1[0-2])", re.ASCII)


class ContractError(ValueError):
    """A ledger entry the report cannot read as what its kind records."""


HEALTH_STATUSES = ("healthy", "warning", "failure", "unknown")  # `gpufleet health`'s


def _is_figure(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) \
        and math.isfinite(value) and value >= 0


def entry_time(entry: Mapping[str, Any]) -> dt.datetime:
    """The entry's time in UTC; ContractError when it is not ISO 8601 with an offset."""
    text = entry.get("time")
    try:
        if not isinstance(text, str) or not text.isascii():
            raise ValueError
        when = dt.datetime.fromisoformat(text)
    except ValueError:
        raise ContractError(f"line {entry.get('seq')}: time {text!r} is not an ISO 8601 "
                            "time") from None
    if when.tzinfo is None or when.utcoffset() is None:
        raise ContractError(f"line {entry.get('seq')}: time {text!r} has no offset (UTC or "
                            "+hh:mm): its month cannot be told")
    return when.astimezone(dt.UTC)


def outcome(entry: Mapping[str, Any]) -> int:
    """0 pass, 1 fail, 2 no verdict: from the entry's verdict, and its exit code when it
    records one (the two must agree)."""
    verdict, code = entry.get("verdict"), entry.get("exit_code")
    if verdict not in VERDICT_CODES:
        raise ContractError(f"line {entry.get('seq')}: verdict {verdict!r} is not one of "
                            f"{', '.join(VERDICT_CODES)}")
    if code is not None and (not is_count(code) or code != VERDICT_CODES[str(verdict)]):
        raise ContractError(f"line {entry.get('seq')}: exit_code {code!r} does not go with "
                            f"verdict {verdict!r}")
    return VERDICT_CODES[str(verdict)]


_FIELDS: dict[str, dict[str, Any]] = {
    # kind -> figure -> its check (a figure may be absent or null unless the kind needs it)
    "nccl": {"peak_busbw_gbps": _is_figure},
    "storage": {"write_mbps_all": _is_figure, "read_mbps_all": _is_figure},
    "burn-in": {"failed_nodes": is_count},
    "replace": {"hours": _is_figure},
    "health": {"failure_nodes": is_count, "warning_nodes": is_count, "unknown_nodes": is_count},
}


def checked(entry: Mapping[str, Any]) -> Mapping[str, Any]:
    """The entry, type-checked for what the report reads of it; ContractError naming its
    line otherwise."""
    line = entry.get("seq")
    if not is_count(line) or not isinstance(entry.get("digest"), str):
        raise ContractError(f"line {line}: no sequence number or digest")
    entry_time(entry)
    outcome(entry)
    kind, figures = entry.get("kind"), entry.get("figures")
    if not isinstance(figures, dict):
        raise ContractError(f"line {line}: figures is not a mapping")
    nodes = entry.get("nodes")
    if kind in _FIELDS and nodes is not None and not is_count(nodes):
        raise ContractError(f"line {line}: nodes {nodes!r} is not a whole number")
    for name, ok in _FIELDS.get(str(kind), {}).items():
        value = figures.get(name)
        required = kind == "replace" and _replaced(entry)
        if (value is not None or required) and not ok(value):
            raise ContractError(f"line {line}: {kind} figure {name} = {value!r} is not a "
                                "finite, non-negative number" + (" (a count)" if ok is
                                                                  is_count else ""))
    if kind == "health" and figures.get("nodes") is not None and not (
            isinstance(figures["nodes"], dict) and all(
                isinstance(k, str) and v in HEALTH_STATUSES
                for k, v in figures["nodes"].items())):
        raise ContractError(f"line {line}: health figure nodes is not a mapping of node "
                            f"names to {', '.join(HEALTH_STATUSES)}")
    if kind == "replace":
        names = figures.get("nodes")
        if names is not None and (not isinstance(names, list)
                                  or not all(isinstance(n, str) for n in names)):
            raise ContractError(f"line {line}: replace figure nodes is not a list of names")
    return entry


def _replaced(entry: Mapping[str, Any]) -> bool:
    """Whether a recorded `replace` run replaced its nodes: its own `replaced` flag, or (an
    entry written before the flag) a pass."""
    flag = entry["figures"].get("replaced") if isinstance(entry.get("figures"), dict) else None
    if flag is not None:
        return flag is True
    return entry.get("verdict") == "pass"


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


def month_of(entries: Sequence[Mapping[str, Any]], month: str | None) -> str:
    """``month`` (ASCII YYYY-MM; ContractError otherwise), else the latest month in UTC of
    the entries."""
    if month is not None:
        if not MONTH.fullmatch(month):
            raise ContractError(f"--month {month}: expected YYYY-MM")
        return month
    return max((entry_time(e).strftime("%Y-%m") for e in entries), default="")


def _month_end(month: str) -> dt.datetime:
    year, mon = (int(x) for x in month.split("-"))
    return dt.datetime(year + mon // 12, mon % 12 + 1, 1, tzinfo=dt.UTC)


Series = list[tuple[Mapping[str, Any], float | None, float]]


def _figure_term(fleet: str, term: str, series: Series, unit: str, month: str) -> TermResult:
    """(entry, measured or None for a check that failed, contracted) in time order -> met
    or breached, hours below."""
    if not series:
        return TermResult(fleet, term, "no evidence", "no recorded check this month")
    below_since: dt.datetime | None = None
    hours = 0.0
    for entry, got, want in series:
        if (got is None or got < want) and below_since is None:
            below_since = entry_time(entry)
        elif got is not None and got >= want and below_since is not None:
            hours += (entry_time(entry) - below_since).total_seconds() / 3600
            below_since = None
    if below_since is not None:
        hours += (_month_end(month) - below_since).total_seconds() / 3600
    bad = [(e, g, w) for e, g, w in series if g is None or g < w]
    refs = [(int(e["seq"]), str(e["digest"])) for e, _, _ in (bad or series)]
    if bad:
        failed = [e for e, g, _ in bad if g is None]
        slow = [(e, g, w) for e, g, w in bad if g is not None]
        worst = min(slow, key=lambda x: x[1] / x[2]) if slow else None
        why = [f"{len(bad)} of {len(series)} check(s) "
               + ("under the figure" if not failed else "failed or under the figure")]
        if failed:
            why.append(f"{len(failed)} failed (entr{'y' if len(failed) == 1 else 'ies'} "
                       f"{', '.join(str(e['seq']) for e in failed)})")
        if worst is not None:
            why.append(f"worst {worst[1]:g} {unit} against {worst[2]:g} (entry "
                       f"{worst[0]['seq']})")
        return TermResult(fleet, term, "breached", "; ".join(why) + f"; {hours:.1f} h below",
                          refs, hours)
    return TermResult(fleet, term, "met", f"{len(series)} check(s), all at or above the "
                      "figure", refs, 0.0)


def _busbw(entries: list[Mapping[str, Any]], terms: Mapping[str, Any]) -> Series:
    figures = sorted((int(k), float(v)) for k, v in (terms.get("busbw") or {}).items())
    out: Series = []
    for e in entries:
        peak, nodes = e["figures"].get("peak_busbw_gbps"), e.get("nodes")
        applies = [v for n, v in figures if isinstance(nodes, int) and n <= nodes]
        code = outcome(e)
        # a run with no verdict (cut off, incomplete) measured nothing the term can use;
        # a failed run (wrong results, too slow) delivered nothing, whatever its peak
        if e.get("kind") != "nccl" or code == 2 or not applies:
            continue
        if code == 1:
            out.append((e, None, applies[-1]))
        elif peak is not None:
            out.append((e, float(peak), applies[-1]))
    return out


def _storage(entries: list[Mapping[str, Any]], want: float) -> Series:
    out: Series = []
    for e in entries:
        f = e["figures"]
        got = [f.get(k) for k in ("write_mbps_all", "read_mbps_all")]
        code = outcome(e)
        if e.get("kind") != "storage" or code == 2:
            continue
        if code == 1 and not all(g is not None for g in got):
            out.append((e, None, want))  # a job in error: no throughput was delivered
        elif all(g is not None for g in got):
            # a failed run is below the figure or had a job in error: never at the figure
            measured = float(min(got))
            out.append((e, None if code == 1 and measured >= want else measured, want))
    return out


def _replacements(fleet: str, entries: list[Mapping[str, Any]], terms: Mapping[str, Any]
                  ) -> list[TermResult]:
    done = [e for e in entries if e.get("kind") == "replace" and _replaced(e)]
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


def _failures(fleet: str, entries: list[Mapping[str, Any]], cap: int) -> TermResult:
    """Distinct nodes the month's recorded health runs found failing, against ``cap``."""
    runs = [e for e in entries if e.get("kind") == "health"
            and isinstance(e["figures"].get("nodes"), dict)]
    if not runs:
        return TermResult(fleet, "max_failed_nodes_per_month", "no evidence",
                          "no recorded health run this month")
    failed = sorted({n for e in runs for n, s in e["figures"]["nodes"].items()
                     if s == "failure"})
    hit = [e for e in runs if "failure" in e["figures"]["nodes"].values()]
    return TermResult(fleet, "max_failed_nodes_per_month",
                      "breached" if len(failed) > cap else "met",
                      f"{len(failed)} node(s) failed in {len(runs)} health run(s)"
                      + (f" ({', '.join(failed)})" if failed else "") + f", at most {cap}",
                      [(int(e["seq"]), str(e["digest"])) for e in (hit or runs)])


def _batches(fleet: str, entries: list[Mapping[str, Any]], share: float) -> TermResult:
    runs = [e for e in entries if e.get("kind") == "burn-in" and outcome(e) != 2
            and is_count(e["figures"].get("failed_nodes")) and e.get("nodes")]
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
    """Every declared term of every fleet, judged on the month's entries (time order).
    ContractError when an entry is malformed."""
    for e in entries:
        checked(e)
    out: list[TermResult] = []
    for fleet, t in sorted(terms.items()):
        mine = sorted((e for e in entries if e.get("fleet") == fleet
                       and entry_time(e).strftime("%Y-%m") == month),
                      key=lambda e: int(e["seq"]))
        if t.get("busbw"):
            out.append(_figure_term(fleet, "busbw", _busbw(mine, t), "GB/s", month))
        if t.get("storage_mbps") is not None:
            out.append(_figure_term(fleet, "storage_mbps",
                                    _storage(mine, float(t["storage_mbps"])), "MB/s", month))
        out += _replacements(fleet, mine, t)
        if t.get("max_failed_nodes_per_month") is not None:
            out.append(_failures(fleet, mine, int(t["max_failed_nodes_per_month"])))
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
