"""`gpufleet topology`: the network topology the clouds expose for a fleet's nodes, the fleet's
spread over it and a verdict against the spread it may have. Live stage.

A position is a node's chain of network nodes, outermost first, on one ladder of layers:
spine > block > subblock > host. Each backend's ``live`` module reads it (``topology_reader``):
AWS DescribeInstanceTopology gives three network nodes (four for p6-b200/b300: the fourth is
taken as the host), GCP gives cluster (spine), block, subblock and host of VMs in dense
deployments (`resourceStatus.physicalHostTopology`); Azure and Lambda expose none. A fleet
is *within* ``max_spread`` (backends file, `fleets: {NAME: {max_spread: ...}}`) when all its
nodes share one node at that layer. No cloud documents a layer its placement request
guarantees (a cluster placement group, a compact placement policy), so the default is `any`.
A node the cloud leaves out of its answer, or a layer it does not give, is never a pass.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import Any, Protocol

from gpufleet.backends import node_types
from gpufleet.live.runner import LiveError
from gpufleet.review import State, owner_map
from gpufleet.traits import TOPOLOGY_LAYERS

LAYERS = TOPOLOGY_LAYERS  # outermost first
SPREADS = (*LAYERS, "any")


class TopologyUnavailable(LiveError):
    """The cloud does not say (no permission, an unsupported type, no API): exit 2."""


class TopologyReader(Protocol):
    def positions(self, fleet: FleetNodes) -> dict[str, tuple[str, ...]]:
        """Instance id -> its network nodes, outermost first; ids the cloud leaves out of its
        answer are absent. TopologyUnavailable when it cannot be asked."""
        ...


@dataclass(frozen=True, slots=True)
class FleetNodes:
    """One deployed fleet: its nodes' instance ids and private addresses, by node name."""

    fleet: str
    backend: str
    region: str
    zone: str | None
    instance_type: str
    scope: str | None
    ids: Mapping[str, str]
    addresses: Mapping[str, str] = field(default_factory=dict)
    max_spread: str = "any"
    # deployed but no longer in the fleet's files (judged: they run), and in the files but
    # not deployed (not judged: nothing runs); both named in the report
    not_in_files: tuple[str, ...] = ()
    not_deployed: tuple[str, ...] = ()

    def node_of(self, instance_id: str) -> str:
        """The node name of an instance id (the id itself when it is not the fleet's)."""
        return next((n for n, i in self.ids.items() if i == instance_id), instance_id)


@dataclass(frozen=True, slots=True)
class Position:
    node: str
    instance_id: str
    layers: tuple[str, ...]  # outermost first, as many as the cloud gives

    def at(self, layer: str) -> tuple[str, ...] | None:
        """The chain down to ``layer`` (its identity), or None when the cloud gives no such
        layer for this node."""
        depth = LAYERS.index(layer) + 1
        return self.layers[:depth] if len(self.layers) >= depth else None


