"""`gpufleet gateway sync`: where dstack runs each gateway, read from the dstack server, so
that the stack's `*.<domain>` records point at it.

dstack 0.22.5 creates a gateway itself at `dstack apply` and reports where it runs through
its REST API: `POST /api/project/{project}/gateways/get` with `{"name": ...}` answers a
`Gateway` whose `hostname` is its load balancer's host name or, without one, whose
`replicas[i].hostname` are the replicas' addresses ("users are expected to point the
gateway's wildcard domain name to `replicas[i].hostname`", dstack: core/models/gateways.py).
The server's URL and token come from `--url` and `$DSTACK_TOKEN`, `$DSTACK_SERVER_URL` and
`$DSTACK_TOKEN`, or dstack's own CLI config (`~/.dstack/config.yml`, written by `dstack
project add`); the token is sent as a bearer token and never printed.
"""

from __future__ import annotations

import dataclasses
import json
import urllib.parse
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from gpufleet.compile import gateway_project
from gpufleet.input import (
    Inputs,
    JsonInputError,
    LoadResult,
    SyncedError,
    SyncedGateway,
    check_targets,
    load_text,
    parse_json,
)
from gpufleet.live.runner import LiveError
from gpufleet.outbound import HttpError, Secret, origin, request
from gpufleet.review import Change, PropertyChange

# url, JSON body, bearer token -> (HTTP status, parsed JSON body or None)
Post = Callable[[str, Mapping[str, Any], Secret], tuple[int, Any]]
TIMEOUT = 15.0
MAX_ANSWER = 1 << 20  # a gateway's JSON is a few KB
STATUSES = ("submitted", "provisioning", "running", "failed")


class ServerError(LiveError):
    """The dstack server cannot be reached, or refuses gpufleet: nothing was read."""


@dataclass(frozen=True, slots=True)
class Server:
    url: str
    token: Secret = field(repr=False)
    source: str  # where the URL and token came from, for messages (never the token)


def find_server(project: str, url: str | None, env: Mapping[str, str],
                cli_config: str | None, cli_config_path: str) -> Server:
    """The server to ask about ``project``: ``url`` (with $DSTACK_TOKEN), else
    $DSTACK_SERVER_URL and $DSTACK_TOKEN, else the dstack CLI config's entry for the project,
    else its default entry (a user's token is good for every project of its server)."""
    token = env.get("DSTACK_TOKEN") or ""
    if url:
        if not token:
            raise ServerError("--url needs the server's token in $DSTACK_TOKEN (gpufleet takes "
                              "no token on the command line)")
        return Server(url.rstrip("/"), Secret(token, "$DSTACK_TOKEN"),
                      "--url and $DSTACK_TOKEN")
    if env.get("DSTACK_SERVER_URL"):
        if not token:
            raise ServerError("$DSTACK_SERVER_URL is set but $DSTACK_TOKEN is not")
        return Server(env["DSTACK_SERVER_URL"].rstrip("/"), Secret(token, "$DSTACK_TOKEN"),
                      "$DSTACK_SERVER_URL and $DSTACK_TOKEN")
    entries = _cli_projects(cli_config, cli_config_path)
    chosen = next((e for e in entries if e.get("name") == project), None) or \
        next((e for e in entries if e.get("default")), None)
    if chosen is None:
        raise ServerError(f"no dstack server for project {project}: run `dstack project add "
                          "--name NAME --url URL --token TOKEN` (dstack's CLI config, "
                          f"{cli_config_path}), or set $DSTACK_SERVER_URL and $DSTACK_TOKEN")
    where = f"{cli_config_path} (project {chosen.get('name')})"
    return Server(str(chosen["url"]).rstrip("/"),
                  Secret(str(chosen["token"]), f"the token in {where}"), where)


