"""`gpufleet health`: each node's GPU health as dstack sees it, read from the dstack server.

dstack 0.22.5 keeps, per instance, the health checks its shim collects from DCGM's host
engine (server/services/instances.py: `get_instance_health_checks`, newest first; each a
`HealthCheck` with `collected_at`, `status` healthy / warning / failure and the DCGM
incidents as `events`). gpufleet asks the server through its REST API, with the hardened
client and the token `gateway sync` finds (never printed):

- `POST /api/instances/list` `{"project_names": [FLEET], "only_active": true}`: the
  fleet's instances (`fleet_name`, `instance_num`, `hostname`, `unreachable`), matched to the
  stack's nodes by the address the SSH fleet file gave dstack;
- `POST /api/project/{FLEET}/instances/get_instance_health_checks` `{"fleet_name",
  "instance_num", "limit"}`: its latest checks.

A node is `healthy`, `warning` or `failure` as its latest check says, with that check's
incidents and since when its status holds; it is `unknown` (no verdict) when dstack does not
hold it, cannot reach it, has no check for it (DCGM not answering: dstack's instance status
says healthy then, which proves nothing) or its latest check is older than ``max_age``.
"""

from __future__ import annotations

import datetime as dt
import urllib.parse
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from gpufleet.live.gateways import Post, Server, ServerError

STATUSES = ("healthy", "warning", "failure")
CHECKS_PER_NODE = 20  # the latest checks read per node (for since when its status holds)
MAX_INSTANCES = 1000  # dstack's own page size for /api/instances/list


@dataclass(frozen=True, slots=True)
class NodeHealth:
    fleet: str
    node: str
    address: str
    status: str  # healthy, warning, failure or unknown
    since: str | None = None  # the first check of the current status (ISO time)
    incidents: tuple[str, ...] = ()
    why: str = ""  # for unknown: why there is no verdict
    instance_num: int | None = None  # its instance in dstack's fleet, where it has one


@dataclass
class HealthReport:
    nodes: list[NodeHealth] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def exit_code(self, warnings_fail: bool = False) -> int:
        """1 a failure (or, with ``warnings_fail``, a warning); else 2 a node unknown;
        else 0."""
        bad = ("failure", "warning") if warnings_fail else ("failure",)
        if any(n.status in bad for n in self.nodes):
            return 1
        return 2 if not self.nodes or any(n.status == "unknown" for n in self.nodes) else 0

    def counts(self, fleet: str) -> dict[str, int]:
        mine = [n for n in self.nodes if n.fleet == fleet]
        return {f"{s}_nodes": sum(1 for n in mine if n.status == s)
                for s in ("failure", "warning", "unknown")}


def fleet_nodes(outputs: Mapping[str, Any], only: Sequence[str] = ()
                ) -> dict[str, list[tuple[str, str]]]:
    """(node, address) per fleet of the stack outputs that has nodes, as the SSH fleet file
    names them (public addresses for a public fleet, private ones otherwise)."""
    out: dict[str, list[tuple[str, str]]] = {}
    for name, value in sorted(outputs.items()):
        if not isinstance(value, Mapping) or not isinstance(value.get("nodes"), list):
            continue
        if only and name not in only:
            continue
        key = "public_ip" if value.get("public_ips") else "private_ip"
        nodes = [(str(n.get("name")), str(n.get(key) or "")) for n in value["nodes"]
                 if isinstance(n, Mapping)]
        if nodes:
            out[name] = nodes
    return out


def _when(value: Any) -> dt.datetime:
    if not isinstance(value, str):
        raise ValueError(value)
    when = dt.datetime.fromisoformat(value)
    return when if when.tzinfo is not None else when.replace(tzinfo=dt.UTC)


def _post(post: Post, server: Server, path: str, body: Mapping[str, Any]) -> Any:
    status, answer = post(server.url + path, body, server.token)
    if status in (401, 403):
        raise ServerError(f"the dstack server at {server.url} refuses the token from "
                          f"{server.source} (HTTP {status})")
    if status != 200:
        raise ServerError(f"the dstack server at {server.url} answers HTTP {status} to "
                          f"{path.split('/api/', 1)[-1]}")
    return answer


