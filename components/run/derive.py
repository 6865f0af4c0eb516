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
from collections.abc import Sequence
from typing import Any

from gpufleet.compile import FleetDesign

from ..sampling import existing, registered_nodes
from .harness import Registration, RunResult, StrictMocks
from .plainvalues import plain


class NotDerivable(Exception):
    """A fleet's sampled nodes differ in more than their names."""


UNSET = object()


@dataclasses.dataclass(frozen=True, slots=True)
class _Text:
    """A string built from the node's name: literal parts and, at each int, the name under
    that prefix (the fleet's name or one it had)."""

    parts: tuple[str | int, ...]


@dataclasses.dataclass(frozen=True, slots=True)
class _Value:
    """A value that stands for one of the node's own resources (an id, an output): node
    k's comes from the mocks' answer for its resource."""

    template: str


@dataclasses.dataclass(frozen=True, slots=True)
class _Dict:
    items: tuple[tuple[str, Any], ...]


@dataclasses.dataclass(frozen=True, slots=True)
class _List:
    items: tuple[Any, ...]


_Compiled = (_Text, _Value, _Dict, _List)


class _Names:
    """The node's name under each of the fleet's names, for one node."""

    def __init__(self, plan: FleetDesign, node: str) -> None:
        suffix = node[len(plan.name):]
        self.names = tuple(p + suffix for p in (plan.name, *plan.previous_names))


def _text(a: str, b: str, na: _Names, nb: _Names) -> _Text | None:
    """b as literal text and slots where a holds node A's name and b node B's at the same
    place (neither followed by a digit); None when a and b differ otherwise. A user's string
    that holds a node-name shape is the same in both and stays literal."""
    parts: list[str | int] = []
    lit: list[str] = []
    i = j = 0
    pairs = sorted(enumerate(zip(na.names, nb.names, strict=True)),
                   key=lambda x: -len(x[1][0]))
    while i < len(a) or j < len(b):
        for idx, (an, bn) in pairs:
            if a.startswith(an, i) and b.startswith(bn, j) \
                    and not a[i + len(an):i + len(an) + 1].isdigit() \
                    and not b[j + len(bn):j + len(bn) + 1].isdigit():
                if lit:
                    parts.append("".join(lit))
                    lit = []
                parts.append(idx)
                i, j = i + len(an), j + len(bn)
                break
        else:
            if i < len(a) and j < len(b) and a[i] == b[j]:
                lit.append(b[j])
                i, j = i + 1, j + 1
            else:
                return None
    if lit:
        parts.append("".join(lit))
    return _Text(tuple(parts))


class _Compiler:
    """Node B's records as a function of the node: what is the same in node A and node B
    stays as it is (user strings, the stack's and other fleets' names), what differs must be
    node A's name put in node B's place, or a value standing for one of its resources."""

    def __init__(self, na: _Names, nb: _Names, values: dict[str, str]) -> None:
        self.na, self.nb, self.values = na, nb, values

    def __call__(self, a: Any, b: Any) -> Any:
        if a == b and type(a) is type(b):
            return b
        if isinstance(a, str) and isinstance(b, str):
            if self.values.get(a) == b:
                return _Value(b)
            shaped = _text(a, b, self.na, self.nb)
            if shaped is None:
                raise NotDerivable(f"{a!r} and {b!r} differ in more than the node's name")
            return shaped
        if isinstance(a, dict) and isinstance(b, dict) and a.keys() == b.keys():
            return _Dict(tuple((k, self(a[k], b[k])) for k in b))
        if isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
            return _List(tuple(self(x, y) for x, y in zip(a, b, strict=True)))
        raise NotDerivable(f"{a!r} and {b!r} differ in more than the node's name")


def _build(compiled: Any, names: _Names, values: dict[str, str]) -> Any:
    """Node k's value from the compiled template (``values``: node B's values of its own
    resources -> node k's). NotDerivable when node k's state lacks one: never borrowed."""
    if not isinstance(compiled, _Compiled):
        return compiled
    if isinstance(compiled, _Text):
        return "".join(p if isinstance(p, str) else names.names[p] for p in compiled.parts)
    if isinstance(compiled, _Value):
        got = values.get(compiled.template, UNSET)
        if got is UNSET:
            raise NotDerivable(f"no value in the node's state for {compiled.template!r}")
        return got
    if isinstance(compiled, _Dict):
        return {k: _build(v, names, values) for k, v in compiled.items}
    return [_build(v, names, values) for v in compiled.items]


