"""The offline plan as Markdown, for PR comments: cost, warnings, policy, offers, topology
and the resource tree. Pure."""

from __future__ import annotations

from collections.abc import Sequence

from gpufleet.compile import FleetDesign, GatewayDesign
from gpufleet.diagnostics import fold
from gpufleet.offers import HOURS_PER_MONTH
from gpufleet.review import PlanReport
from gpufleet.views.bill import bill_markdown
from gpufleet.views.gateway_text import gateway_summary
from gpufleet.views.plan import (
    NOTE,
    _money,
    lock_text,
    next_step,
    summary_line,
)
from gpufleet.views.tree import counts, tree


def _warnings_markdown(report: PlanReport) -> list[str]:
    folded = fold(report.diagnostics)
    if not folded:
        return []
    out = [f"**Warnings** ({len(folded)})", ""]
    for f in folded:
        d = f.first
        who = f" {f.kind}s {', '.join(f'`{s}`' for s in f.subjects)}:" if len(f) > 1 and \
            f.subjects else ""
        out.append(f"- {d.severity.value}[{d.code}]{who} {f.message if len(f) > 1 else d.message}"
                   f" ({d.file}:{d.line}" + (f" and {len(f) - 1} more" if len(f) > 1 else "")
                   + ")" + (f". Hint: {d.hint}" if d.hint else ""))
    return [*out, ""]


def _mermaid_id(text: str) -> str:
    return "".join(c if c.isalnum() else "_" for c in text)


def mermaid(fleets: Sequence[FleetDesign], max_nodes: int = 3) -> list[str]:
    out = ["```mermaid", "flowchart LR"]
    for f in fleets:
        fid = _mermaid_id(f.name)
        out.append(f'  subgraph {fid}["{f.name}: {f.nodes} x {f.instance_type} '
                   f'({f.backend} {f.zone or f.region})"]')
        for n in f.networks:
            nid = _mermaid_id(n.name)
            label = f"{n.name}<br/>{n.cidr or n.existing or ''}"
            if len(n.subnets) > 1:
                label += f"<br/>{len(n.subnets)} subnets"
            out.append(f'    {nid}[("{label}")]')
        shown = f.node_names[:max_nodes]
        for node in shown:
            out.append(f'    {_mermaid_id(node)}["{node}"]')
            for n in f.networks:
                k = sum(1 for nic in f.nics if nic.network == n.role)
                out.append(f"    {_mermaid_id(node)} -- {k} NIC --- {_mermaid_id(n.name)}")
        if len(f.node_names) > max_nodes:
            out.append(f'    {fid}_more["... {len(f.node_names) - max_nodes} more node(s)"]')
        if f.access is not None and f.access.bastion is not None:
            b = f.access.bastion
            main = _mermaid_id(f.networks[0].name)
            out.append(f'    {_mermaid_id(b.name)}{{{{"bastion {b.name}<br/>{b.instance_type}"}}}}')
            out.append(f"    {_mermaid_id(b.name)} -- SSH --- {main}")
        out.append("  end")
    out.append("```")
    return out


def render_plan_markdown(report: PlanReport, expand: bool = False) -> str:
    lines = [f"## gpufleet plan: stack `{report.stack}`", "", f"> {NOTE}. {report.catalog}.",
             "", *_costs_markdown(report), *_warnings_markdown(report),
             *_policy_markdown(report), *_new_offers_markdown(report),
             *_fleets_markdown(report),
             f"**Total:** {_money(report.per_hour)}/h, "
             f"{_money(report.per_hour * HOURS_PER_MONTH)}/month (every billable resource; "
             f"the fleets' nodes alone {_money(report.nodes_per_hour)}/h; the bill's nodes "
             "column adds dstack's gateway instances)", "",
             *bill_markdown(report.bills, report.catalog, report.prices),
             *_gateways_markdown(report),
             "### Topology", "", *mermaid(report.fleets), "",
             f"### Resources ({len(report.resources)} to create)", "",
             "| type | count |", "|---|---:|"]
    lines += [f"| `{t}` | {c} |" for t, c in counts(report.resources).items()]
    lines += ["", "<details><summary>Resource tree</summary>", "", "```",
              *tree(report.resources, expand), "```", "", "</details>", "",
              f"**{summary_line(report)}**", "", next_step(report)]
    return "\n".join(lines)