def _cli_projects(text: str | None, path: str) -> list[dict[str, Any]]:
    """The `projects` of dstack's CLI config that carry a URL and a token, read with
    gpufleet's bounded YAML reader (nesting, aliases and size are bounded)."""
    if text is None:
        return []
    loaded = LoadResult()
    load_text(path, text, loaded)
    if any(d.is_error for d in loaded.diagnostics):
        first = next(d for d in loaded.diagnostics if d.is_error)
        raise ServerError(f"{path}:{first.line}:{first.column}: {first.message}; `dstack "
                          "project add` rewrites the file")
    data = loaded.documents[0].data if loaded.documents else None
    projects = data.get("projects") if isinstance(data, dict) else None
    if not isinstance(projects, list):
        return []
    return [p for p in projects if isinstance(p, dict) and isinstance(p.get("url"), str)
            and isinstance(p.get("token"), str) and p["url"] and p["token"]]


def http_post(url: str, body: Mapping[str, Any], token: Secret) -> tuple[int, Any]:
    """POST JSON with the bearer token through gpufleet's one HTTP client (no redirect to
    another origin, one deadline, a size cap); (status, JSON body or None). Anything but
    an HTTP answer raises ServerError naming the server."""
    try:
        resp = request("POST", url, body=json.dumps(dict(body)).encode("utf-8"),
                       headers={"Content-Type": "application/json",
                                "Accept": "application/json"},
                       secret=token, timeout=TIMEOUT, max_bytes=MAX_ANSWER)
    except HttpError as e:
        raise ServerError(f"cannot reach the dstack server at {e}") from None
    return resp.status, _json(resp.body)


def _json(raw: bytes) -> Any:
    """The answer's JSON through gpufleet's bounded parser (depth, numbers); None when the
    body is not JSON (an HTML error page)."""
    if len(raw) > MAX_ANSWER:
        raise ServerError("the dstack server's answer is over 1 MB; not a gateway")
    try:
        return parse_json(raw, "the dstack server's answer", "a dstack answer")
    except JsonInputError:
        return None


@dataclass(frozen=True, slots=True)
class Wanted:
    """A gateway of the stack's files, as dstack should run it."""

    name: str
    project: str
    backend: str
    region: str
    scope: str | None = None  # the backend's account (an Azure subscription), when given


def wanted_gateways(inputs: Inputs) -> list[Wanted]:
    """The gateways of the stack's files, with the project each is applied in."""
    def scope(backend: str) -> str | None:
        config = inputs.backend(backend)
        value = config.settings.get("subscription_id") if config is not None else None
        return str(value) if value else None
    return [Wanted(g.name, gateway_project(g), g.backend, g.region, scope(g.backend))
            for g in inputs.gateways]


@dataclass(frozen=True, slots=True)
class Found:
    """What the server said of one gateway. ``outcome``: synced (``synced`` holds its
    targets), pending (dstack is still creating it), missing (not created yet), mismatch
    (another backend or region than the file), failed (dstack gave up on it)."""

    wanted: Wanted
    outcome: str
    detail: str
    synced: SyncedGateway | None = None


def read_gateway(post: Post, server: Server, wanted: Wanted, now: str) -> Found:
    """Ask the server about one gateway. ServerError when it cannot be asked at all."""
    project = urllib.parse.quote(wanted.project, safe="")
    url = f"{server.url}/api/project/{project}/gateways/get"
    status, body = post(url, {"name": wanted.name}, server.token)
    if status in (401, 403):
        raise ServerError(f"the dstack server at {origin(url)} refused the token from "
                          f"{server.source} (HTTP {status}): check the token, or that its user "
                          f"is a member of project {wanted.project}")
    if status == 404:
        raise ServerError(f"the dstack server at {origin(url)} has no project {wanted.project} "
                          "(HTTP 404): merge the server config `gpufleet export dstack` "
                          "wrote and restart the server")
    if status == 400 and _code(body) == "resource_not_exists":
        return Found(wanted, "missing", f"dstack has no gateway {wanted.name} in project "
                     f"{wanted.project} yet: `dstack apply --project {wanted.project} -f "
                     f"gateway-{wanted.name}.dstack.yml`")
    if status != 200:
        raise ServerError(f"the dstack server at {origin(url)} answered HTTP {status} for "
                          f"gateway {wanted.name}" + (f": {_message(body)}" if _message(body)
                                                      else ""))
    return judge(wanted, body, now)


