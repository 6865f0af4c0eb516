"""The all-reduce scaling report: nccl-tests logs of one fleet at different node counts ->
bus bandwidth per node count and message size, each node count judged against what the
fabric should carry, and a plot. Pure but for :func:`plot`, which needs matplotlib.

A node count is read from the log itself (the distinct hosts of nccl-tests' `# Rank N Group
G Pid P on HOST device D` lines), never from the file name. The reference of a node count is
the expected bus bandwidth given for it (`--expect-busbw N=GBPS`), else the one given for
every count, else the fabric's published figure, else the smallest node count's own peak
(the report then says it judges scaling only). Below ``fraction`` of the reference fails.
A log that cannot be read strictly, or two logs of one node count, make no verdict (exit 2).
"""

from __future__ import annotations

import dataclasses
import io
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from gpufleet.compile import fabric_facts
from gpufleet.evidence.acceptance import Expectation
from gpufleet.evidence.nccllog import NcclLog, parse_log, verdict

_RANK = re.compile(r"^#\s*Rank\s+\d+\s+Group\s+\d+\s+Pid\s+\d+\s+on\s+(\S+)\s+device\s+\d+")
# One pass mark for `acceptance check` and `acceptance report`: the fabric facts' fraction of
# the expected bus bandwidth (fabrics.json `pass_fraction`)
DEFAULT_FRACTION = float(fabric_facts()["pass_fraction"])


@dataclass(frozen=True, slots=True)
class Point:
    nodes: int
    log: str
    busbw: Mapping[int, float]  # message size (B) -> bus bandwidth (GB/s), the larger side
    peak: float
    peak_size: int


@dataclass
class ScalingReport:
    fleet: str
    fraction: float
    points: list[Point] = field(default_factory=list)
    references: dict[int, tuple[float, str]] = field(default_factory=dict)  # n -> (GB/s, why)
    problems: list[str] = field(default_factory=list)  # why there is no verdict

    def ratio(self, p: Point) -> float:
        ref = self.references[p.nodes][0]
        return p.peak / ref if ref > 0 else 0.0  # a reference of 0 is no reference

    def passed(self, p: Point) -> bool:
        return self.ratio(p) >= self.fraction

    @property
    def exit_code(self) -> int:
        if self.problems or not self.points:
            return 2
        return 0 if all(self.passed(p) for p in self.points) else 1

    def sizes(self) -> list[int]:
        """The message sizes every log has."""
        common = set.intersection(*(set(p.busbw) for p in self.points)) if self.points else set()
        return sorted(common)


def nodes_in(text: str) -> int:
    """How many distinct hosts the log's rank lines name (0 when it has none)."""
    hosts = {m.group(1) for line in text.splitlines() if (m := _RANK.match(line.strip()))}
    return len(hosts)


def _point(name: str, text: str, log: NcclLog, problems: list[str],
           expected: Expectation | None) -> Point | None:
    runs = [r for r in log.runs if r.rows]
    nodes = nodes_in(text)
    if not nodes:
        problems.append(f"{name}: no `# Rank ... on HOST device ...` lines, so its node count "
                        "cannot be read (run nccl-tests without -q, keep the whole output)")
        return None
    if log.problems or log.too_big or len(runs) != 1 or log.hosts_not_ready:
        why = (log.problems[:1] or (["larger than gpufleet reads"] if log.too_big else [])
               or ([f"{len(runs)} result tables"] if len(runs) != 1 else [])
               or [f"host setup not ready: {log.hosts_not_ready[0]}"])
        problems.append(f"{name}: not strictly readable ({why[0]})")
        return None
    run = runs[0]
    if run.out_of_bounds is None or run.out_of_bounds[1] != "OK" or run.wrong():
        problems.append(f"{name}: nccl-tests did not report correct results (out-of-bounds "
                        "line missing or FAILED, or #wrong > 0): check it with `gpufleet "
                        "acceptance check` first")
        return None
    if expected is not None:
        # the NCCL checker's evidence rules, bandwidth aside: every size the header
        # announces, every GPU of every node it names once, on the plan's GPU model,
        # results checked and correct, a whole run
        judged = verdict(log, dataclasses.replace(expected, nodes=nodes, busbw_gbps=None,
                                                  threshold_gbps=None))
        if judged.code != 0:
            reasons = [x for x in judged.lines if x.startswith(("FAIL:", "unreadable"))]
            reason = (reasons or list(judged.lines[-1:]) or ["no verdict"])[0]
            problems.append(f"{name}: not evidence `acceptance check` would pass ({reason})")
            return None
    peak = max(run.rows, key=lambda r: r.busbw)
    return Point(nodes, name, {r.size: r.busbw for r in run.rows}, peak.busbw, peak.size)


