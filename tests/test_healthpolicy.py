"""The health policy's decisions (gpufleet.live.healthpolicy) on a fake clock: replacements
held back past a day's limit (the ledger's and this run's), isolation within the fleet's
spares, and a node failing twice."""

from __future__ import annotations

import datetime as dt

from gpufleet.live.health import HealthReport, NodeHealth
from gpufleet.live.healthpolicy import HealthPolicy, decide, replaced_since

NOW = dt.datetime(2026, 11, 27, 12, 0, tzinfo=dt.UTC)


def _node(i: int, status: str = "failure", why: str = "", fleet: str = "f") -> NodeHealth:
    return NodeHealth(fleet, f"{fleet}-node-{i}", f"10.0.0.{i}", status, why=why,
                      instance_num=None if why else i)


def _replace(hours_ago: float, nodes: list[str], fleet: str = "f",
             replaced: bool = True) -> dict[str, object]:
    return {"kind": "replace", "fleet": fleet,
            "time": (NOW - dt.timedelta(hours=hours_ago)).isoformat(timespec="seconds"),
            "figures": {"nodes": nodes, "replaced": replaced}}


def test_the_ledger_counts_the_fleets_replacements_of_the_last_day() -> None:
    entries = [_replace(1, ["f-node-0"]), _replace(5, ["f-node-1", "f-node-2"]),
               _replace(30, ["f-node-3"]),  # yesterday's
               _replace(2, ["g-node-0"], fleet="g"),  # another fleet's
               _replace(2, ["f-node-4"], replaced=False),  # refused: replaced nothing
               {"kind": "burn-in", "fleet": "f", "time": NOW.isoformat(), "figures": {}},
               {"kind": "replace", "fleet": "f", "time": "yesterday", "figures": {}}]
    assert replaced_since(entries, "f", NOW - dt.timedelta(hours=24)) == 3


def test_replacements_past_the_days_limit_are_held_back() -> None:
    report = HealthReport([_node(0), _node(1), _node(2, "warning"), _node(3, "healthy")])
    policy = HealthPolicy(on_failure="replace", on_warning="replace",
                          max_replacements_per_day=2)
    actions = decide(report, {"f": policy}, {"f": 1})  # one replaced earlier today
    assert [(a.node.node, a.do) for a in actions] == [
        ("f-node-0", "replace"), ("f-node-1", "report"), ("f-node-2", "report")]
    assert "2 replacement(s) in the last 24 h reach max_replacements_per_day 2" in \
        actions[1].held


def test_isolation_uses_the_spares_then_replaces() -> None:
    report = HealthReport([_node(0), _node(1), _node(2),
                           _node(3, "unknown", why="not an instance of dstack's fleet f")])
    policy = HealthPolicy(on_failure="isolate", on_warning="replace", spares=2,
                          max_replacements_per_day=5)
    actions = decide(report, {"f": policy}, {})
    # one node is already out of dstack's fleet: one spare is left
    assert [(a.node.node, a.do) for a in actions] == [
        ("f-node-0", "isolate"), ("f-node-1", "replace"), ("f-node-2", "replace")]
    assert "its 2 spare(s) are used" in actions[1].held


def test_the_default_policy_reports_and_a_fleet_without_one_gets_it() -> None:
    report = HealthReport([_node(0), _node(0, fleet="g")])
    actions = decide(report, {"f": HealthPolicy.of({"on_failure": "isolate", "spares": 1})},
                     {})
    assert [(a.node.fleet, a.do) for a in actions] == [("f", "isolate"), ("g", "report")]
    assert HealthPolicy.of({}) == HealthPolicy("report", "report", 1, 0)


def test_a_node_failing_twice_is_replaced_once_a_day() -> None:
    policy = HealthPolicy(on_failure="replace", max_replacements_per_day=1)
    first = decide(HealthReport([_node(1)]), {"f": policy}, {"f": 0})
    assert first[0].do == "replace"
    # the replacement is in the ledger; the same node fails again within the day
    ledger = [_replace(0.5, ["f-node-1"])]
    again = decide(HealthReport([_node(1)]), {"f": policy},
                   {"f": replaced_since(ledger, "f", NOW - dt.timedelta(hours=24))})
    assert again[0].do == "report" and "max_replacements_per_day 1" in again[0].held
    # a day later it may be replaced again
    later = decide(HealthReport([_node(1)]), {"f": policy},
                   {"f": replaced_since(ledger, "f", NOW + dt.timedelta(hours=1))})
    assert later[0].do == "replace"


def test_what_the_policy_asked_is_kept_beside_what_its_limits_allow() -> None:
    report = HealthReport([_node(0, "warning"), _node(1, "warning")])
    policy = HealthPolicy(on_warning="replace", max_replacements_per_day=1)
    actions = decide(report, {"f": policy}, {})
    assert [(a.do, a.wants) for a in actions] == [("replace", "replace"),
                                                  ("report", "replace")]