def _code(body: Any) -> str | None:
    detail = body.get("detail") if isinstance(body, dict) else None
    items = detail if isinstance(detail, list) else [detail]
    return next((str(d["code"]) for d in items if isinstance(d, dict) and d.get("code")), None)


def _message(body: Any) -> str:
    detail = body.get("detail") if isinstance(body, dict) else None
    items = detail if isinstance(detail, list) else [detail]
    return "; ".join(str(d.get("msg")) for d in items if isinstance(d, dict) and d.get("msg"))


def judge(wanted: Wanted, body: Any, now: str) -> Found:
    """A `Gateway` answer -> what the record should point at, or why it cannot yet."""
    conf = body.get("configuration") if isinstance(body, dict) else None
    status = body.get("status") if isinstance(body, dict) else None
    replicas = body.get("replicas", []) if isinstance(body, dict) else None
    if not isinstance(conf, dict) or status not in STATUSES or not isinstance(replicas, list) \
            or body.get("name") != wanted.name:
        raise ServerError(f"the dstack server's answer for gateway {wanted.name} is not a "
                          "dstack gateway (no name, configuration, status or replicas)")
    place = (str(conf.get("backend")), str(conf.get("region")))
    if place != (wanted.backend, wanted.region):
        return Found(wanted, "mismatch", f"dstack's gateway {wanted.name} in project "
                     f"{wanted.project} runs on {place[0]} {place[1]}, the file asks for "
                     f"{wanted.backend} {wanted.region}: delete it in dstack "
                     f"(`dstack gateway --project {wanted.project} delete {wanted.name}`) "
                     "and apply the exported gateway file")
    if status == "failed":
        return Found(wanted, "failed", f"dstack's gateway {wanted.name} FAILED: "
                     f"{body.get('status_message') or 'no reason given'}")
    targets = _targets(body, replicas)
    if status != "running" or not targets:
        return Found(wanted, "pending", f"dstack's gateway {wanted.name} is {status} and "
                     "reports no address yet: run the sync again when it is running")
    try:
        checked = check_targets(list(targets), f"gateway {wanted.name}")
    except SyncedError as e:
        raise ServerError(f"the dstack server reported {e}") from None
    synced = SyncedGateway(wanted.project, wanted.backend, wanted.region, checked, status,
                           now)
    return Found(wanted, "synced", ", ".join(checked), synced)


def _targets(body: Mapping[str, Any], replicas: list[Any]) -> tuple[str, ...]:
    """The load balancer's host name, else the running replicas' addresses in order."""
    if body.get("hostname"):
        return (str(body["hostname"]),)
    running = sorted((r for r in replicas if isinstance(r, dict)
                      and r.get("status") == "running" and r.get("hostname")),
                     key=lambda r: r["replica_num"] if isinstance(r.get("replica_num"), int)
                     else 0)
    return tuple(str(r["hostname"]) for r in running)