@dataclass(frozen=True, slots=True)
class Marks:
    """Where a node count's expected bus bandwidth comes from, first match wins: the command
    line for that count (`--expect-busbw N=GBPS`), the command line for every count, the
    backends file's `fleets: {NAME: {expect_busbw: ...}}` (a figure, or figures by node count
    applied from their count up to the next), the fabric's published figure (measured at
    ``published_nodes``), else none."""

    per_count: Mapping[int, float] = field(default_factory=dict)
    every: float | None = None
    contract: Mapping[int, float] = field(default_factory=dict)  # 0: every count
    published: float | None = None
    published_source: str = ""
    published_nodes: int | None = None

    def reference(self, nodes: int) -> tuple[float, str] | None:
        if nodes in self.per_count:
            return self.per_count[nodes], f"--expect-busbw {nodes}="
        if self.every is not None:
            return self.every, "--expect-busbw"
        if self.contract:
            counts = sorted(self.contract)
            at = max((c for c in counts if c <= nodes), default=counts[0])
            where = "every node count" if at == 0 else f"{at}+ nodes"
            return self.contract[at], f"the backends file's expect_busbw ({where})"
        if self.published is not None:
            measured = (f"; measured on {self.published_nodes} nodes, applied at {nodes} as "
                        "bus bandwidth is normalised to be independent of the node count"
                        if self.published_nodes and self.published_nodes != nodes else "")
            return self.published, self.published_source + measured
        return None


def scaling_report(fleet: str, logs: Sequence[tuple[str, str]], fraction: float,
                   marks: Marks, too_big: Sequence[str] = (),
                   expected: Expectation | None = None) -> ScalingReport:
    """``expected``: the fleet's acceptance expectation, whose GPU model and GPUs per node
    every log's rank lines must show (each rank once)."""
    report = ScalingReport(fleet, fraction)
    for name, text in logs:
        point = _point(name, text, parse_log(text, too_big=name in too_big), report.problems,
                       expected)
        if point is None:
            continue
        twin = next((p for p in report.points if p.nodes == point.nodes), None)
        if twin is not None:
            report.problems.append(f"{twin.log} and {name} are both {point.nodes}-node runs; "
                                   "give one log per node count")
            continue
        report.points.append(point)
    report.points.sort(key=lambda p: p.nodes)
    for p in report.points:
        ref = marks.reference(p.nodes)
        if ref is None:
            first = report.points[0]
            ref = (first.peak, f"the {first.nodes}-node run's own peak (no published figure: "
                   "scaling only)")
        report.references[p.nodes] = ref
    zero = [f"{p.log}: a peak of 0 GB/s" for p in report.points if p.peak <= 0]
    if zero:  # a zero figure is never a pass, and no reference for the others
        report.problems += [*zero, "a run with no bandwidth proves nothing about scaling"]
    return report


def _gb(size: int) -> str:
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if size >= scale:
            return f"{size / scale:g} {unit}"
    return f"{size} B"


def report_lines(r: ScalingReport) -> list[str]:
    out = [f"all-reduce scaling of fleet {r.fleet}: {len(r.points)} run(s)"]
    if r.points:
        sizes = [s for s in r.sizes() if s >= 1 << 20] or r.sizes()
        head = ["size"] + [f"{p.nodes} node(s)" for p in r.points]
        rows = [[_gb(s)] + [f"{p.busbw[s]:.2f}" for p in r.points] for s in sizes]
        widths = [max(len(x[i]) for x in (head, *rows)) for i in range(len(head))]
        out.append("bus bandwidth (GB/s) by message size:")
        out += ["  " + "  ".join(c.rjust(widths[i]) for i, c in enumerate(row))
                for row in (head, *rows)]
        whys = {why for _, why in r.references.values()}
        if len(whys) == 1:
            out.append(f"reference: {next(iter(whys))}; pass mark {100 * r.fraction:.0f}%")
        for p in r.points:
            ref, why = r.references[p.nodes]
            mark = "ok  " if r.passed(p) else "FAIL"
            out.append(f"  {mark} {p.nodes} node(s): peak {p.peak:.2f} GB/s at {_gb(p.peak_size)}"
                       f" = {100 * r.ratio(p):.0f}% of {ref:g} GB/s"
                       + ("" if len(whys) == 1 else f" ({why}); pass mark "
                          f"{100 * r.fraction:.0f}%"))
    out += [f"  no verdict: {problem}" for problem in r.problems]
    out.append({0: "PASS", 1: "FAIL", 2: "NO VERDICT (a log cannot be read)"}[r.exit_code])
    return out