def _pairs(a: Any, b: Any, out: dict[str, str]) -> None:
    """Pairs of string leaves at the same place in two outcomes (equal ones too: a value
    node k shares with node B is known, not missing). A pair of exact strings is taken
    without a call, and a leaf that is neither a string nor a container is passed over
    (the seeded states of a 5,000-node diff: 0.17 s of its derivation, before)."""
    if isinstance(a, str):
        if isinstance(b, str):
            out.setdefault(a, b)
    elif isinstance(a, dict):
        if isinstance(b, dict):
            for k, x in a.items():  # a's order: a value's first pair, in every process
                if k in b:
                    y = b[k]
                    if type(x) is str and type(y) is str:
                        out.setdefault(x, y)
                    elif type(x) not in _LEAVES:
                        _pairs(x, y, out)
    elif isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        for x, y in zip(a, b, strict=True):
            if type(x) is str and type(y) is str:
                out.setdefault(x, y)
            elif type(x) not in _LEAVES:
                _pairs(x, y, out)


_LEAVES = frozenset({int, float, bool, type(None)})  # no string in them to pair


_FIELDS = ("urn", "name", "parent", "inputs", "dependencies", "property_dependencies",
           "deleted_with", "aliases", "state_urn")


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

    def compile(self, plan: FleetDesign, ref: Sequence[Registration],
                template: Sequence[Registration], a: str, b: str
                ) -> tuple[list[dict[str, Any]], list[tuple[str, Any]]]:
        """Node b's registrations as functions of the node, from node a's beside them, and
        the outcome of each of node b's (what every node derived from b is paired with)."""
        if len(ref) != len(template):
            raise NotDerivable(f"fleet {plan.name}: node {b} has {len(template)} resources, "
                               f"node {a} {len(ref)}")
        na, nb = _Names(plan, a), _Names(plan, b)
        values: dict[str, str] = {}
        compiler = _Compiler(na, nb, values)
        out, outcomes = [], []
        for ra, rb in zip(ref, template, strict=True):
            if (ra.type, ra.custom, ra.provider) != (rb.type, rb.custom, rb.provider):
                raise NotDerivable(f"fleet {plan.name}: node {b} is not node {a} renamed")
            fields = {f: compiler(getattr(ra, f), getattr(rb, f)) for f in _FIELDS}
            if not rb.custom or not self.record_outputs:
                fields["outputs"] = compiler(ra.outputs, rb.outputs)
            if not rb.custom:
                fields["id"] = compiler(ra.id, rb.id)
            a_id, a_state = self.outcome(ra)
            b_id, b_state = self.outcome(rb)
            if a_id != b_id:
                values[a_id] = b_id
            _pairs(a_state, b_state, values)
            out.append(fields)
            outcomes.append((b_id, b_state))
        return out, outcomes

    def node(self, plan: FleetDesign, template: Sequence[Registration],
             compiled: tuple[Sequence[dict[str, Any]], Sequence[tuple[str, Any]]], new: str
             ) -> tuple[list[Registration], dict[str, str]]:
        """Node ``new``'s registrations from the template's compiled ones (and outcomes),
        with the map of the template's values of its own resources to this node's."""
        names = _Names(plan, new)
        values: dict[str, str] = {}
        out: list[Registration] = []
        for r, fields, (old_id, old_state) in zip(template, *compiled, strict=True):
            built = {f: _build(c, names, values) for f, c in fields.items()}
            d = dataclasses.replace(r, **built)
            new_id, new_state = self.outcome(d)
            values.setdefault(old_id, new_id)
            _pairs(old_state, new_state, values)
            if r.custom:
                d = dataclasses.replace(d, id=new_id, outputs=new_state if self.record_outputs
                                        else d.outputs)
            out.append(d)
        return out, values


def _is_node_of(name: str, node: str) -> bool:
    return name == node or name.startswith(node + "-")