@dataclass(frozen=True, slots=True)
class SyncReport:
    """Every gateway's answer, and the stack config's `gpufleet:gateways` before and after
    (an entry whose place and targets did not change is kept as it was)."""

    found: tuple[Found, ...]
    before: Mapping[str, SyncedGateway]
    after: Mapping[str, SyncedGateway]
    # the clouds' checks of dstack's gateway VMs: (gateway, "ok"|"blocked"|"unknown", detail)
    checks: tuple[tuple[str, str, str], ...] = ()

    @property
    def changed(self) -> bool:
        return self.before != self.after

    @property
    def problems(self) -> tuple[Found, ...]:
        return tuple(f for f in self.found if f.outcome != "synced")

    @property
    def blocked(self) -> bool:
        """A synced gateway the cloud says cannot be reached on 80/443."""
        return any(verdict == "blocked" for _, verdict, _ in self.checks)

    def lines(self) -> list[str]:
        out = []
        for f in self.found:
            old = self.before.get(f.wanted.name)
            moved = "" if f.synced is None or old is None or _same(old, f.synced) else \
                f" (was {', '.join(old.targets)})"
            new = "" if f.synced is None or old is not None else " (new)"
            out.append(f"gateway {f.wanted.name} (project {f.wanted.project}): {f.outcome}: "
                       f"{f.detail}{moved}{new}")
        gone = sorted(set(self.before) - set(self.after))
        out += [f"gateway {n}: not in the stack's files; its entry is dropped" for n in gone]
        out += [f"gateway {n}: {'BLOCKED' if v == 'blocked' else v}: {d}"
                for n, v, d in self.checks if v != "ok"]
        return out

    def to_json(self) -> dict[str, Any]:
        return {"gateways": [{"name": f.wanted.name, "project": f.wanted.project,
                              "outcome": f.outcome, "detail": f.detail,
                              "targets": list(f.synced.targets) if f.synced else None}
                             for f in self.found],
                "changed": self.changed,
                "checks": [{"gateway": n, "verdict": v, "detail": d}
                           for n, v, d in self.checks],
                "stack_config": {n: g.to_json() for n, g in sorted(self.after.items())}}


def _same(a: SyncedGateway, b: SyncedGateway) -> bool:
    return (a.project, a.backend, a.region, a.targets) == (b.project, b.backend, b.region,
                                                           b.targets)


def sync(wanted: list[Wanted], before: Mapping[str, SyncedGateway],
         server_for: Callable[[str], Server], post: Post, now: str) -> SyncReport:
    """Ask the server about every gateway of the files; ServerError (nothing to write) when
    one cannot be asked. What cannot be read as running keeps its previous entry."""
    names = {w.name for w in wanted}
    after = {n: g for n, g in before.items() if n in names}
    found = []
    for w in wanted:
        f = read_gateway(post, server_for(w.project), w, now)
        found.append(f)
        old = before.get(w.name)
        if f.synced is not None:
            after[w.name] = old if old is not None and _same(old, f.synced) else f.synced
    return SyncReport(tuple(found), dict(before), after)


def check_gateways(report: SyncReport, check_for: Callable[[str], Any]) -> SyncReport:
    """The report with each synced gateway's addresses checked by its backend's
    ``check_for(backend)`` (None: no check); a check that cannot be made says why."""
    out: list[tuple[str, str, str]] = []
    for f in report.found:
        check = check_for(f.wanted.backend) if f.synced is not None else None
        if check is None or f.synced is None or f.synced.is_hostname:
            continue
        for address in f.synced.targets:
            try:
                verdict, detail = check(f.wanted.scope, address)
            except LiveError as e:
                verdict, detail = "unknown", f"not checked: {e}"
            out.append((f.wanted.name, verdict, f"{address}: {detail}"))
    return dataclasses.replace(report, checks=tuple(out))


GATEWAY_RECORD = "gpufleet:gateway:Record"  # the change's type: the record of a gateway


def record_drift(report: SyncReport, stack: str) -> list[Change]:
    """Each gateway whose stored record no longer matches where dstack runs it (dstack
    recreated it, or it is gone), as a change of the drift report."""
    out = []
    for f in report.found:
        old = report.before.get(f.wanted.name)
        if old is None:
            continue  # never synced: the plan shows the record as pending
        if f.synced is not None and _same(old, f.synced):
            continue
        new = list(f.synced.targets) if f.synced is not None else None
        action = (f"run `gpufleet gateway sync --stack {stack}`, then `pulumi up`: the record "
                  "follows" if f.synced is not None else f"{f.detail}; the record points at "
                  "a gateway dstack no longer runs there")
        out.append(Change(f"gateway:{f.wanted.name}", GATEWAY_RECORD, "update",
                          "gateway moved" if f.synced is not None else f"gateway {f.outcome}",
                          f.wanted.name, None, "gpufleet gateway sync",
                          (PropertyChange("targets", list(old.targets), new, "update"),),
                          action))
    return out
