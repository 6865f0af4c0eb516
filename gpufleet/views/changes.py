"""Views of a change report (`gpufleet diff` offline, `gpufleet drift` live): text for
terminals, JSON for tools, Markdown for PR comments. Pure."""

from __future__ import annotations

import json
from typing import Any

from gpufleet.review import CHANGE_OPS, Report


def _v(value: Any) -> str:
    text = json.dumps(value, sort_keys=True) if not isinstance(value, str) else value
    return text if len(text) <= 80 else text[:77] + "..."


def render_change_text(report: Report, note: str) -> str:
    c = report.counts()
    lines = [f"gpufleet {report.mode} - stack {report.stack}", f"({note})", "",
             "summary: " + ", ".join(f"{n} {op}" for op, n in c.items() if n or op == "same"),
             *report.cost_lines]
    for ch in sorted(report.changes, key=lambda x: (x.owner or "", x.urn)):
        where = f" [{ch.owner}" + (f" in {ch.file}" if ch.file else "") + "]" if ch.owner else ""
        lines += ["", f"{ch.op:<8} {ch.type}  {ch.name}{where}",
                  f"  class:  {ch.klass}" + (f"; caused by: {ch.yaml_key}" if ch.yaml_key else "")]
        lines += [f"  {p.path}: {_v(p.old)} -> {_v(p.new)} ({p.kind})" for p in ch.properties[:12]]
        if len(ch.properties) > 12:
            lines.append(f"  ... {len(ch.properties) - 12} more propert(ies)")
        if ch.cause:
            lines.append(f"  {'replaced' if ch.op == 'replace' else ch.op}: {ch.cause}")
        if ch.reasons:
            lines.append(f"  replaced because of: {', '.join(ch.reasons)}")
        lines.append(f"  action: {ch.action}")
    if report.not_compared:
        lines += ["", "not compared offline (values from cloud lookups; `pulumi preview` reads "
                  "them):", *[f"  {x}" for x in report.not_compared]]
    lines += ["", *report.notes] if report.notes else []
    if report.violations:
        lines += ["", "FORBIDDEN CHANGES:", *[f"  {v}" for v in report.violations]]
    return "\n".join(lines)


def render_change_json(report: Report, note: str, exit_code: int) -> str:
    return json.dumps({"mode": report.mode, "stack": report.stack, "note": note,
                       "summary": report.counts(), "exit_code": exit_code,
                       "changes": [c.to_json() for c in report.changes],
                       "not_compared": list(report.not_compared),
                       "notes": list(report.notes), "violations": list(report.violations),
                       "costs": list(report.cost_lines)},
                      indent=2, default=str)


def render_change_markdown(report: Report, note: str) -> str:
    c = report.counts()
    lines = [f"## gpufleet {report.mode}: stack `{report.stack}`", "", f"> {note}", "",
             "| create | update | replace | delete | unknown | same |",
             "|---:|---:|---:|---:|---:|---:|",
             "| " + " | ".join(str(c[k]) for k in (*CHANGE_OPS, "same")) + " |", ""]
    if report.cost_lines:
        lines += [f"**Cost:** {report.cost_lines[0].removeprefix('cost: ')}", "",
                  *[f"- {ln.strip()}" for ln in report.cost_lines[1:]], ""]
    if report.violations:
        lines += ["**Forbidden changes:**", "", *[f"- {v}" for v in report.violations], ""]
    if report.changes:
        lines += ["| op | resource | type | fleet / gateway | YAML key | class | details |",
                  "|---|---|---|---|---|---|---|"]
        for ch in sorted(report.changes, key=lambda x: (x.owner or "", x.urn)):
            details = "<br/>".join([f"`{p.path}`: {_v(p.old)} → {_v(p.new)}"
                                    for p in ch.properties[:5]]
                                   + ([ch.cause] if ch.cause else [])).replace("|", "\\|")
            lines.append(f"| **{ch.op}** | `{ch.name}` | `{ch.type}` | {ch.owner or '-'} | "
                         f"{ch.yaml_key or '-'} | {ch.klass} | {details or '-'} |")
    else:
        lines.append("No changes.")
    return "\n".join(lines)
