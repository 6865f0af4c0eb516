"""`gpufleet preflight`: before `pulumi up`, ask each cloud whether the planned nodes can start.

For every fleet: the instance type is offered where it is planned; the reservation it names
exists, is active, holds that type in that zone and has room for the nodes still to start;
without a reservation, the region's quota (vCPUs on AWS and Azure, GPUs on GCP) covers them.
Fleets sharing a reservation or a quota are counted together. Nodes the stack already runs
are not counted again (they already hold their share).

The clouds are read through probes (``gpufleet.live.probes``), thin readers of the clouds'
APIs that return the facts below; the verdicts are made here, the same way for every cloud.
A probe that cannot reach the cloud (no SDK, no credentials) raises ``MissingAccess``: the
command exits 2 and says what is missing. A fact a probe cannot read fails its check.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any, Protocol

from gpufleet.backends import traits_of
from gpufleet.compile import FleetDesign
from gpufleet.input import Lock, ReservationSpec
from gpufleet.live.facts import (
    LIVE_EXTRA,
    Check,
    MissingAccess,
    Need,
    ProbeError,
    QuotaFacts,
    QuotaKey,
    ReservationFacts,
    Verdict,
)
from gpufleet.live.stack import compile_stack
from gpufleet.traits import TOPOLOGY_LAYERS, NetworkQuota

# the facts are re-exported: the backends' probes import them from here
__all__ = [
    "LIVE_EXTRA",
    "Check",
    "MissingAccess",
    "Need",
    "PreflightReport",
    "Probe",
    "ProbeError",
    "ProbeFactory",
    "QuotaFacts",
    "QuotaKey",
    "ReservationFacts",
    "ScaleSetApi",
    "Verdict",
    "check_network",
    "check_stack",
    "needs_from",
    "run_preflight",
    "stack_needs",
]


class ScaleSetApi(Protocol):
    """A cloud's API for the instances of a scale set (Azure's is in its live module)."""

    kind: str  # what the cloud calls a scale set ("Azure scale set"), for the messages

    def inspect_hint(self, vmss_id: str) -> str:
        """How the user looks at the instances when a redeploy did not succeed."""
        ...

    def instances(self, vmss_id: str) -> list[dict[str, Any]]: ...

    def redeploy(self, vmss_id: str, instance_ids: Sequence[str]) -> str:
        """Move the instances to new hosts; the operation's final status."""
        ...


class Probe(Protocol):
    """Reads one cloud. Raise MissingAccess when it cannot be asked at all."""

    backend: str

    def offered(self, need: Need) -> bool:
        """The instance type is offered where the fleet is planned (its zone, else region)."""
        ...

    def reservation(self, need: Need) -> ReservationFacts | None:
        """The reservation ``need.reservation``; None when the cloud does not know it."""
        ...

    def quota_keys(self, need: Need) -> Sequence[QuotaKey]:
        """The quotas a node of ``need`` counts against (an empty list: none applies)."""
        ...

    def quota(self, need: Need, key: QuotaKey) -> QuotaFacts | None:
        """The quota's limit and usage now; None when the cloud does not list it."""
        ...

    def network_quota(self, scope: str | None, region: str, quota: NetworkQuota
                      ) -> QuotaFacts | None:
        """A network quota's limit and use now (``region`` "global": project- or
        account-wide); None when the cloud does not list it."""
        ...


@dataclass
class PreflightReport:
    stack: str
    checks: list[Check] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return all(c.verdict != "fail" for c in self.checks)

    @property
    def exit_code(self) -> int:
        return 0 if self.ok else 1

    def lines(self) -> list[str]:
        marks = {"ok": "ok  ", "fail": "FAIL", "skip": "skip"}
        out = [f"preflight of stack {self.stack}:"]
        out += [f"  {marks[c.verdict]} {c.what:<11} {c.fleet}: {c.detail}" for c in self.checks]
        out += [f"  note: {n}" for n in self.notes]
        failed = sum(c.verdict == "fail" for c in self.checks)
        out.append(f"preflight: {'passed' if self.ok else f'{failed} check(s) failed'} "
                   f"({len(self.checks)} checks)")
        return out

    def to_json(self) -> dict[str, object]:
        return {"stack": self.stack, "ok": self.ok, "checks": [asdict(c) for c in self.checks],
                "notes": list(self.notes)}