@dataclass
class FleetTopology:
    fleet: FleetNodes
    positions: list[Position] = field(default_factory=list)
    missing: list[str] = field(default_factory=list)  # nodes absent from the cloud's answer
    reason: str | None = None  # why the cloud does not say

    def spread(self) -> dict[str, int]:
        """Distinct network nodes at each layer every position has."""
        out: dict[str, int] = {}
        for layer in LAYERS:
            chains = [p.at(layer) for p in self.positions]
            if not chains or any(c is None for c in chains):
                break
            out[layer] = len(set(chains))
        return out

    def notes(self) -> list[str]:
        """What differs between the deployed nodes (judged) and the fleet's files."""
        f = self.fleet
        out = []
        if f.not_in_files:
            out.append(f"running but not in the fleet's files (judged, as they run; `pulumi "
                       f"up` would delete them): {', '.join(f.not_in_files)}")
        if f.not_deployed:
            out.append(f"in the fleet's files but not deployed (not judged; `pulumi up` "
                       f"creates them): {', '.join(f.not_deployed)}")
        return out

    def judge(self) -> tuple[str, list[str]]:
        """("within" | "beyond" | "unknown", the reasons)."""
        verdict, why = self._judge()
        return verdict, [*why, *self.notes()]

    def _judge(self) -> tuple[str, list[str]]:
        allowed = self.fleet.max_spread
        if self.reason is not None:
            return "unknown", [self.reason]
        if self.missing:
            return "unknown", [f"the cloud's answer leaves out {', '.join(self.missing)}: "
                               "no verdict on part of the fleet"]
        if allowed == "any" or len(self.positions) < 2:
            return "within", []
        chains = {p.node: p.at(allowed) for p in self.positions}
        if any(c is None for c in chains.values()):
            return "unknown", [f"{self.fleet.backend} gives no `{allowed}` layer for "
                               f"{self.fleet.instance_type}: set a wider max_spread"]
        common, _ = Counter(chains.values()).most_common(1)[0]
        away = [p for p in self.positions if chains[p.node] != common]
        if not away:
            return "within", []
        return "beyond", [f"{p.node} ({p.instance_id}) is under {_label(chains[p.node])}, "
                          f"the others under {_label(common)}: beyond max_spread {allowed}"
                          for p in away]

    def order(self) -> list[str]:
        """The nodes in topology order: neighbours in the list are neighbours in the
        network (then by node name)."""
        return [p.node for p in sorted(self.positions, key=lambda p: (p.layers, p.node))]

    def to_json(self) -> dict[str, Any]:
        verdict, why = self.judge()
        f = self.fleet
        return {"fleet": f.fleet, "backend": f.backend, "region": f.region,
                "instance_type": f.instance_type, "max_spread": f.max_spread,
                "verdict": verdict, "reasons": why, "spread": self.spread(),
                "order": self.order(), "missing": self.missing,
                "not_in_files": list(f.not_in_files), "not_deployed": list(f.not_deployed),
                "nodes": [{"node": p.node, "instance_id": p.instance_id,
                           "address": f.addresses.get(p.node),
                           "layers": dict(zip(LAYERS, p.layers, strict=False))}
                          for p in self.positions]}

    def lines(self) -> list[str]:
        verdict, why = self.judge()
        f = self.fleet
        mark = {"within": "ok  ", "beyond": "FAIL", "unknown": "??  "}[verdict]
        spread = ", ".join(f"{n} {layer}(s)" for layer, n in self.spread().items())
        out = [f"{mark} fleet {f.fleet} ({f.backend} {f.instance_type}, {len(f.ids)} node(s)):"
               f" {verdict} max_spread {f.max_spread}" + (f"; spread: {spread}" if spread
                                                          else "")]
        for layer in LAYERS:
            groups: dict[tuple[str, ...], list[str]] = {}
            for p in self.positions:
                chain = p.at(layer)
                if chain is not None:
                    groups.setdefault(chain, []).append(p.node)
            out += [f"    {layer} {_label(chain)}: {', '.join(sorted(nodes))}"
                    for chain, nodes in sorted(groups.items())]
        return out + [f"  {w}" for w in why]


def _index(node: str) -> tuple[int, str]:
    tail = node.rsplit("-", 1)[-1]
    return (int(tail) if tail.isdigit() else -1, node)


def check_positions(fleet: FleetNodes, found: Mapping[str, Sequence[Any]]
                    ) -> dict[str, tuple[str, ...]]:
    """A reader's answer judged before it is used: every layer a non-blank string (at most
    a few hundred characters); TopologyUnavailable naming the node otherwise."""
    out: dict[str, tuple[str, ...]] = {}
    for instance_id, layers in found.items():
        if not isinstance(layers, tuple | list) or not all(
                isinstance(x, str) and x.strip() and len(x) <= 256 for x in layers):
            raise TopologyUnavailable(
                f"{fleet.backend}: the topology answer for {fleet.node_of(instance_id)} "
                f"({instance_id}) has a blank or malformed network node: no verdict on an "
                "answer that cannot be read")
        out[instance_id] = tuple(layers)
    return out


