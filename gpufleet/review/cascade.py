"""Replacement cascades: what else a replaced (or re-versioned) resource takes with it. Pure.

A provider replaces a resource when a replace-on-change input changes; when that input's
value comes from another resource that is replaced, the value changes too (a new id), so the
dependent is replaced as well - a subnet's instances, a VPC's subnets and security groups, a
placement group's instances. An EC2 launch template's update gives it a new version, which
replaces the instances launched from it. Each cascaded change carries the chain of causes
down to the YAML key.
"""

from __future__ import annotations

import dataclasses
import re
from collections import deque
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from gpufleet.backends import resource_kinds
from gpufleet.review.changes import Change, advise, root_of
from gpufleet.traits import ResourceKind

# Launch template inputs that do not make a new version.
UNVERSIONED = frozenset({"tags", "tagsAll", "description", "updateDefaultVersion"})


@dataclass(frozen=True, slots=True)
class Node:
    """One resource the run knows: its type, owner, and where each input comes from."""

    urn: str
    type: str
    owner: str | None
    file: str | None
    property_dependencies: Mapping[str, Sequence[str]]
    replace_on_changes: frozenset[str] = frozenset()
    protect: bool = False

    @property
    def name(self) -> str:
        return self.urn.rsplit("::", 1)[-1]


def noun(typ: str) -> str:
    """``aws:ec2/launchTemplate:LaunchTemplate`` -> ``launch template``."""
    last = typ.rsplit(":", 1)[-1]
    return re.sub(r"(?<=[a-z0-9])(?=[A-Z])", " ", last).lower()


def _moves(ch: Change, kind: ResourceKind | None) -> str | None:
    """What a change does to the values its dependents read: "replaced", "re-versioned" or
    None (ids and versions stay)."""
    if ch.op == "replace":
        return "replaced"
    if ch.op == "update" and kind is not None and kind.versioned and (
            ch.cause is not None  # an input took another resource's new value
            or any(root_of(p.path) not in UNVERSIONED for p in ch.properties)):
        return "updated (a new version)"
    return None


def cascade(changes: Sequence[Change], nodes: Sequence[Node]) -> list[Change]:
    """``changes`` plus every change a replaced or re-versioned resource forces on the
    resources whose inputs come from it, repeated until nothing more moves."""
    kinds = resource_kinds()
    order = {c.urn: i for i, c in enumerate(changes)}
    by_urn = {c.urn: c for c in changes}
    if all(_moves(c, kinds.get(c.type)) is None for c in by_urn.values()):
        return sorted(by_urn.values(), key=lambda c: (order[c.urn], c.urn))  # nothing moves
    pending = deque(c.urn for c in changes)  # breadth first: the shortest chain of causes
    dependents: dict[str, list[tuple[Node, str]]] = {}
    for n in nodes:
        for prop, urns in n.property_dependencies.items():
            for u in urns:
                dependents.setdefault(u, []).append((n, prop))
    while pending:
        source = by_urn[pending.popleft()]
        how = _moves(source, kinds.get(source.type))
        if how is None:
            continue
        for node, prop in dependents.get(source.urn, []):
            current = by_urn.get(node.urn)
            if current is not None and current.op in ("create", "delete", "replace"):
                continue
            kind = kinds.get(node.type, ResourceKind())
            forced = kind.replaces | kind.replaced_with | node.replace_on_changes
            op = "replace" if prop in forced else "update"
            if current is not None and current.op == op:
                continue
            why = source.cause or source.yaml_key or f"the change of {source.name}"
            cause = f"its {noun(source.type)} {source.name} is {how} <- {why}"
            by_urn[node.urn] = _cascaded(node, current, op, prop, cause)
            pending.append(node.urn)
    return sorted(by_urn.values(), key=lambda c: (order.get(c.urn, len(order)), c.urn))


def _cascaded(node: Node, current: Change | None, op: str, prop: str, cause: str) -> Change:
    if current is not None:
        reasons = tuple(sorted({*current.reasons, prop})) if op == "replace" else \
            current.reasons
        return dataclasses.replace(current, op=op, reasons=reasons, cause=cause,
                                   action=advise(op, current.klass, current.protect))
    return Change(node.urn, node.type, op, "pending program change", node.owner, node.file,
                  None, (), advise(op, "pending program change", node.protect), node.protect,
                  (prop,) if op == "replace" else (), cause)
