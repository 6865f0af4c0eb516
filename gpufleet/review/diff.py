"""`gpufleet diff`: the YAML against a `pulumi stack export`, offline.

The stack program runs under mocks seeded from the export (real ids and outputs for the
resources that exist, preview semantics for new ones), then each registration is compared
with its state entry. This approximates `pulumi preview` without a refresh; what it cannot
know is listed in DIFF_NOTE.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from gpufleet.compile import Compiled, compile_inputs
from gpufleet.diagnostics import Diagnostic
from gpufleet.input import Validated
from gpufleet.offers import Catalog
from gpufleet.review.changes import Change, Report, advise, compare, guard, is_bookkeeping, yaml_key
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


def _owner_map(resources: Sequence[tuple[str, str, str]]) -> dict[str, str]:
    """URN -> name of the top-level gpufleet component above it (itself included)."""
    parent = {urn: p for urn, _, p in resources}
    types = {urn: t for urn, t, _ in resources}
    out: dict[str, str] = {}
    for urn in parent:
        cur, top = urn, None
        seen = set()
        while cur and cur not in seen:
            seen.add(cur)
            if types.get(cur, "").startswith("gpufleet:") and types[cur].endswith(
                    (":Fleet", ":Gateway")):
                top = cur.rsplit("::", 1)[1]
            cur = parent.get(cur, "")
        if top:
            out[urn] = top
    return out


def build_report(regs: Sequence[dict[str, Any]], state: State, compiled: Compiled,
                 stack: str, guards: GuardOptions) -> Report:
    files = {p.name: p.file for p in compiled.plans} | {g.name: g.file for g in compiled.gateways}
    by_urn = state.by_urn()
    owners = _owner_map([(r["urn"], r["type"], r["parent"]) for r in regs])
    old_owners = _owner_map([(r.urn, r.type, r.parent) for r in state.resources])
    changes: list[Change] = []
    matched: set[str] = set()
    same = 0
    notes: list[str] = []
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
    for old in state.resources:
        if old.urn in matched or old.urn in registered or is_bookkeeping(old):
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
    from gpufleet.components import harness, offline, program
    from gpufleet.review.plan import stack_config

    seed = {r.urn: (r.id, dict(r.outputs)) for r in state.resources if r.type != STACK_TYPE}
    mocks = harness.StrictMocks(offline.INVOKES, offline.outputs, seed=seed)
    run = harness.run_program(lambda: program.main(compiled=compiled),
                              stack_config(paths, profile, catalog_dir), mocks,
                              stack=state.stack or "dev", project=state.project or "gpufleet",
                              preview=True)
    return [r.to_json() for r in run.sorted()]


def offline_diff(validated: Validated, catalog: Catalog, paths: Sequence[str], state: State,
                 profile: str | None, catalog_dir: str | None, guards: GuardOptions
                 ) -> tuple[Report | None, list[Diagnostic]]:
    compiled = compile_inputs(validated.inputs, catalog, profile)
    if not compiled.ok:
        return None, list(compiled.diagnostics)
    regs = run_seeded([os.path.abspath(p) for p in paths], compiled, state, profile,
                      catalog_dir)
    return build_report(regs, state, compiled, state.stack, guards), []