def report_json(r: ScalingReport) -> dict[str, Any]:
    return {
        "fleet": r.fleet, "threshold_fraction": r.fraction,
        "runs": [{"nodes": p.nodes, "log": p.log, "peak_busbw_gbps": p.peak,
                  "peak_at_bytes": p.peak_size, "reference_gbps": r.references[p.nodes][0],
                  "reference_source": r.references[p.nodes][1],
                  "ratio": round(r.ratio(p), 4),
                  "verdict": "pass" if r.passed(p) else "fail",
                  "busbw_by_size": {str(s): bw for s, bw in sorted(p.busbw.items())}}
                 for p in r.points],
        "problems": list(r.problems),
        "verdict": {0: "pass", 1: "fail", 2: "no verdict"}[r.exit_code],
        "exit_code": r.exit_code,
    }


def report_markdown(r: ScalingReport) -> str:
    lines = [f"### All-reduce scaling: fleet `{r.fleet}`", "",
             "| nodes | peak busbw (GB/s) | at | reference (GB/s) | ratio | verdict |",
             "|---:|---:|---:|---:|---:|---|"]
    lines += [f"| {p.nodes} | {p.peak:.2f} | {_gb(p.peak_size)} | "
              f"{r.references[p.nodes][0]:g} | {100 * r.ratio(p):.0f}% | "
              f"{'pass' if r.passed(p) else '**FAIL**'} |" for p in r.points]
    lines += ["", *(f"- no verdict: {x}" for x in r.problems),
              f"**{ {0: 'PASS', 1: 'FAIL', 2: 'NO VERDICT'}[r.exit_code] }** (pass mark "
              f"{100 * r.fraction:.0f}% of the reference)"]
    return "\n".join(lines) + "\n"


PLOT_MARKER = "written by `gpufleet acceptance report`"  # in the plot's metadata


def plot(r: ScalingReport, path: str) -> bytes:
    """Bus bandwidth vs message size, one line per node count, the pass marks dashed; PNG or
    SVG by the file's suffix, with PLOT_MARKER in its metadata (the one writer knows its own
    plots by it). The bytes: the caller writes them."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(8, 5), dpi=100)
    for p in r.points:
        sizes = sorted(p.busbw)
        ax.plot(sizes, [p.busbw[s] for s in sizes], marker="o", markersize=3,
                label=f"{p.nodes} node(s): peak {p.peak:.0f} GB/s")
    marks = sorted({round(ref * r.fraction, 2) for ref, _ in r.references.values()})
    for mark in marks:
        ax.axhline(mark, linestyle="--", linewidth=1, color="grey")
        ax.annotate(f"pass mark {mark:g} GB/s", (0.01, mark), xycoords=("axes fraction", "data"),
                    textcoords="offset points", xytext=(0, 3), fontsize=8, color="grey")
    ax.set_xscale("log", base=2)
    ax.set_xlabel("message size (bytes)")
    ax.set_ylabel("bus bandwidth (GB/s)")
    ax.set_title(f"NCCL all-reduce, fleet {r.fleet}")
    ax.grid(True, which="major", alpha=0.3)
    ax.legend(loc="upper left", fontsize=8)
    fig.tight_layout()
    out = io.BytesIO()
    try:
        fig.savefig(out, format=path.rsplit(".", 1)[-1].lower(), metadata=_metadata(path))
    finally:
        plt.close(fig)
    return out.getvalue()


def _metadata(path: str) -> dict[str, Any]:
    """The marker, and no creation date or software version: the same logs, the same
    bytes."""
    if path.lower().endswith(".svg"):
        return {"Date": None, "Creator": None, "Description": PLOT_MARKER}
    return {"Software": None, "Comment": PLOT_MARKER}