def derive(run: RunResult, plans: Sequence[FleetDesign], mocks: StrictMocks,
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
        templates: dict[bool, tuple[str, str, tuple[list[dict[str, Any]],
                                                    list[tuple[str, Any]]]]] = {}
        for cls in (True, False):
            same = [n for n in sampled if existing(plan, n) == cls]
            if len(same) >= 2:
                templates[cls] = (same[0], same[1], deriver.compile(
                    plan, by_node[same[0]], by_node[same[1]], same[0], same[1]))
        entries: dict[str, tuple[str, str, dict[str, str]]] = {}
        for n in plan.node_names:
            if n in sampled:
                continue
            ref, t, compiled = templates[existing(plan, n)]
            more, values = deriver.node(plan, by_node[t], compiled, n)
            regs += more
            entries[n] = (ref, t, values)
        _extend_export(exports, plan, entries)
        regs = [_with_node_lists(r, plan, sampled, entries) if r.urn == fleet else r
                for r in regs]
    if mocks.progress is not None and len(regs) != len(run.registrations):
        mocks.progress(f"running the stack program: {len(regs)} resources")
    return RunResult(regs, exports, run.invokes)


Derived = dict[str, tuple[str, str, dict[str, str]]]  # node -> (reference, template, values)


def _entry_for(plan: FleetDesign, given: dict[Any, Any], node: str, derived: Derived,
               compiled: dict[tuple[str, str], Any]) -> Any:
    """A per-node entry (of a stack output or the fleet's outputs) for a derived node, from
    its template's beside the reference node's (compiled once per pair, in ``compiled``)."""
    ref, t, values = derived[node]
    if (ref, t) not in compiled:
        compiled[ref, t] = _Compiler(_Names(plan, ref), _Names(plan, t), {})(given[ref],
                                                                              given[t])
    return _build(_swap_values(compiled[ref, t], values), _Names(plan, node), values)


def _swap_values(compiled: Any, values: dict[str, str]) -> Any:
    """Literal strings of an entry that stand for the template's resources (an id, an
    address in the stack outputs) as values node k's state answers."""
    if isinstance(compiled, str) and compiled in values:
        return _Value(compiled)
    if isinstance(compiled, _Dict):
        return _Dict(tuple((k, _swap_values(v, values)) for k, v in compiled.items))
    if isinstance(compiled, _List):
        return _List(tuple(_swap_values(v, values) for v in compiled.items))
    if isinstance(compiled, dict):
        return {k: _swap_values(v, values) for k, v in compiled.items()}
    if isinstance(compiled, list):
        return [_swap_values(v, values) for v in compiled]
    return compiled


def _node_list(items: list[Any], plan: FleetDesign, sampled: Sequence[str],
               derived: Derived) -> list[Any]:
    """A list with an entry per sampled node -> an entry per node, each derived node's from
    its template's."""
    given = dict(zip(sampled, items, strict=True))
    compiled: dict[tuple[str, str], Any] = {}
    return [given[n] if n in given else _entry_for(plan, given, n, derived, compiled)
            for n in plan.node_names]


def _with_node_lists(r: Registration, plan: FleetDesign, sampled: Sequence[str],
                     derived: Derived) -> Registration:
    """The fleet component's outputs (its nodes' ids and addresses) over every node."""
    outputs = {k: _node_list(v, plan, sampled, derived)
               if isinstance(v, list) and len(v) == len(sampled) else v
               for k, v in r.outputs.items()}
    return dataclasses.replace(r, outputs=outputs)


def _extend_export(exports: dict[str, Any], plan: FleetDesign, derived: Derived) -> None:
    """The fleet's stack output lists every node: each derived node's entry from its
    template's (``derived``: node -> its reference, its template and the values standing
    for it)."""
    out = exports.get(plan.name)
    if not isinstance(out, dict) or not isinstance(out.get("nodes"), list):
        return
    given = {e.get("name"): e for e in out["nodes"] if isinstance(e, dict)}
    compiled: dict[tuple[str, str], Any] = {}
    nodes = []
    for n in plan.node_names:
        if n in given:
            nodes.append(given[n])
        elif n in derived and derived[n][0] in given and derived[n][1] in given:
            nodes.append(_entry_for(plan, given, n, derived, compiled))
    exports[plan.name] = {**out, "nodes": nodes}
