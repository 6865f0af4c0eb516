"""`gpufleet replace FLEET NODE...`: replace exactly those nodes (`pulumi up --replace URN`),
in the same placement, reservation and network, after a preview that must show those
replacements and nothing else.

The stack program is unchanged, so a replaced instance comes back with the same name and the
same inputs: its placement group / COLLOCATED policy, reservation, subnets and security
groups. An Azure scale set's instances are not Pulumi resources; their replacement is the
cloud's own (`az vmss delete-instances` then `pulumi up`, or `az vmss reimage`), and the
command says so instead of touching the scale set.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from gpufleet.live.drift import changes_from_events
from gpufleet.live.runner import DeployRunner, LiveError
from gpufleet.live.stack import StackFilesError, compile_stack
from gpufleet.live.up import stack_files
from gpufleet.review import Change, StateError, owner_map, parse_export
from gpufleet.traits import node_types


class ReplaceError(LiveError):
    """`gpufleet replace` stopped before changing anything (or `pulumi up` failed)."""


@dataclass(frozen=True, slots=True)
class ReplacePlan:
    fleet: str
    nodes: tuple[str, ...]
    urns: tuple[str, ...]
    changes: tuple[Change, ...]  # what the preview shows

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
                     requested: Sequence[str]) -> ReplacePlan:
    """The URNs of the nodes, and the preview of `pulumi up --replace` on them; refuses when
    the preview would change anything else."""
    files, lock_path, profile, catalog = stack_files(runner.config(), cwd)
    try:
        _, compiled, _ = compile_stack(files, profile, catalog, lock_path)
    except StackFilesError as e:
        raise ReplaceError(str(e)) from None
    plan = next((p for p in compiled.plans if p.name == fleet), None)
    if plan is None:
        raise ReplaceError(f"the stack's files have no fleet '{fleet}'; its fleets: "
                           f"{', '.join(p.name for p in compiled.plans) or 'none'}")
    if plan.placement is not None and plan.placement.kind == "scale-set":
        raise ReplaceError(f"fleet {fleet} is an Azure scale set: its instances are not "
                           "Pulumi resources. Replace one with `az vmss delete-instances "
                           f"--name {plan.placement.name} --instance-ids ID -g RG` and then "
                           "`gpufleet up` (the scale set's capacity brings a new one in the same "
                           "placement group), or reimage it with `az vmss reimage`")
    nodes = node_names(requested, fleet, plan.node_names)
    try:
        state = parse_export(json.dumps(runner.export()), "the stack's state")
    except StateError as e:
        raise ReplaceError(f"cannot read the stack's state: {e}") from None
    owners = owner_map([(r.urn, r.type, r.parent) for r in state.resources])
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
    shown = ReplacePlan(fleet, tuple(nodes), urns, changes)
    others = [c for c in changes if c.urn not in urns]
    not_replaced = [u for u in urns if not any(c.urn == u and c.op == "replace"
                                               for c in changes)]
    if others or not_replaced:
        why = [f"{c.op} {c.name} ({c.type})" for c in others]
        why += [f"no replacement of {u}" for u in not_replaced]
        raise ReplaceError("the preview is not exactly these replacements; nothing was "
                           "changed (run `gpufleet diff` or `gpufleet up` for the other "
                           "changes first):\n  " + "\n  ".join(why))
    return shown


def replace_nodes(runner: DeployRunner, cwd: str, fleet: str, requested: Sequence[str],
                  echo: Callable[[str], None], confirm: Callable[[ReplacePlan], bool],
                  dry_run: bool = False) -> ReplacePlan:
    shown = plan_replacement(runner, cwd, fleet, requested)
    for line in shown.lines():
        echo(line)
    if dry_run:
        return shown
    if not confirm(shown):
        raise ReplaceError("not confirmed; nothing was changed")
    outcome = runner.up(replace=shown.urns)
    if not outcome.succeeded:
        raise ReplaceError("`pulumi up --replace` failed:\n" + outcome.error.strip()[-2000:])
    return shown