def _label(chain: tuple[str, ...] | None) -> str:
    return "/".join(chain) if chain else "?"


@dataclass
class TopologyReport:
    stack: str
    fleets: list[FleetTopology] = field(default_factory=list)

    @property
    def exit_code(self) -> int:
        verdicts = {f.judge()[0] for f in self.fleets}
        return 1 if "beyond" in verdicts else 2 if "unknown" in verdicts or not verdicts else 0

    def lines(self) -> list[str]:
        out = [f"topology of stack {self.stack}:"]
        for f in self.fleets:
            out += f.lines()
        if not self.fleets:
            out.append("  no fleet runs nodes: nothing to read")
        return out

    def to_json(self) -> dict[str, Any]:
        return {"stack": self.stack, "exit_code": self.exit_code,
                "fleets": [f.to_json() for f in self.fleets]}


def read_fleet(fleet: FleetNodes, reader: Callable[[], TopologyReader]) -> FleetTopology:
    """One fleet's positions; the cloud's silence (no API, no permission) as the reason."""
    out = FleetTopology(fleet)
    try:
        found = check_positions(fleet, reader().positions(fleet))
    except LiveError as e:  # TopologyUnavailable, MissingAccess (no credentials), ProbeError
        out.reason = str(e)
        return out
    for node, instance_id in sorted(fleet.ids.items()):
        layers = found.get(instance_id)
        if layers:
            out.positions.append(Position(node, instance_id, tuple(layers)))
        else:
            out.missing.append(node)
    return out


def read_topology(stack: str, fleets: Sequence[FleetNodes],
                  readers: Callable[[str], TopologyReader]) -> TopologyReport:
    """Every fleet's topology through its backend's reader (``readers``: backend -> reader,
    `gpufleet.live.probes.topology_reader` over each cloud's default credentials)."""
    return TopologyReport(stack, [read_fleet(f, partial(readers, f.backend)) for f in fleets])


def deployed_fleets(state: State, plans: Sequence[Any],
                    max_spread: Mapping[str, str]) -> list[FleetNodes]:
    """The fleets of ``plans`` with nodes in ``state``: every node the state holds (the
    deployed ones are judged, those the files no longer name included), instance ids from
    the node resources, private addresses from the stack's outputs."""
    owners = owner_map([(r.urn, r.type, r.parent) for r in state.resources])
    shapes = {p.name: re.compile(re.escape(p.name) + "-node-[0-9]+") for p in plans}
    ids: dict[str, dict[str, str]] = {}
    for r in state.resources:
        owner = owners.get(r.urn) or ""
        shape = shapes.get(owner)  # its nodes, not its bastion
        if r.type in node_types() and r.id and shape is not None and shape.fullmatch(r.name):
            ids.setdefault(owner, {})[r.name] = r.id
    outputs = next((dict(r.outputs) for r in state.resources
                    if r.type == "pulumi:pulumi:Stack"), {})
    out = []
    for p in plans:
        if not ids.get(p.name):
            continue
        nodes = (outputs.get(p.name) or {}).get("nodes") if isinstance(
            outputs.get(p.name), dict) else None
        addresses = {str(n.get("name")): str(n.get("private_ip")) for n in nodes or ()
                     if isinstance(n, dict) and isinstance(n.get("private_ip"), str)}
        planned = set(p.node_names)
        out.append(FleetNodes(p.name, p.backend, p.region, p.zone, p.instance_type,
                              p.provider.scope, ids[p.name], addresses,
                              max_spread.get(p.name, "any"),
                              tuple(sorted(set(ids[p.name]) - planned, key=_index)),
                              tuple(sorted(planned - set(ids[p.name]), key=_index))))
    return out
