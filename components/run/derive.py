"""The nodes an offline run did not register, derived from the ones it did.

While sampling (``gpufleet.components.sampling``) the stack program registers the first two
nodes of each fleet (of each class in a diff: nodes the state holds, nodes it does not). The
other nodes' registrations are the second sampled node's, with the node's name put in (its
resources are named after it: `a4-node-7`, `a4-node-7-eip`, ...), and, in a diff, the values
the state holds for the sampled node's resources swapped for the ones it holds for this
node's. Their ids and outputs come from the same mocks the run used. Before anything is
derived, the first sampled node, derived the same way, must equal the second byte for byte:
if a fleet's nodes differed in anything but their names, ``NotDerivable`` is raised and the
caller runs the program again registering every node.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable, Sequence
from typing import Any

from gpufleet.compile import FleetPlan

from ..sampling import existing, registered_nodes
from .harness import Registration, RunResult, StrictMocks, plain


class NotDerivable(Exception):
    """A fleet's sampled nodes differ in more than their names."""


Swap = Callable[[Any], Any]


def _renamer(plan: FleetPlan, old: str, new: str) -> Swap:
    """Every mention of node ``old`` (under the fleet's name or one it had) -> ``new``."""
    suffix_old, suffix_new = old[len(plan.name):], new[len(plan.name):]
    pattern = re.compile("|".join(re.escape(p + suffix_old) for p in
                                  (plan.name, *plan.previous_names)) + r"(?![0-9])")
    prefixes = (plan.name, *plan.previous_names)

    def one(text: str) -> str:
        if suffix_old not in text:
            return text
        return pattern.sub(lambda m: next(p for p in prefixes if m.group(0).startswith(p))
                           + suffix_new, text)
    return lambda value: _walk(value, one)


def _walk(value: Any, fn: Callable[[str], str]) -> Any:
    if isinstance(value, str):
        return fn(value)
    if isinstance(value, dict):
        return {k: _walk(v, fn) for k, v in value.items()}
    if isinstance(value, list):
        return [_walk(v, fn) for v in value]
    return value


def _swap(value: Any, values: dict[str, str]) -> Any:
    """``value`` with every string ``values`` maps replaced."""
    if not values:
        return value
    return _walk(value, lambda s: values.get(s, s))


def _leaves(a: Any, b: Any, out: dict[str, str]) -> None:
    """Pairs of string leaves at the same place in two outcomes."""
    if isinstance(a, str) and isinstance(b, str):
        if a != b:
            out[a] = b
    elif isinstance(a, dict) and isinstance(b, dict):
        for k in a.keys() & b.keys():
            _leaves(a[k], b[k], out)
    elif isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        for x, y in zip(a, b, strict=True):
            _leaves(x, y, out)


class _Deriver:
    def __init__(self, mocks: StrictMocks, record_outputs: bool) -> None:
        self.mocks = mocks
        self.record_outputs = record_outputs

    def outcome(self, r: Registration) -> tuple[str, Any]:
        """What the run's mocks answer for this registration (the id and the state)."""
        if not r.custom:
            return r.id, {}
        got_id, state = self.mocks.outcome(r.state_urn or r.urn, r.type, r.name, r.inputs)
        return got_id or "", plain(state)

    def node(self, plan: FleetPlan, template: Sequence[Registration], old: str, new: str
             ) -> tuple[list[Registration], dict[str, str]]:
        """Node ``new``'s registrations from node ``old``'s, with the map of values that
        stand for old's resources in other inputs (ids and outputs from the mocks)."""
        rename = _renamer(plan, old, new)
        values: dict[str, str] = {}
        out: list[Registration] = []
        for r in template:
            # ids and outputs of this node's resources registered before
            inputs = _swap(rename(r.inputs), values)
            d = dataclasses.replace(
                r, urn=rename(r.urn), name=rename(r.name),
                inputs=inputs, dependencies=rename(r.dependencies),
                property_dependencies=rename(r.property_dependencies),
                deleted_with=rename(r.deleted_with), aliases=rename(r.aliases),
                state_urn=rename(r.state_urn))
            old_id, old_state = self.outcome(r)
            new_id, new_state = self.outcome(d)
            renamed_id, renamed_state = rename(old_id), rename(old_state)
            if new_id != renamed_id:
                values[renamed_id] = new_id
            _leaves(renamed_state, new_state, values)
            d = dataclasses.replace(d, id=new_id if r.custom else d.id,
                                    outputs=new_state if self.record_outputs and r.custom
                                    else rename(r.outputs))
            out.append(d)
        return out, values


