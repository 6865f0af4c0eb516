"""Views of an offline plan: text for terminals, JSON for tools, Markdown for PR comments. Pure.

Input: a ``PlanReport`` (``gpufleet.review``): the compiled fleet plans and the resources the
stack program registered (as dicts with ``urn, type, name, parent, provider, inputs``), plus
the offline lookups it made.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from typing import Any

from gpufleet.backends import traits_of
from gpufleet.compile import (
    ANY_SUBNET,
    FleetDesign,
    GatewayDesign,
    handoff_text,
    host_families,
    needs_stack_key,
    plan_to_json,
)
from gpufleet.diagnostics import fold
from gpufleet.input import SshFleetSpec
from gpufleet.offers import HOURS_PER_MONTH, LockStatus
from gpufleet.review import Bill, PlanReport
from gpufleet.views.bill import bill_json, bill_lines, cost_line
from gpufleet.views.fleet_text import access_text, host_setup_text, reservation_text
from gpufleet.views.gateway_text import gateway_lines, gateway_summary
from gpufleet.views.jsonindent import indented_chunks
from gpufleet.views.quota import quota_request_lines
from gpufleet.views.storage import filesystem_text, volume_lines
from gpufleet.views.tree import counts, lookups, resource_lines

NOTE = ("offline plan: the real stack program run under the Pulumi SDK's mock monitor; no "
        "cloud calls, ids and computed values are placeholders")


def fleet_summary(f: FleetDesign) -> dict[str, Any]:
    nic_types = Counter(n.nic_type for n in f.nics)
    return {
        "name": f.name, "file": f.file, "backend": f.backend, "region": f.region,
        "zone": f.zone, "instance_type": f.instance_type, "gpu": f.gpu, "nodes": f.nodes,
        "nodes_min": f.nodes_min, "nodes_max": f.nodes_max, "spot": f.spot,
        "price_per_hour": f.price_per_hour if f.price_known else None,
        "reservation": f.reservation, "reservation_declared": f.reservation_declared,
        "total_per_hour": round(f.total_per_hour, 4),
        "total_per_month": round(f.total_per_hour * HOURS_PER_MONTH, 2), "rdma": f.rdma,
        "rdma_interfaces": f.rdma_interfaces, "nics_per_node": len(f.nics),
        "nic_types": dict(sorted(nic_types.items())),
        "networks": [{"name": n.name, "role": n.role, "cidr": n.cidr, "mtu": n.mtu,
                      "profile": n.profile, "existing": n.existing,
                      "subnets": [s.cidr for s in n.subnets]} for n in f.networks],
        "placement": f.placement.kind if f.placement else None,
        "public_ip": f.public_ip, "provider": f.provider.name, "image": f.image,
        "host_setup": None if f.host_setup is None else {
            "family": f.host_setup.family, "user": f.host_setup.user,
            "script": f.host_setup.digest, "fabric": f.host_setup.fabric,
            # NVIDIA DCGM installed, started and asked, for dstack's health checks
            "dcgm": host_families()[f.host_setup.family].gpu},
        "access": None if f.access is None else {
            "method": f.access.method, "user": f.access.user,
            "bastion": f.access.bastion.name if f.access.bastion else None,
            "key": "backends file" if f.access.public_key else
            ("none needed" if not f.access.needs_key else "stack config")},
    }


LOCK_WORDS = {"locked": "locked", "new": "NEW OFFER (not in the lock yet)",
              "changed": "NEW OFFER (requirements changed since it was locked)",
              "upgraded": "NEW OFFER (upgrade requested)"}


def lock_summary(st: LockStatus | None) -> dict[str, Any] | None:
    if st is None or st.status == "unlocked":
        return None
    prev = st.previous
    return {"status": st.status, "new_offer": st.is_new_offer, "requirements": st.digest,
            "previous": None if prev is None else {
                "backend": prev.backend, "region": prev.region, "zone": prev.zone,
                "instance_type": prev.instance_type, "spot": prev.spot, "price": prev.price}}


def lock_text(st: LockStatus | None, p: FleetDesign | GatewayDesign | None = None) -> str | None:
    if st is None or st.status == "unlocked":
        return None
    if st.is_new_offer and p is not None and st.previous is not None \
            and st.previous.same_offer(p):
        return (f"picked again ({st.status}): the same offer as locked, nothing moves; "
                "`gpufleet lock` records the new requirements")
    text = LOCK_WORDS.get(st.status, st.status)
    if st.is_new_offer and st.previous is not None:
        text += f"; locked before: {st.previous.short()}"
    return text


SSH_NOTE = "ssh fleet: not provisioned by gpufleet (dstack connects to the hosts over SSH)"


def ssh_summary(s: SshFleetSpec) -> dict[str, Any]:
    return {"name": s.name, "file": s.origin.file, "hosts": [h.hostname for h in s.hosts],
            "placement": s.placement, "network": s.network, "note": SSH_NOTE}


def render_plan_json(report: PlanReport) -> str:
    return "".join(plan_json_chunks(report))


def plan_json_chunks(report: PlanReport) -> Iterator[str]:
    """The JSON plan in pieces, in ~1 MB pieces as the encoder makes them: a 16,000-node
    plan is a 180 MB document, which as one string (and the encoder's list of its millions
    of fragments before the join) took 700 MB; written piece by piece it takes none."""
    data = {
        "stack": report.stack, "offline": True, "note": NOTE, "catalog": report.catalog,
        "lock": report.lock_file or None,
        "fleets": [{**fleet_summary(f), "lock": lock_summary(report.fleet_locks.get(f.name))}
                   for f in report.fleets],
        "ssh_fleets": [ssh_summary(s) for s in report.ssh_fleets],
        "gateways": [{**gateway_summary(g, report.stack),
                      "lock": lock_summary(report.gateway_locks.get(g.name))}
                     for g in report.gateways],
        "plans": [plan_to_json(f) for f in report.fleets],
        "gateway_plans": [plan_to_json(g) for g in report.gateways],
        "volumes": [plan_to_json(v) for v in report.volumes],
        **({"quota_requests": [plan_to_json(q) for q in report.quota_requests]}
           if report.quota_requests else {}),
        "resources": [{k: r[k] for k in ("urn", "type", "name", "parent", "provider",
                                         "inputs")} for r in report.resources],
        "summary": {"resources": len(report.resources), "by_type": counts(report.resources),
                    "total_per_hour": round(report.per_hour, 4),
                    "total_per_month": round(report.per_hour * HOURS_PER_MONTH, 2),
                    "nodes_per_hour": round(report.nodes_per_hour, 4)},
        "bill": bill_json(report.bills, report.catalog, report.prices),
        "lookups": [{"token": t, "args": dict(a), "count": n}
                    for t, a, n in lookups(report.lookups)],
        "diagnostics": [f.to_json() for f in fold(report.diagnostics)],
        "policy": [v.to_json() for v in report.violations],
        "costs": None if report.costs is None else {
            "basis": report.costs.basis, "before_per_hour": round(report.costs.before, 4),
            "after_per_hour": round(report.costs.after, 4),
            "fleets": [{"name": f.name, "before_per_hour": round(f.before, 4),
                        "after_per_hour": round(f.after, 4)} for f in report.costs.fleets]},
        "exports": dict(report.exports),
    }
    # the text json.dumps(data, indent=2) writes (a number not finite: null), in ~1 MB pieces
    # and twice as fast (views/jsonindent)
    yield from indented_chunks(data)


def _money(v: float) -> str:
    return f"${v:,.2f}"


def _fleet_lines(f: FleetDesign, st: LockStatus | None = None, bill: Bill | None = None
                 ) -> list[str]:
    s = fleet_summary(f)
    where = f"{f.region}" + (f" / {f.zone}" if f.zone else "")
    top = "unlimited" if f.nodes_max is None else str(f.nodes_max)
    nodes = str(f.nodes)
    if (f.nodes_min, f.nodes_max) != (f.nodes, f.nodes):
        nodes += f" (min {f.nodes_min}, max {top})"
    nic_desc = " + ".join(f"{c} {t}" for t, c in s["nic_types"].items())
    lines = [
        f"fleet {f.name} ({f.file})",
        f"  offer:    {f.backend} {where}  {f.instance_type}  {f.gpu}  "
        f"{'spot' if f.spot else 'on-demand'}  " + (f"${f.price_per_hour:,.4f}/h per node"
                                                   if f.price_known else
                                                   "reserved, price not declared"),
        f"  nodes:    {nodes}   cost: " + (cost_line(bill) if bill is not None else
                                            f"{_money(f.total_per_hour)}/h, "
                                            f"{_money(f.total_per_hour * HOURS_PER_MONTH)}"
                                            "/month"),
        f"  fabric:   {f.rdma}" + (f" x{f.rdma_interfaces}" if f.rdma_interfaces else "")
        + (f"; {len(f.nics)} NIC(s) per node ({nic_desc})" if f.nics else
           "; the one NIC the cloud gives each instance (no network to lay out)"),
    ]
    lock = lock_text(st, f)
    if lock:
        lines.insert(2, f"  lock:     {lock}")
    at_deploy = traits_of(f.backend).zone_at_deploy
    if at_deploy and not f.zone:
        lines.append("  zone:     " + at_deploy.format(region=f.region,
                                                       instance_type=f.instance_type))
    access = access_text(f)
    if access:
        lines.append(f"  access:   {access}")
    if f.placement:
        lines.append(f"  placement: {f.placement.kind} (" + (
            f"{f.placement.existing}, the Capacity Block's own group)"
            if f.placement.existing else f"{f.placement.name})"))
    if f.reservation:
        lines.append(f"  reservation: {reservation_text(f)}")
    lines.append(f"  image:    {f.image}; {host_setup_text(f)}")
    if f.handoff:
        lines.append(f"  handoff:  {handoff_text(f)}")
    lines += [f"  storage:  {filesystem_text(fs, bill)}" for fs in f.filesystems]
    for n in f.networks:
        bits = [n.cidr or "", f"mtu {n.mtu}" if n.mtu else "",
                f"profile {n.profile}" if n.profile else "",
                f"existing {n.existing}" if n.existing else "",
                f"Shared VPC of host project {n.project} (its firewall rules and NAT)"
                if n.project else "",
                "subnet: the network's first in the region, found at `pulumi up`"
                if any(s.existing == ANY_SUBNET for s in n.subnets) else "",
                f"{len(n.subnets)} subnet(s)" if len(n.subnets) > 1 else ""]
        lines.append(f"  network:  {n.name} [{n.role}] " + ", ".join(b for b in bits if b))
    return lines


def next_step(report: PlanReport) -> str:
    """What to do after reading the plan."""
    if any(v.level == "mandatory" for v in report.violations):
        return "next: fix the mandatory policy violations above; `pulumi up` refuses them"
    if needs_stack_key(report.fleets, report.gateways):
        return ("next: set the SSH public key (warning C011), then `gpufleet lock` and "
                "`gpufleet up`")
    news = [n for n, st in {**report.fleet_locks, **report.gateway_locks}.items()
            if st.is_new_offer or st.status == "unlocked"]
    if news or not report.lock_file or "not written yet" in report.lock_file:
        return ("next: `gpufleet lock` records the offers (commit gpufleet.lock), then "
                "`gpufleet up` previews, prices and asks before `pulumi up`")
    return "next: `gpufleet up` previews, prices and asks (or `pulumi up` in stacks/)"


def summary_line(report: PlanReport) -> str:
    n = len(report.resources)
    return (f"plan: + {n:,} to create, ~ 0 to update, +- 0 to replace, - 0 to delete "
            f"(from an empty stack; `gpufleet diff --state` compares with a deployed one); "
            f"{_money(report.per_hour)}/h, {_money(report.per_hour * HOURS_PER_MONTH)}/month")


def render_plan_text(report: PlanReport, expand: bool = False) -> str:
    """The answer first (changes, cost, what needs a look, the bill), then each fleet,
    gateway and volume, then the resource counts; the tree and the offline look-ups only
    with ``expand`` (the JSON keeps everything)."""
    lines = [f"gpufleet plan - stack {report.stack} - {report.catalog}", f"({NOTE})"]
    if report.lock_file:
        lines.append(f"lock: {report.lock_file}")
    lines += ["", summary_line(report)]
    if report.costs is not None:
        lines += report.costs.lines()[:1]
    lines += [*_attention(report), "", *_bill(report), ""]
    for f in report.fleets:
        lines += [*_fleet_lines(f, report.fleet_locks.get(f.name), report.bills.get(f.name)),
                  ""]
    for g in report.gateways:
        bill = report.bills.get(g.name)
        lines += [*gateway_lines(g, lock_text(report.gateway_locks.get(g.name), g),
                                 cost_line(bill) if bill is not None else None, report.stack),
                  ""]
    for v in report.volumes:
        lines += [*volume_lines(v, report.bills.get(f"volume:{v.name}")), ""]
    lines += quota_request_lines(report.quota_requests)
    for s in report.ssh_fleets:
        lines += [f"fleet {s.name or '(unnamed)'} ({s.origin.file})", f"  {SSH_NOTE}; "
                  f"{len(s.hosts)} host(s): {', '.join(h.hostname for h in s.hosts)}", ""]
    lines += resource_lines(report.resources, report.lookups, expand)
    if report.costs is not None and report.costs.before > 0:  # else the bill says it all
        lines += ["", "cost per fleet, gateway and volume (before -> after):",
                  *report.costs.lines()[1:]]
    lines += ["", *_policy_lines(report), "", summary_line(report), next_step(report)]
    return "\n".join(lines)


def _attention(report: PlanReport) -> list[str]:
    """What a reviewer must look at: new offers, warnings, mandatory policy violations."""
    out = []
    news = sorted(n for n, st in {**report.fleet_locks, **report.gateway_locks}.items()
                  if st.is_new_offer)
    if news:
        out.append(f"NEW OFFER: {', '.join(news)} (not in the lock; `gpufleet lock` records "
                   "them)")
    folded = fold(report.diagnostics)
    if folded:
        out.append(f"warnings: {len(folded)} (on standard error; codes "
                   f"{', '.join(sorted({f.first.code for f in folded}))})")
    mandatory = sum(v.level == "mandatory" for v in report.violations)
    if mandatory:
        out.append(f"policy: {mandatory} mandatory violation(s) (listed below)")
    return out


def _bill(report: PlanReport) -> list[str]:
    return [f"bill: {len(report.fleets)} fleet(s), {len(report.gateways)} gateway(s), "
            f"{_money(report.per_hour)}/h, {_money(report.per_hour * HOURS_PER_MONTH)}/month"
            f" (the fleets' nodes {_money(report.nodes_per_hour)}/h; the nodes column adds "
            "dstack's gateway instances)",
            *bill_lines(report.bills, report.catalog, report.prices)]


def _policy_lines(report: PlanReport) -> list[str]:
    if not report.violations:
        return ["policy: no violations (`gpufleet policy list` shows the rules)"]
    mandatory = sum(v.level == "mandatory" for v in report.violations)
    out = [f"policy: {len(report.violations)} violation(s), {mandatory} mandatory"]
    for v in report.violations:
        out += [f"  {v.where}: {v.level}[{v.rule}] {v.message}",
                f"    remediation: {v.remediation}"]
    return out