def _costs_markdown(report: PlanReport) -> list[str]:
    if report.costs is None:
        return []
    c = report.costs
    pct = c.increase_pct
    lines = [f"**Cost:** {_money(c.before)}/h -> {_money(c.after)}/h "
             f"({_money(c.before * HOURS_PER_MONTH)} -> {_money(c.after * HOURS_PER_MONTH)}"
             f"/month{'' if pct is None else f', {pct:+.1f}%'}; before = {c.basis})", ""]
    changed = [f for f in c.fleets if abs(f.delta) > 1e-4]
    if changed:
        lines += ["| fleet | before $/h | after $/h | delta $/h |", "|---|---:|---:|---:|"]
        lines += [f"| `{f.name}` | {_money(f.before)} | {_money(f.after)} | "
                  f"{'+' if f.delta >= 0 else '-'}{_money(abs(f.delta))} |" for f in changed]
        lines.append("")
    return lines


def _policy_markdown(report: PlanReport) -> list[str]:
    if not report.violations:
        return ["**Policy:** no violations", ""]
    mandatory = sum(v.level == "mandatory" for v in report.violations)
    return [f"**Policy:** {len(report.violations)} violation(s), {mandatory} mandatory",
            "", "| level | rule | resource | where | message |", "|---|---|---|---|---|",
            *(f"| {v.level} | `{v.rule}` | `{v.resource}` | {v.where} | {v.message} |"
              for v in report.violations), ""]


def _new_offers_markdown(report: PlanReport) -> list[str]:
    planned: dict[str, FleetDesign | GatewayDesign] = {p.name: p for p in report.fleets}
    planned.update({g.name: g for g in report.gateways})
    moved = [(n, st) for n, st in sorted({**report.fleet_locks, **report.gateway_locks}.items())
             if st.is_new_offer]
    if not moved:
        return []
    return ["**New offers** (not taken from the lock; `gpufleet lock` records them):", "",
            *(f"- `{n}`: {lock_text(st, planned.get(n))}" for n, st in moved), ""]


def _fleets_markdown(report: PlanReport) -> list[str]:
    lines = ["| fleet | backend | region / zone | instance | GPUs | nodes | spot | nodes $/h | "
             "nodes $/month | offer |", "|---|---|---|---|---|---:|---|---:|---:|---|"]
    for f in report.fleets:
        st = report.fleet_locks.get(f.name)
        offer = "-" if st is None or st.status == "unlocked" else (
            "**new**" if st.is_new_offer else "locked")
        lines.append(f"| `{f.name}` | {f.backend} | {f.region} / {f.zone or '-'} | "
                     f"`{f.instance_type}` | {f.gpu} | {f.nodes} | {'yes' if f.spot else 'no'} "
                     f"| {_money(f.total_per_hour)} | "
                     f"{_money(f.total_per_hour * HOURS_PER_MONTH)} | {offer} |")
    lines += [f"| `{s.name or '(unnamed)'}` | ssh | - | - | - | {len(s.hosts)} | - | - | - "
              f"| not provisioned |" for s in report.ssh_fleets]
    return [*lines, ""]


def _gateways_markdown(report: PlanReport) -> list[str]:
    if not report.gateways:
        return []
    lines = ["| gateway | backend | region | dstack project | network | DNS record | TLS |",
             "|---|---|---|---|---|---|---|"]
    for g in report.gateways:
        s = gateway_summary(g, report.stack)
        rec = s["record"]
        record = "-" if not rec else f"{rec['type']} `{rec['fqdn']}` -> " + (
            "pending (`gpufleet gateway sync`)" if rec["pending"] else
            ", ".join(f"`{t}`" for t in rec["targets"]))
        network = f"fleet `{g.fleet}`'s" if g.fleet else f"`{g.network.name}`"
        lines.append(f"| `{g.name}` | {g.backend} | {g.region} | `{g.project}` | {network} "
                     f"| {record} | {g.certificate or '-'} |")
    return [*lines, ""]