def needs_from(plans: Iterable[FleetDesign], lock: Lock, declared: Sequence[ReservationSpec],
               running: Mapping[str, int], resource_groups: Mapping[str, str | None]
               ) -> list[Need]:
    """One Need per planned fleet with nodes, sized from its lock entry; ``resource_groups``:
    backend -> the resource group its backends file names (Azure)."""
    out: list[Need] = []
    for p in plans:
        entry = lock.fleets.get(p.name)
        if p.nodes <= 0 or entry is None:
            continue
        spec = next((r for r in declared if p.reservation in (r.name, r.id)), None) \
            if p.reservation else None
        out.append(Need(
            fleet=p.name, backend=p.backend, scope=p.provider.scope, region=p.region,
            zone=p.zone, instance_type=p.instance_type, gpu=entry.gpu_name,
            gpu_memory_gib=entry.gpu_memory_gib, gpus_per_node=entry.gpu_count,
            cpus_per_node=entry.cpus, spot=p.spot, nodes=p.nodes,
            running=running.get(p.name, 0), reservation=p.reservation,
            reservation_kind=spec.kind if spec is not None else None,
            resource_group=resource_groups.get(p.backend),
            ssh_sources=tuple(sorted({src for r in getattr(p.options, "firewall_rules", ())
                                      if "22" in r.ports for src in r.sources}))))
    return out


def run_preflight(stack: str, needs: Sequence[Need], probes: Mapping[str, Probe]
                  ) -> PreflightReport:
    """Every check for ``needs``, through the probe of each fleet's backend."""
    report = PreflightReport(stack)
    if not needs:
        report.notes.append("no fleet plans any node: nothing to check")
        return report
    for need in needs:
        probe = probes[need.backend]
        where = need.zone or need.region
        if probe.offered(need):
            report.checks.append(Check(need.fleet, "offered", "ok",
                                       f"{need.instance_type} is offered in {where}"))
        else:
            # a cloud that says where else the type is (Lambda's capacity by region)
            elsewhere = getattr(probe, "offered_elsewhere", None)
            hint = (f"{elsewhere(need)}: narrow `regions` and run `gpufleet lock --upgrade`"
                    if elsewhere is not None else "pick another zone (`gpufleet lock "
                    "--upgrade` after narrowing availability_zones)")
            report.checks.append(Check(need.fleet, "offered", "fail",
                                       f"{need.instance_type} is not offered in {where} for "
                                       f"this account; {hint}"))
        # a cloud's own checks (Lambda: its account-wide firewall rules)
        more = getattr(probe, "extra_checks", None)
        for what, verdict, detail in (more(need) if more is not None else ()):
            report.checks.append(Check(need.fleet, what, verdict, detail))
    _reservations(report, needs, probes)
    _quotas(report, needs, probes)
    return report


def _group(needs: Iterable[Need]) -> str:
    return ", ".join(sorted({n.fleet for n in needs}))


