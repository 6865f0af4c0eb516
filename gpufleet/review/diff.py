"""`gpufleet diff`, the pure half: registrations of a seeded offline run against a `pulumi
stack export` -> the change report. What cannot be known offline is listed in DIFF_NOTE.

The run itself (the stack program under mocks seeded from the export) is
``gpufleet.components.run.diff``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from gpufleet.backends import all_backends, node_types
from gpufleet.compile import DIGEST_OUTPUT, Compiled, input_digest
from gpufleet.review.bill import billed_as
from gpufleet.review.cascade import Node, cascade
from gpufleet.review.changes import Change, Report, advise, compare, guard, is_bookkeeping, yaml_key
from gpufleet.review.owners import BUCKET_OWNER, is_top, owner_map, top_name
from gpufleet.review.state import STACK_TYPE, State

DIFF_NOTE = ("offline diff - an approximation of `pulumi preview` (no refresh) from the stack "
        "export and the YAML: providers make the final update-or-replace call, and edits made "
        "in the cloud after the export was taken are not visible (use `gpufleet drift`)")
PENDING = "pending program change"
# why a gateway's instance, address or firewall goes (a stack deployed before dstack's own
# gateways): the README's migration
OLD_GATEWAY = ("gpufleet no longer builds gateway instances: dstack creates its own at "
               "`dstack apply` (README: Gateways, moving an existing stack)")
KEEP_HINT = ("; to keep the address through the move, set `old_address: keep` for the "
             "gateway in the backends file, else release it first: `pulumi state unprotect "
             "'{urn}'`")


@dataclass(frozen=True, slots=True)
class GuardOptions:
    forbid: tuple[str, ...] = ()
    allow: tuple[str, ...] = ()
    max_instances: int | None = None
    max_cost_per_hour: float | None = None
    max_cost_increase: float | None = None


def state_digests(state: State) -> dict[str, str]:
    """Owner name -> input digest recorded by each fleet, gateway and bucket component in
    the export (a bucket's as `bucket:NAME`)."""
    out: dict[str, str] = {}
    for r in state.resources:
        if not r.custom and is_top(r.type):
            d = r.outputs.get(DIGEST_OUTPUT)
            if isinstance(d, str):
                out[top_name(r.type, r.name)] = d
    return out


@dataclass(frozen=True, slots=True)
class Skips:
    """Fleets and gateways whose resources are taken as unchanged without running them."""

    names: frozenset[str] = frozenset()
    reasons: tuple[str, ...] = ()  # one line per fleet/gateway: skipped or re-run, and why


def choose_skips(compiled: Compiled, state: State, full: bool) -> Skips:
    recorded = state_digests(state)
    names: set[str] = set()
    reasons: dict[str, str] = {}
    items: list[tuple[str, str, Any]] = [
        *(("fleet", p.name, p) for p in compiled.plans),
        *(("gateway", g.name, g) for g in compiled.gateways),
        *(("bucket", BUCKET_OWNER + b.name, b) for b in compiled.buckets)]
    for kind, key, p in items:
        old = recorded.get(key)
        if full:
            reasons[key] = f"{kind} {p.name}: run (--full)"
        elif old is None:
            reasons[key] = f"{kind} {p.name}: run (the export records no input digest for it)"
        elif old != input_digest(p):
            reasons[key] = f"{kind} {p.name}: run (its inputs changed since the export)"
        else:
            names.add(key)
            reasons[key] = f"{kind} {p.name}: skipped (inputs unchanged since the export)"
    for key, why in _run_together(compiled, names).items():
        names.discard(key)
        reasons[key] = why
    return Skips(frozenset(names), tuple(reasons[k] for _, k, _ in items))


def seed_for(state: State, skips: Skips) -> dict[str, tuple[str, dict[str, Any]]]:
    """The mocks' seed of the program that runs what ``skips`` leaves: each resource's id
    and outputs by URN, but for the stack and the resources under a skipped fleet's, gateway's
    or bucket's component, which that program never registers (their components are not
    built; a running item that shares with a skipped one makes it run, ``_run_together``)."""
    skipped = {r.urn for r in state.resources
               if not r.custom and is_top(r.type) and top_name(r.type, r.name) in skips.names}
    parent = {r.urn: r.parent for r in state.resources}
    under: dict[str, bool] = {}

    def is_under(urn: str) -> bool:
        chain = []
        while urn and urn not in under and urn not in skipped:
            chain.append(urn)
            urn = parent.get(urn, "")
            if len(chain) > len(parent):  # a parent loop in a hand-made export
                break
        found = urn in skipped or under.get(urn, False)
        for u in chain:
            under[u] = found
        return found
    return {r.urn: (r.id, dict(r.outputs)) for r in state.resources
            if r.type != STACK_TYPE and not is_under(r.urn)}


def _run_together(compiled: Compiled, skipped: set[str]) -> dict[str, str]:
    """A bucket and the fleets that mount it are built from each other (grants, the
    fleets' subnets on the bucket's account): when one runs, the others run too."""
    pairs = [(r.fleet, BUCKET_OWNER + b.name) for b in compiled.buckets for r in b.readers
             if r.mounted]
    still = set(skipped)
    out: dict[str, str] = {}
    changed = True
    while changed:
        changed = False
        for a, b in pairs:
            for runs, other in ((a, b), (b, a)):
                if runs not in still and other in still:
                    still.discard(other)
                    out[other] = (f"{_label(other)}: run (it and {_label(runs)} are built "
                                  "from each other)")
                    changed = True
    return out


def _label(owner: str) -> str:
    """ "fleet a4", "bucket acme-data"."""
    return (f"bucket {owner[len(BUCKET_OWNER):]}" if owner.startswith(BUCKET_OWNER)
            else f"fleet {owner}")


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


def diff_report(regs: Sequence[dict[str, Any]], state: State, compiled: Compiled,
                stack: str, guards: GuardOptions, skips: Skips | None = None) -> Report:
    skips = skips or Skips()
    files = {p.name: p.file for p in compiled.plans} | {
        g.name: g.file for g in compiled.gateways} | {
        BUCKET_OWNER + b.name: b.file for b in compiled.buckets}
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
    gone = [old for old in state.resources if old.urn not in matched
            and old.urn not in registered and not is_bookkeeping(old)]
    same += sum(1 for old in gone if old.urn in kept)
    changes += _deletions([old for old in gone if old.urn not in kept], old_owners, files,
                          notes, {g.name for g in compiled.gateways})
    if state.pending_operations:
        notes.append(f"the export lists {state.pending_operations} pending operation(s) from "
                     "an interrupted update: run `pulumi refresh` first")
    found = len(changes)
    changes = cascade(changes, _nodes(regs, owners, state, old_owners, kept, files))
    same -= len(changes) - found
    violations = guard(changes, guards.forbid, guards.allow, guards.max_instances)
    return Report("offline-diff", stack, tuple(changes), same, tuple(notes),
                  tuple(sorted(set(skipped))), tuple(violations))


def _deletions(gone: Sequence[Any], old_owners: Mapping[str, str | None],
               files: Mapping[str, str], notes: list[str],
               gateways: set[str]) -> list[Change]:
    """The resources of the state the program no longer makes; a note for each owner that
    left the input files; the reason an old gateway's instance or address goes."""
    out = []
    for old in gone:
        owner = old_owners.get(old.urn)
        change = _change(old.urn, old.type, "delete", [], [], owner, files.get(owner or ""),
                         old.protect or old.retain_on_delete)
        if owner in gateways and change.category not in ("network", "dns", "storage"):
            change = dataclasses.replace(change, cause=OLD_GATEWAY, action=change.action + (
                KEEP_HINT.format(urn=old.urn) if change.protect else ""))
        out.append(change)
        if owner and owner not in files:
            note = (f"'{owner}' is not in the input files: its resources are deleted (a "
                    "renamed fleet needs `previous_names`)")
            if note not in notes:
                notes.append(note)
    return out


def _nodes(regs: Sequence[dict[str, Any]], owners: Mapping[str, str | None], state: State,
           old_owners: Mapping[str, str | None], kept: set[str],
           files: Mapping[str, str]) -> list[Node]:
    """The resource graph the cascade walks: what the program makes, and what it keeps."""
    nodes = [Node(r["urn"], r["type"], owners.get(r["urn"]), files.get(owners.get(r["urn"]) or ""),
                  r.get("property_dependencies") or {}, frozenset(r.get("replace_on_changes")
                                                                  or ()), bool(r.get("protect")))
             for r in regs if r["type"] != STACK_TYPE]
    nodes += [Node(old.urn, old.type, old_owners.get(old.urn),
                   files.get(old_owners.get(old.urn) or ""), old.property_dependencies,
                   protect=old.protect) for old in state.resources if old.urn in kept]
    return nodes


def _change(urn: str, typ: str, op: str, props: Sequence[Any], reasons: Sequence[str],
            owner: str | None, file: str | None, protect: bool) -> Change:
    name = urn.rsplit("::", 1)[1]
    return Change(urn, typ, op, PENDING, owner, file, yaml_key(typ, name, op, props, owner),
                  tuple(props), advise(op, PENDING, protect), protect, tuple(reasons))


def running_nodes(state: State) -> dict[str, int]:
    """Nodes per fleet (and gateway) in the export: its instances (bastions aside), or a
    scale set's capacity; 0 for one the export holds without nodes; 1 per dstack volume
    (as `volume:NAME`) whose disk the export holds."""
    owners = owner_map([(r.urn, r.type, r.parent) for r in state.resources])
    nodes = frozenset(node_types())
    sizes = {t.scale_set_type: t.scale_set_size for t in all_backends()
             if t.scale_set_type and t.scale_set_size}
    out: dict[str, int] = {}
    for r in state.resources:
        owner = owners.get(r.urn)
        if owner is not None and owner.startswith(BUCKET_OWNER):
            continue  # a bucket runs no nodes
        if owner is None:
            if billed_as(r.type) == "volume":  # a dstack volume's disk: the stack holds it
                out[f"volume:{r.name}"] = 1
            continue
        out.setdefault(owner, 0)
        if r.name.endswith("-bastion"):
            continue
        if r.type in nodes:
            out[owner] = out.get(owner, 0) + 1
        elif (size := sizes.get(r.type)) is not None and (n := size(r.inputs)) is not None:
            out[owner] = out.get(owner, 0) + n
    return out

