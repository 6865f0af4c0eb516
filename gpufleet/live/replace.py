"""`gpufleet replace FLEET NODE...`: replace exactly those nodes (`pulumi up --replace URN`),
in the same placement, reservation and network, after a preview that must show those
replacements and nothing else.

The stack program is unchanged, so a replaced instance comes back with the same name and the
same inputs: its placement group / COLLOCATED policy, reservation, subnets and security
groups. A scale set's instances are not Pulumi resources: the provider's equivalent is the
cloud's redeploy of those instances through the backend's live module (on Azure each is shut
down, moved to a new host and powered back on: the same instance, name, addresses and
placement group, on other hardware, through ARM's REST API with the user's credentials);
Pulumi's state does not change.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import Any

from gpufleet.backends import node_types, resource_kinds, traits_of
from gpufleet.live.drift import changes_from_events
from gpufleet.live.preflight import ProbeError, ScaleSetApi
from gpufleet.live.runner import DeployRunner, LiveError
from gpufleet.live.stack import StackFilesError, compile_stack
from gpufleet.live.topology import FleetTopology, TopologyReader, deployed_fleets, read_fleet
from gpufleet.live.up import stack_files
from gpufleet.review import Change, StateError, owner_map, parse_export


class ReplaceError(LiveError):
    """`gpufleet replace` stopped before changing anything (or `pulumi up` failed);
    ``replaced``: the nodes were replaced, and what followed failed (a node beyond
    max_spread)."""

    replaced = False


@dataclass(frozen=True, slots=True)
class ReplacePreview:
    fleet: str
    nodes: tuple[str, ...]
    urns: tuple[str, ...]
    changes: tuple[Change, ...]  # what the preview shows
    plan: Any = field(default=None, compare=False)  # the fleet's FleetDesign
    max_spread: str = "any"  # the backends file's, for the topology check after `up`

    def lines(self) -> list[str]:
        out = [f"replace in fleet {self.fleet}: {', '.join(self.nodes)}"]
        out += [f"  urn: {u}" for u in self.urns]
        out.append(f"preview: {len(self.changes)} change(s)")
        out += [f"  {c.op:<8} {c.name} ({c.type})" for c in self.changes]
        return out


def node_names(requested: Sequence[str], fleet: str, planned: Sequence[str]) -> list[str]:
    """Each NODE as a planned node name: the name itself, or its index (`1` -> `a4-node-1`)."""
    out: list[str] = []
    for item in requested:
        name = planned[int(item)] if item.isdigit() and int(item) < len(planned) else item
        if name not in planned:
            raise ReplaceError(f"fleet {fleet} has no node '{item}'; its nodes: "
                               f"{', '.join(planned) or 'none'}")
        if name not in out:
            out.append(name)
    return out


def plan_replacement(runner: DeployRunner, cwd: str, fleet: str,
                     requested: Sequence[str]) -> ReplacePreview:
    """The URNs of the nodes, and the preview of `pulumi up --replace` on them; refuses when
    the preview would change anything else."""
    files, lock_path, profile, catalog = stack_files(runner.config(), cwd)
    try:
        validated, compiled, _ = compile_stack(files, profile, catalog, lock_path)
    except StackFilesError as e:
        raise ReplaceError(str(e)) from None
    spread = next((f.max_spread for f in validated.inputs.fleets if f.name == fleet), "any")
    plan = next((p for p in compiled.plans if p.name == fleet), None)
    if plan is None:
        raise ReplaceError(f"the stack's files have no fleet '{fleet}'; its fleets: "
                           f"{', '.join(p.name for p in compiled.plans) or 'none'}")
    if plan.placement is not None and plan.placement.kind == "scale-set":
        raise _ScaleSet(plan.placement.name, plan.backend)
    nodes = node_names(requested, fleet, plan.node_names)
    state, owners = _state(runner)
    found = {r.name: r.urn for r in state.resources
             if r.type in node_types() and owners.get(r.urn) == fleet and r.name in nodes}
    missing = [n for n in nodes if n not in found]
    if missing:
        raise ReplaceError(f"not deployed: {', '.join(missing)} (the stack's state has no such "
                           "node; `gpufleet up` creates it)")
    urns = tuple(found[n] for n in nodes)
    events: list[object] = []
    runner.preview(events.append, replace=urns)
    changes = tuple(changes_from_events(events, "preview"))
    shown = ReplacePreview(fleet, tuple(nodes), urns, changes, plan, spread)
    others = [c for c in changes if c.urn not in urns and not _follows(c, nodes)]
    not_replaced = [u for u in urns if not any(c.urn == u and c.op == "replace"
                                               for c in changes)]
    if others or not_replaced:
        why = [f"{c.op} {c.name} ({c.type})" for c in others]
        why += [f"no replacement of {u}" for u in not_replaced]
        raise ReplaceError("the preview is not exactly these replacements; nothing was "
                           "changed (run `gpufleet diff` or `gpufleet up` for the other "
                           "changes first):\n  " + "\n  ".join(why))
    return shown


def _follows(change: Change, nodes: Sequence[str]) -> bool:
    """A replacement the nodes' own replacements cause: a resource of one of them (named
    `<node>-...`) whose kind is replaced with what feeds it (Lambda's wait for `active`)."""
    kind = resource_kinds().get(change.type)
    return (change.op == "replace" and kind is not None and bool(kind.replaced_with)
            and any(change.name.startswith(f"{n}-") for n in nodes))


class _ScaleSet(Exception):  # a signal inside this module, never shown
    """The fleet is a scale set (its placement's name), on ``backend``."""

    def __init__(self, name: str, backend: str) -> None:
        super().__init__(name)
        self.backend = backend


def _state(runner: DeployRunner) -> tuple[Any, dict[str, str]]:
    try:
        state = parse_export(json.dumps(runner.export()), "the stack's state")
    except StateError as e:
        raise ReplaceError(f"cannot read the stack's state: {e}") from None
    return state, owner_map([(r.urn, r.type, r.parent) for r in state.resources])


@dataclass(frozen=True, slots=True)
class ScaleSetRedeploy:
    """Instances of a fleet's scale set to redeploy onto new hosts."""

    fleet: str
    vmss_id: str
    nodes: tuple[str, ...]  # the instances' names
    instance_ids: tuple[str, ...]
    kind: str = "scale set"  # what the cloud calls it

    def lines(self) -> list[str]:
        return [f"redeploy in fleet {self.fleet} ({self.kind} {self.vmss_id}): "
                f"{', '.join(self.nodes)} (instance ids {', '.join(self.instance_ids)})",
                "  each is shut down, moved to a new host and powered back on: the same "
                "instance, name, addresses and placement group; the stack does not change"]


def scale_set_plan(runner: DeployRunner, fleet: str, requested: Sequence[str],
                   api: ScaleSetApi, backend: str) -> ScaleSetRedeploy:
    """The scale set (from the stack's state) and the instances NODE... name: an instance id,
    the instance's name (`VMSS_3`) or its computer name (as `hostname` shows)."""
    state, owners = _state(runner)
    kind = traits_of(backend).scale_set_type
    vmss = next((r for r in state.resources if r.type == kind
                 and owners.get(r.urn) == fleet), None)
    if vmss is None or not (vmss.id or vmss.outputs.get("id")):
        raise ReplaceError(f"not deployed: fleet {fleet}'s scale set is not in the stack's "
                           "state (`gpufleet up` creates it)")
    vmss_id = str(vmss.id or vmss.outputs.get("id"))
    try:
        listed = api.instances(vmss_id)
    except ProbeError as e:
        raise ReplaceError(str(e)) from None
    names: dict[str, tuple[str, str]] = {}
    for inst in listed:
        iid, name = str(inst.get("instanceId", "")), str(inst.get("name", ""))
        computer = str(((inst.get("properties") or {}).get("osProfile") or {})
                       .get("computerName", ""))
        for key in (iid, name, computer):
            if key:
                names[key] = (iid, name or computer)
    chosen: list[tuple[str, str]] = []
    for item in requested:
        if item not in names:
            known = sorted({n for _, n in names.values()})
            raise ReplaceError(f"scale set of fleet {fleet} has no instance '{item}'; its "
                               f"instances: {', '.join(known) or 'none'}")
        if names[item] not in chosen:
            chosen.append(names[item])
    return ScaleSetRedeploy(fleet, vmss_id, tuple(n for _, n in chosen),
                            tuple(i for i, _ in chosen), api.kind)


def replace_nodes(runner: DeployRunner, cwd: str, fleet: str, requested: Sequence[str],
                  echo: Callable[[str], None], confirm: Callable[[Any], bool],
                  dry_run: bool = False,
                  scale_sets: Callable[[str], ScaleSetApi] | None = None,
                  topology: Callable[[str], TopologyReader] | None = None
                  ) -> ReplacePreview | ScaleSetRedeploy:
    """``scale_sets`` opens the scale-set API of a backend for a scale-set fleet (credentials
    are read only then); ``topology`` its topology reader: the replaced nodes' positions
    before (shown with --dry-run too) and after, judged against the fleet's max_spread."""
    try:
        shown: ReplacePreview | ScaleSetRedeploy = plan_replacement(runner, cwd, fleet, requested)
    except _ScaleSet as vmss:
        if scale_sets is None:
            raise ReplaceError(f"fleet {fleet} is a scale set on {vmss.backend} ({vmss}): its "
                               "instances are redeployed through the cloud's API, which "
                               "this call was not given") from None
        api = scale_sets(vmss.backend)
        shown = scale_set_plan(runner, fleet, requested, api, vmss.backend)
        for line in shown.lines():
            echo(line)
        if dry_run:
            return shown
        if not confirm(shown):
            raise ReplaceError("not confirmed; nothing was changed") from None
        try:
            status = api.redeploy(shown.vmss_id, shown.instance_ids)
        except ProbeError as e:
            raise ReplaceError(str(e)) from None
        if status != "Succeeded":
            raise ReplaceError(f"the {shown.kind}'s redeploy ended {status}: "
                               f"{api.inspect_hint(shown.vmss_id)}") from None
        return shown
    assert isinstance(shown, ReplacePreview)
    before = _topology(runner, shown, topology) if topology is not None else None
    for line in shown.lines() + (_where(before, shown.nodes, "now") if before else []):
        echo(line)
    if dry_run:
        return shown
    if not confirm(shown):
        raise ReplaceError("not confirmed; nothing was changed")
    outcome = runner.up(replace=shown.urns)
    if not outcome.succeeded:
        raise ReplaceError("`pulumi up --replace` failed:\n" + outcome.error.strip()[-2000:])
    if topology is not None:
        _on_the_spine(_topology(runner, shown, topology), before, shown, echo)
    return shown


def _topology(runner: DeployRunner, shown: ReplacePreview,
              readers: Callable[[str], TopologyReader]) -> FleetTopology | None:
    """The fleet's topology as the stack's state holds it now (None: no node deployed)."""
    state, _ = _state(runner)
    found = deployed_fleets(state, [shown.plan], {shown.fleet: shown.max_spread})
    return read_fleet(found[0], partial(readers, shown.plan.backend)) if found else None


def _where(topo: FleetTopology, nodes: Sequence[str], when: str) -> list[str]:
    if topo.reason is not None:
        return [f"topology: {topo.reason}"]
    at = {p.node: "/".join(p.layers) for p in topo.positions}
    return [f"  position of {n} {when}: {at.get(n, 'not in the cloud answer')}" for n in nodes]


def _on_the_spine(after: FleetTopology | None, before: FleetTopology | None,
                  shown: ReplacePreview, echo: Callable[[str], None]) -> None:
    """The replacements' new positions against max_spread: a ReplaceError (exit 1) naming
    the old and new positions of a node that landed further away."""
    if after is None:
        return
    for line in _where(after, shown.nodes, "after"):
        echo(line)
    verdict, why = after.judge()
    if verdict == "beyond":
        old = {p.node: "/".join(p.layers) for p in (before.positions if before else [])}
        moved = [f"{n}: was {old.get(n, 'unknown')}, now "
                 f"{next(('/'.join(p.layers) for p in after.positions if p.node == n), '?')}"
                 for n in shown.nodes]
        error = ReplaceError(f"replaced {', '.join(shown.nodes)}, but the fleet is now "
                             f"beyond max_spread {shown.max_spread}: " + "; ".join(why) + " ("
                             + "; ".join(moved) + "); replace the node again, or ask the "
                             "cloud's support for capacity on the fleet's spine")
        error.replaced = True
        raise error
    if verdict == "unknown" and shown.max_spread != "any":
        echo(f"topology after the replacement: no verdict ({'; '.join(why)})")
