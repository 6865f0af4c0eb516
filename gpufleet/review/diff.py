"""`gpufleet diff`: the YAML against a `pulumi stack export`, offline.

The stack program runs under mocks seeded from the export (real ids and outputs for the
resources that exist, preview semantics for new ones), then each registration is compared
with its state entry. This approximates `pulumi preview` without a refresh; what it cannot
know is listed in DIFF_NOTE.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from gpufleet.compile import (
    DIGEST_OUTPUT,
    Compiled,
    FleetPlan,
    GatewayPlan,
    compile_inputs,
    input_digest,
)
from gpufleet.diagnostics import Diagnostic
from gpufleet.input import Lock, Validated
from gpufleet.offers import Catalog
from gpufleet.review.changes import Change, Report, advise, compare, guard, is_bookkeeping, yaml_key
from gpufleet.review.costs import cost_violations, fleet_costs
from gpufleet.review.state import STACK_TYPE, State

DIFF_NOTE = ("offline diff - an approximation of `pulumi preview` (no refresh) from the stack "
        "export and the YAML: providers make the final update-or-replace call, and edits made "
        "in the cloud after the export was taken are not visible (use `gpufleet drift`)")
PENDING = "pending program change"


@dataclass(frozen=True, slots=True)
class GuardOptions:
    forbid: tuple[str, ...] = ()
    allow: tuple[str, ...] = ()
    max_instances: int | None = None
    max_cost_per_hour: float | None = None
    max_cost_increase: float | None = None


def owner_map(resources: Sequence[tuple[str, str, str]]) -> dict[str, str]:
    """(urn, type, parent) -> name of the top-level gpufleet component above each URN
    (itself included)."""
    parent = {urn: p for urn, _, p in resources}
    types = {urn: t for urn, t, _ in resources}
    out: dict[str, str] = {}
    for urn in parent:
        cur, top = urn, None
        seen = set()
        while cur and cur not in seen:
            seen.add(cur)
            if _is_top(types.get(cur, "")):
                top = cur.rsplit("::", 1)[1]
            cur = parent.get(cur, "")
        if top:
            out[urn] = top
    return out


def _is_top(typ: str) -> bool:
    return typ.startswith("gpufleet:") and typ.endswith((":Fleet", ":Gateway"))


def state_digests(state: State) -> dict[str, str]:
    """Name -> input digest recorded by each fleet and gateway component in the export."""
    out: dict[str, str] = {}
    for r in state.resources:
        if not r.custom and _is_top(r.type):
            d = r.outputs.get(DIGEST_OUTPUT)
            if isinstance(d, str):
                out[r.name] = d
    return out


@dataclass(frozen=True, slots=True)
class Skips:
    """Fleets and gateways whose resources are taken as unchanged without running them."""

    names: frozenset[str] = frozenset()
    reasons: tuple[str, ...] = ()  # one line per fleet/gateway: skipped or re-run, and why


def choose_skips(compiled: Compiled, state: State, full: bool) -> Skips:
    recorded = state_digests(state)
    names: set[str] = set()
    reasons: list[str] = []
    items: list[FleetPlan | GatewayPlan] = [*compiled.plans, *compiled.gateways]
    for p in items:
        kind = "fleet" if isinstance(p, FleetPlan) else "gateway"
        old = recorded.get(p.name)
        if full:
            reasons.append(f"{kind} {p.name}: run (--full)")
        elif old is None:
            reasons.append(f"{kind} {p.name}: run (the export records no input digest for it)")
        elif old != input_digest(p):
            reasons.append(f"{kind} {p.name}: run (its inputs changed since the export)")
        else:
            names.add(p.name)
            reasons.append(f"{kind} {p.name}: skipped (inputs unchanged since the export)")
    return Skips(frozenset(names), tuple(reasons))


def _kept_by_skips(state: State, old_owners: Mapping[str, str], skips: Skips,
                   registered: set[str]) -> set[str]:
    """State URNs taken as unchanged: what skipped fleets own, and what those resources
    refer to (providers, dependencies, parents) that nothing registered this run."""
    kept = {urn for urn, owner in old_owners.items() if owner in skips.names}
    by_urn = state.by_urn()
    todo = list(kept)
    while todo:
        r = by_urn.get(todo.pop())
        if r is None:
            continue
        refs = [r.parent, r.provider.rsplit("::", 1)[0] if r.provider else "",
                *r.dependencies]
        for ref in refs:
            if ref and ref not in kept and ref not in registered and ref in by_urn \
                    and old_owners.get(ref) is None:
                kept.add(ref)
                todo.append(ref)
    return kept


def build_report(regs: Sequence[dict[str, Any]], state: State, compiled: Compiled,
                 stack: str, guards: GuardOptions, skips: Skips | None = None) -> Report:
    skips = skips or Skips()
    files = {p.name: p.file for p in compiled.plans} | {g.name: g.file for g in compiled.gateways}
    by_urn = state.by_urn()
    owners = owner_map([(r["urn"], r["type"], r["parent"]) for r in regs])
    old_owners = owner_map([(r.urn, r.type, r.parent) for r in state.resources])
    changes: list[Change] = []
    matched: set[str] = set()
    same = 0
    notes: list[str] = list(skips.reasons) if skips.names else []
    skipped: list[str] = []
    for reg in regs:
        if reg["type"] == STACK_TYPE:
            continue
        state_urn = reg.get("state_urn") or reg["urn"]
        owner = owners.get(reg["urn"])
        old = by_urn.get(state_urn)
        if old is None:
            changes.append(_change(reg["urn"], reg["type"], "create", [], [], owner,
                                   files.get(owner or ""), False))
            continue
        matched.add(old.urn)
        op, props, reasons, lookups = compare(reg, old)
        skipped += [f"{reg['urn'].rsplit('::', 1)[1]}: {p}" for p in lookups]
        if state_urn != reg["urn"] and not reg["type"].startswith("pulumi:"):
            notes.append(f"renamed through an alias: {old.name} -> {reg['name']} "
                         f"({reg['type']}), kept without replacement")
        if op == "same":
            same += 1
            continue
        changes.append(_change(reg["urn"], reg["type"], op, props, reasons, owner,
                               files.get(owner or ""), old.protect))
    registered = {r["urn"] for r in regs}
    kept = _kept_by_skips(state, old_owners, skips, registered) if skips.names else set()
    for old in state.resources:
        if old.urn in matched or old.urn in registered or is_bookkeeping(old):
            continue
        if old.urn in kept:
            same += 1
            continue
        owner = old_owners.get(old.urn)
        changes.append(_change(old.urn, old.type, "delete", [], [], owner,
                               files.get(owner or ""), old.protect or old.retain_on_delete))
        if owner and owner not in files:
            note = (f"'{owner}' is not in the input files: its resources are deleted (a "
                    "renamed fleet needs `previous_names`)")
            if note not in notes:
                notes.append(note)
    if state.pending_operations:
        notes.append(f"the export lists {state.pending_operations} pending operation(s) from "
                     "an interrupted update: run `pulumi refresh` first")
    violations = guard(changes, guards.forbid, guards.allow, guards.max_instances)
    return Report("offline-diff", stack, tuple(changes), same, tuple(notes),
                  tuple(sorted(set(skipped))), tuple(violations))


def _change(urn: str, typ: str, op: str, props: Sequence[Any], reasons: Sequence[str],
            owner: str | None, file: str | None, protect: bool) -> Change:
    name = urn.rsplit("::", 1)[1]
    return Change(urn, typ, op, PENDING, owner, file, yaml_key(typ, name, op, props),
                  tuple(props), advise(op, PENDING, protect), protect, tuple(reasons))


def run_seeded(paths: Sequence[str], compiled: Compiled, state: State, profile: str | None,
               catalog_dir: str | None) -> list[dict[str, Any]]:
    if not compiled.plans and not compiled.gateways:
        return []  # nothing to run: every fleet was skipped
    from gpufleet.components import harness, offline, program
    from gpufleet.review.plan import dns_zones, offline_config

    seed = {r.urn: (r.id, dict(r.outputs)) for r in state.resources if r.type != STACK_TYPE}
    mocks = harness.StrictMocks(offline.invokes_for(dns_zones(compiled)), offline.outputs,
                                seed=seed)
    run = harness.run_program(lambda: program.main(compiled=compiled),
                              offline_config(paths, profile, catalog_dir, compiled), mocks,
                              stack=state.stack or "dev", project=state.project or "gpufleet",
                              preview=True)
    return [r.to_json() for r in run.sorted()]


def offline_diff(validated: Validated, catalog: Catalog, paths: Sequence[str], state: State,
                 profile: str | None, catalog_dir: str | None, guards: GuardOptions,
                 lock: Lock | None = None, locked: bool = False, full: bool = False
                 ) -> tuple[Report | None, list[Diagnostic]]:
    """The diff; fleets and gateways whose input digest equals the one the export recorded
    are not run again (``full`` runs everything) and their resources count as unchanged."""
    compiled = compile_inputs(validated.inputs, catalog, profile, lock, locked=locked)
    if not compiled.ok:
        return None, list(compiled.diagnostics)
    skips = choose_skips(compiled, state, full)
    run = dataclasses.replace(
        compiled, plans=tuple(p for p in compiled.plans if p.name not in skips.names),
        gateways=tuple(g for g in compiled.gateways if g.name not in skips.names))
    regs = run_seeded([os.path.abspath(p) for p in paths], run, state, profile, catalog_dir)
    warnings = [d for d in compiled.diagnostics if not d.is_error]
    report = build_report(regs, state, compiled, state.stack, guards, skips)
    costs = fleet_costs(compiled.plans, lock, running_nodes(state))
    extra = tuple(cost_violations(costs, guards.max_cost_per_hour, guards.max_cost_increase))
    return dataclasses.replace(report, cost_lines=tuple(costs.lines()),
                               violations=report.violations + extra), warnings


NODE_TYPES = ("aws:ec2/instance:Instance", "gcp:compute/instance:Instance",
              "azure-native:compute:VirtualMachine")


def running_nodes(state: State) -> dict[str, int]:
    """Nodes per fleet in the export: its instances (bastions aside), or a scale set's
    capacity."""
    owners = owner_map([(r.urn, r.type, r.parent) for r in state.resources])
    out: dict[str, int] = {}
    for r in state.resources:
        owner = owners.get(r.urn)
        if owner is None or r.name.endswith("-bastion"):
            continue
        if r.type in NODE_TYPES:
            out[owner] = out.get(owner, 0) + 1
        elif r.type == "azure-native:compute:VirtualMachineScaleSet":
            sku = r.inputs.get("sku")
            capacity = sku.get("capacity") if isinstance(sku, dict) else None
            if isinstance(capacity, int | float) and not isinstance(capacity, bool):
                out[owner] = out.get(owner, 0) + int(capacity)
    return out