def _instances(post: Post, server: Server, fleet: str) -> dict[str, Mapping[str, Any]]:
    """The fleet's active instances by hostname; ServerError on an answer of another shape."""
    answer = _post(post, server, "/api/instances/list",
                   {"project_names": [fleet], "only_active": True, "limit": MAX_INSTANCES})
    if not isinstance(answer, list):
        raise ServerError(f"{server.url}: /api/instances/list answered no list")
    out: dict[str, Mapping[str, Any]] = {}
    for item in answer:
        if not (isinstance(item, Mapping) and isinstance(item.get("instance_num"), int)
                and not isinstance(item.get("instance_num"), bool)
                and isinstance(item.get("unreachable"), bool)
                and (item.get("hostname") is None or isinstance(item.get("hostname"), str))):
            raise ServerError(f"{server.url}: an instance of another shape than dstack "
                              "0.22.5's `Instance`")
        if item.get("fleet_name") == fleet and item.get("hostname"):
            out.setdefault(str(item["hostname"]), item)
    return out


def _checks(post: Post, server: Server, fleet: str, num: int) -> list[tuple[dt.datetime, str,
                                                                             tuple[str, ...]]]:
    path = f"/api/project/{urllib.parse.quote(fleet, safe='')}/instances/" \
           "get_instance_health_checks"
    answer = _post(post, server, path, {"fleet_name": fleet, "instance_num": num,
                                        "limit": CHECKS_PER_NODE})
    checks = answer.get("health_checks") if isinstance(answer, Mapping) else None
    if not isinstance(checks, list):
        raise ServerError(f"{server.url}: get_instance_health_checks answered no list")
    out = []
    for c in checks:
        try:
            status, events = c["status"], c["events"]
            if status not in STATUSES or not isinstance(events, list):
                raise ValueError(status)
            messages = tuple(str(e["message"])[:300] for e in events
                             if e.get("status") != "healthy")
            out.append((_when(c["collected_at"]), status, messages))
        except (KeyError, TypeError, ValueError, AttributeError):
            raise ServerError(f"{server.url}: a health check of another shape than dstack "
                              "0.22.5's `HealthCheck`") from None
    return sorted(out, key=lambda c: c[0], reverse=True)


def read_fleet_health(post: Post, server: Server, fleet: str, nodes: Sequence[tuple[str, str]],
               now: dt.datetime, max_age: dt.timedelta) -> list[NodeHealth]:
    """Each node of ``fleet`` as dstack's latest health check says (ServerError when the
    server cannot be asked: nothing about the fleet is then known)."""
    instances = _instances(post, server, fleet)
    out = []
    for node, address in nodes:
        inst = instances.get(address)
        if inst is None:
            out.append(NodeHealth(fleet, node, address, "unknown", why=(
                f"not an instance of dstack's fleet {fleet} (apply {fleet}.dstack.yml from "
                "`gpufleet export dstack`)")))
            continue
        if inst["unreachable"]:
            out.append(NodeHealth(fleet, node, address, "unknown",
                                  why="dstack cannot reach it (unreachable)"))
            continue
        checks = _checks(post, server, fleet, int(inst["instance_num"]))
        if not checks:
            out.append(NodeHealth(fleet, node, address, "unknown", why=(
                "dstack holds no health check for it: is DCGM's host engine answering on "
                "the host (the host setup's marker says)?")))
            continue
        latest, status, incidents = checks[0]
        if now - latest > max_age:
            out.append(NodeHealth(fleet, node, address, "unknown", why=(
                f"its latest health check is from {latest.isoformat(timespec='seconds')}, "
                f"older than {int(max_age.total_seconds() // 60)} min")))
            continue
        since = latest
        for when, s, _ in checks[1:]:
            if s != status:
                break
            since = when
        out.append(NodeHealth(fleet, node, address, status,
                              since.isoformat(timespec="seconds"), incidents,
                              instance_num=int(inst["instance_num"])))
    return out