def _is_node_of(name: str, node: str) -> bool:
    return name == node or name.startswith(node + "-")


def derive(run: RunResult, plans: Sequence[FleetPlan], mocks: StrictMocks,
           record_outputs: bool = False) -> RunResult:
    """The run with every fleet's unregistered nodes derived (call while sampling, with the
    sampling state the run had). NotDerivable when the sample shows they cannot be."""
    regs = list(run.registrations)
    exports = dict(run.exports)
    deriver = _Deriver(mocks, record_outputs)
    for plan in plans:
        sampled = registered_nodes(plan)
        if len(sampled) == len(plan.node_names):
            continue
        fleet = next((r.urn for r in regs if not r.custom and r.name == plan.name
                      and r.type.endswith(":Fleet")), None)
        owned = [r for r in regs if fleet is not None and r.parent == fleet]
        by_node = {n: [r for r in owned if _is_node_of(r.name, n)] for n in sampled}
        templates: dict[bool, str] = {}
        for cls in (True, False):
            same = [n for n in sampled if existing(plan, n) == cls]
            if len(same) >= 2:
                _check(plan, deriver, by_node, same[0], same[1])
                templates[cls] = same[1]
        entries: dict[str, Any] = {}
        for n in plan.node_names:
            if n in sampled:
                continue
            t = templates[existing(plan, n)]
            more, values = deriver.node(plan, by_node[t], t, n)
            regs += more
            entries[n] = (t, values)
        _extend_export(exports, plan, entries)
        regs = [_with_node_lists(r, plan, sampled, entries) if r.urn == fleet else r
                for r in regs]
    if mocks.progress is not None and len(regs) != len(run.registrations):
        mocks.progress(f"running the stack program: {len(regs)} resources")
    return RunResult(regs, exports, run.invokes)


def _node_list(items: list[Any], plan: FleetPlan, sampled: Sequence[str],
               derived: dict[str, tuple[str, dict[str, str]]]) -> list[Any]:
    """A list with an entry per sampled node -> an entry per node, each derived node's from
    its template's."""
    given = dict(zip(sampled, items, strict=True))
    return [given[n] if n in given else
            _swap(_renamer(plan, derived[n][0], n)(given[derived[n][0]]), derived[n][1])
            for n in plan.node_names]


def _with_node_lists(r: Registration, plan: FleetPlan, sampled: Sequence[str],
                     derived: dict[str, tuple[str, dict[str, str]]]) -> Registration:
    """The fleet component's outputs (its nodes' ids and addresses) over every node."""
    outputs = {k: _node_list(v, plan, sampled, derived)
               if isinstance(v, list) and len(v) == len(sampled) else v
               for k, v in r.outputs.items()}
    return dataclasses.replace(r, outputs=outputs)


def _check(plan: FleetPlan, deriver: _Deriver, by_node: dict[str, list[Registration]],
           first: str, second: str) -> None:
    """The first sampled node, derived as the others will be, must be the second."""
    derived, _ = deriver.node(plan, by_node[first], first, second)
    if [r.to_json() for r in derived] != [r.to_json() for r in by_node[second]]:
        raise NotDerivable(f"fleet {plan.name}: node {second} is not node {first} renamed")


def _extend_export(exports: dict[str, Any], plan: FleetPlan,
                   derived: dict[str, tuple[str, dict[str, str]]]) -> None:
    """The fleet's stack output lists every node: each derived node's entry from its
    template's (``derived``: node -> its template and the values standing for it)."""
    out = exports.get(plan.name)
    if not isinstance(out, dict) or not isinstance(out.get("nodes"), list):
        return
    given = {e.get("name"): e for e in out["nodes"] if isinstance(e, dict)}
    nodes = []
    for n in plan.node_names:
        if n in given:
            nodes.append(given[n])
        elif n in derived and derived[n][0] in given:
            template, values = derived[n]
            entry = _renamer(plan, template, n)(given[template])
            nodes.append(_swap(entry, values))
    exports[plan.name] = {**out, "nodes": nodes}