def _reservations(report: PreflightReport, needs: Sequence[Need],
                  probes: Mapping[str, Probe]) -> None:
    shared: dict[tuple[str, str], list[Need]] = {}
    for n in needs:
        if n.reservation:
            shared.setdefault((n.backend, n.reservation), []).append(n)
    for (backend, name), group in shared.items():
        first = group[0]
        who, new = _group(group), sum(n.new for n in group)
        facts = probes[backend].reservation(first)
        if facts is None:
            report.checks.append(Check(who, "reservation", "fail",
                                       f"{backend} has no reservation '{name}' visible to "
                                       "these credentials (in the planned zone and project/"
                                       "account); check the name and the account"))
            continue
        problems: list[str] = []
        if not facts.active:
            problems.append(f"it is {facts.state}, not active")
        types = {n.instance_type for n in group}
        if facts.instance_type and facts.instance_type not in types:
            problems.append(f"it holds {facts.instance_type}, the plan wants "
                            f"{', '.join(sorted(types))}")
        zones = {(n.zone or "").lower() for n in group if n.zone}
        if facts.zone and zones and facts.zone.lower() not in zones:
            problems.append(f"it is in {facts.zone}, the plan is in {', '.join(sorted(zones))}")
        elif facts.zone and len(zones) < len(group):
            # the nodes land in whatever zone their subnet (AWS) or scale set (Azure) gets
            hint = traits_of(backend).reservation_zone_hint.format(zone=facts.zone)
            problems.append(f"it is in zone {facts.zone}, and the plan does not pin the nodes "
                            f"to it: {hint}")
        if facts.free < new:
            problems.append(f"{facts.free} of its {facts.total} instances are free, "
                            f"{new} more are needed")
        ends = f", ends {facts.ends}" if facts.ends else ""
        head = (f"{facts.id}: {facts.free}/{facts.total} free, {new} to start "
                f"({sum(n.running for n in group)} running already){ends}")
        if problems:
            report.checks.append(Check(who, "reservation", "fail",
                                       head + "; " + "; ".join(problems)))
        else:
            report.checks.append(Check(who, "reservation", "ok", head))
        _reservation_topology(report, probes[backend], first, who)


def _reservation_topology(report: PreflightReport, probe: Probe, need: Need, who: str
                          ) -> None:
    """Where a reservation's capacity sits in the network, where the cloud says before
    launch (AWS DescribeCapacityReservationTopology): a note, never a verdict."""
    read = getattr(probe, "reservation_topology", None)
    if read is None:
        return
    try:
        chains = read(need)
    except ProbeError as e:
        report.checks.append(Check(who, "topology", "skip", f"the reservation's topology "
                                   f"cannot be read: {e}"))
        return
    if not chains:
        report.checks.append(Check(who, "topology", "skip", f"{need.backend} gives no "
                                   f"topology for {need.reservation}"))
        return
    spread = []
    for i, layer in enumerate(TOPOLOGY_LAYERS[:min(len(c) for c in chains)]):
        spread.append(f"{len({c[:i + 1] for c in chains})} {layer}(s)")
    where = "; ".join(sorted({"/".join(c) for c in chains}))
    report.checks.append(Check(who, "topology", "ok", f"{need.reservation} sits under "
                               f"{where}: spread {', '.join(spread)}"))


def _quotas(report: PreflightReport, needs: Sequence[Need],
            probes: Mapping[str, Probe]) -> None:
    shared: dict[tuple[str, str | None, QuotaKey], list[tuple[Need, int]]] = {}
    for n in needs:
        if n.reservation:
            report.checks.append(Check(n.fleet, "quota", "skip",
                                       f"the nodes run in reservation {n.reservation}, whose "
                                       "capacity was counted when it was made"))
            continue
        keys = probes[n.backend].quota_keys(n)
        for key in keys:
            # fleets share the quota itself, each counting its own units per node
            shared.setdefault((n.backend, n.scope, _unit_key(key)), []).append(
                (n, key.per_node))
        if not keys:
            report.checks.append(Check(n.fleet, "quota", "skip", "no quota applies"))
    for (backend, _scope, key), group in shared.items():
        who = _group(n for n, _ in group)
        wanted = sum(n.new * per_node for n, per_node in group)
        facts = probes[backend].quota(group[0][0], key)
        where = "" if key.region == "global" else f" in {key.region}"
        if facts is None:
            report.checks.append(Check(who, "quota", "fail",
                                       f"{key.name}{where} is not listed for this account; "
                                       "the quota cannot be read, so it is not assumed"))
            continue
        if math.isnan(facts.limit) or math.isnan(facts.used):
            report.checks.append(_partial(who, key, where, wanted, facts))
            continue
        free = facts.limit - facts.used
        head = (f"{key.name}{where}: limit {facts.limit:g}, used {facts.used:g}, "
                f"{wanted} {key.unit} more")
        if wanted > free:
            report.checks.append(Check(who, "quota", "fail",
                                       f"{head}; {wanted - free:g} {key.unit} short: ask "
                                       "the cloud for a quota increase"))
        else:
            report.checks.append(Check(who, "quota", "ok", head))


