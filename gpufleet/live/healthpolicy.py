"""What `gpufleet health --apply` does about sick nodes: each fleet's `health` policy in the
backends file, held to its limits.

A failing (or warning) node is replaced, isolated (its instance removed from dstack's fleet
with `POST /api/project/{FLEET}/fleets/delete_instances`, dstack 0.22.5's
`DeleteFleetInstancesRequest`, so nothing is scheduled there) or reported, as the policy
says. Replacements are held back past ``max_replacements_per_day`` (counting the ledger's
replacements of the fleet in the last 24 hours and the ones this run decides); isolation uses
the fleet's ``spares``: while fewer than that many of its nodes are out of dstack's fleet a
node is isolated, past that it is replaced where the policy allows replacing, else reported.
Pure: the caller reads the report, the ledger and the clock.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from gpufleet.live.health import HealthReport, NodeHealth

ACTIONS = ("replace", "isolate", "report")
OUT_OF_FLEET = "not an instance of dstack's fleet"  # how health says a node left it


@dataclass(frozen=True, slots=True)
class HealthPolicy:
    on_failure: str = "report"
    on_warning: str = "report"
    max_replacements_per_day: int = 1
    spares: int = 0

    @classmethod
    def of(cls, settings: Mapping[str, Any]) -> HealthPolicy:
        """From the backends file's `health` (validated by its schema); defaults elsewhere."""
        return cls(str(settings.get("on_failure", "report")),
                   str(settings.get("on_warning", "report")),
                   int(settings.get("max_replacements_per_day", 1)),
                   int(settings.get("spares", 0)))


@dataclass(frozen=True, slots=True)
class Action:
    node: NodeHealth
    do: str  # replace, isolate or report
    held: str = ""  # why a replacement or isolation the policy asks for is not done
    wants: str = "report"  # what the policy asks for the node, before its limits

    def text(self) -> str:
        n = self.node
        what = {"replace": "replace", "isolate": "isolate (remove from dstack's fleet)",
                "report": "report only"}[self.do]
        return (f"{n.fleet}/{n.node} ({n.status}): {what}" + (f"; {self.held}" if self.held
                                                              else ""))


def replaced_since(entries: Iterable[Mapping[str, Any]], fleet: str, since: dt.datetime
                   ) -> int:
    """Nodes the ledger records replaced for ``fleet`` after ``since``."""
    count = 0
    for e in entries:
        figures = e.get("figures")
        if e.get("kind") != "replace" or e.get("fleet") != fleet or \
                not isinstance(figures, dict) or figures.get("replaced") is False:
            continue
        try:
            when = dt.datetime.fromisoformat(str(e.get("time")))
        except ValueError:
            continue
        if when.tzinfo is None:
            when = when.replace(tzinfo=dt.UTC)
        if when > since:
            names = figures.get("nodes")
            count += len(names) if isinstance(names, list) else 1
    return count


def decide(report: HealthReport, policies: Mapping[str, HealthPolicy],
           replaced_today: Mapping[str, int]) -> list[Action]:
    """One action per failing or warning node, in the report's order."""
    out: list[Action] = []
    replaced = dict(replaced_today)
    away = {f: sum(1 for n in report.nodes if n.fleet == f and OUT_OF_FLEET in n.why)
            for f in {n.fleet for n in report.nodes}}
    for node in report.nodes:
        if node.status not in ("failure", "warning"):
            continue
        policy = policies.get(node.fleet, HealthPolicy())
        wanted = policy.on_failure if node.status == "failure" else policy.on_warning
        asked, held = wanted, ""
        if wanted == "isolate" and away[node.fleet] >= policy.spares:
            held = (f"its {policy.spares} spare(s) are used ({away[node.fleet]} node(s) out "
                    "of dstack's fleet)")
            wanted = "replace" if "replace" in (policy.on_failure, policy.on_warning) \
                else "report"
        if wanted == "isolate" and node.instance_num is None:
            wanted, held = "report", "dstack holds no instance for it"
        if wanted == "replace" and replaced.get(node.fleet, 0) >= \
                policy.max_replacements_per_day:
            held = (f"{replaced.get(node.fleet, 0)} replacement(s) in the last 24 h reach "
                    f"max_replacements_per_day {policy.max_replacements_per_day}")
            wanted = "report"
        if wanted == "replace":
            replaced[node.fleet] = replaced.get(node.fleet, 0) + 1
        if wanted == "isolate":
            away[node.fleet] += 1
        out.append(Action(node, wanted, held, asked))
    return out