def _partial(who: str, key: QuotaKey, where: str, wanted: int, facts: QuotaFacts) -> Check:
    """A quota the cloud gives only in part: a limit under what is asked fails; anything
    else is no verdict (skip), with where to look."""
    if math.isnan(facts.limit):
        return Check(who, "quota", "skip", f"{key.name}{where}: {facts.note}")
    if wanted > facts.limit:
        return Check(who, "quota", "fail", f"{key.name}{where}: limit {facts.limit:g}, "
                     f"{wanted} {key.unit} more: {wanted - facts.limit:g} {key.unit} short "
                     "even with none in use: ask the cloud for a quota increase")
    return Check(who, "quota", "skip", f"{key.name}{where}: limit {facts.limit:g} covers "
                 f"the {wanted} {key.unit} asked; {facts.note}")


def check_network(report: PreflightReport, needs: Sequence[Any],
                  probes: Mapping[str, Probe]) -> None:
    """A check per quota that gets new resources: the live limit less the use covers them.
    A quota the cloud does not list fails: it is never assumed."""
    for need in needs:
        c = need.planned
        if need.new == 0:
            continue
        probe = probes.get(c.backend)
        if probe is None:
            continue
        who = ", ".join(o for o in c.owners if o) or c.backend
        where = (f"of {c.scope} " if c.scope else "") + (
            "across the project" if c.region == "global" else f"in {c.region}")
        facts = probe.network_quota(c.scope, c.region, c.quota)
        if facts is None:
            report.checks.append(Check(who, "network", "fail", (
                f"'{c.quota.name}' {where} is not listed for these credentials; the quota "
                "cannot be read, so it is not assumed")))
            continue
        head = (f"'{c.quota.name}' {where}: limit {facts.limit:g}, used {facts.used:g}, "
                f"{need.new} more ({c.count} in the plan, {need.existing} held already)")
        short = need.new - (facts.limit - facts.used)
        if short > 0:
            report.checks.append(Check(who, "network", "fail", (
                f"{head}; {short:g} short: raise it ({c.quota.raise_how}), or share one "
                "network between fleets of the region (`fleets: {NAME: {network: FLEET}}` "
                "in the backends file)")))
        else:
            report.checks.append(Check(who, "network", "ok", head))


def _unit_key(key: QuotaKey) -> QuotaKey:
    """The quota itself, whatever a node of one fleet counts in it."""
    return QuotaKey(key.name, key.region, key.unit, 0)


ProbeFactory = Callable[[Iterable[str]], Mapping[str, Probe]]


def stack_needs(files: Sequence[str], profile: str | None, catalog_dir: str | None,
                lock_path: str, running: Mapping[str, int]) -> list[Need]:
    """The Needs of a stack's files, compiled from its lock as `pulumi up` compiles them."""
    validated, compiled, lock = compile_stack(files, profile, catalog_dir, lock_path)
    groups = {b.type: b.settings.get("resource_group") for b in validated.inputs.backends}
    return needs_from(compiled.plans, lock, validated.inputs.reservations, running, groups)


def check_stack(stack: str, needs: Sequence[Need], probes: ProbeFactory,
              running_known: bool = True, network: Sequence[Any] = ()) -> PreflightReport:
    """The checks of ``needs`` through the probes ``probes`` builds for their backends, and
    of the network quotas ``network`` (``gpufleet.live.netquota.NetworkNeed``s)."""
    built = probes({n.backend for n in needs} | {n.planned.backend for n in network})
    report = run_preflight(stack, needs, built)
    check_network(report, network, built)
    if not running_known:
        report.notes.append("the stack's state was not read (no Pulumi CLI, or --state not "
                            "given): every planned node was counted as one to start")
    return report
