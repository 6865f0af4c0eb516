"""A local fake of Lambda Cloud's public API on 127.0.0.1, for the dynamic provider's tests.

Every request the client sends and every answer the fake gives is validated against Lambda's
OpenAPI document, version 1.10.0 (tests/lambda/openapi-1.10.0.json, unchanged; source in
tests/lambda/README.md): a request body or an answer the document does not allow fails the
test that caused it (``Fake.violations``). Answers the document does not list (429 and 5xx:
Lambda's rate limit and outages) carry Lambda's error shape.

Faults are injected per route: ``fail(route, status, times)`` answers the next ``times``
requests of ``METHOD /path`` (ids as ``{id}``) with ``status``; ``never_active`` keeps launched
instances `booting`; ``active_after`` polls make an instance `active`.
"""

from __future__ import annotations

import itertools
import json
import re
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any

from hostile_http import served
from jsonschema import Draft202012Validator, validators
from referencing import Registry, Resource
from referencing.jsonschema import DRAFT202012

SPEC_PATH = Path(__file__).parent / "lambda" / "openapi-1.10.0.json"
SPEC: dict[str, Any] = json.loads(SPEC_PATH.read_text())
assert SPEC["info"]["version"] == "1.10.0"
_URI = "urn:lambda-openapi"
_REGISTRY = Registry().with_resource(_URI, Resource(SPEC, DRAFT202012))
KEY = "secret-test-key-0123456789"
_ERRORS = {400: "global/invalid-parameters", 401: "global/invalid-api-key",
           404: "global/object-does-not-exist", 409: "global/conflict",
           429: "global/too-many-requests", 500: "global/internal-error",
           503: "global/internal-error"}


def _pointer(*parts: str) -> str:
    return "/".join(p.replace("~", "~0").replace("/", "~1") for p in parts)


def _is_int(checker: Any, value: Any) -> bool:
    """As strict as the real API's types: 22.0 is a number, not an integer (JSON Schema
    alone would take it; a typed server does not)."""
    return isinstance(value, int) and not isinstance(value, bool)


_Strict = validators.extend(
    Draft202012Validator,
    type_checker=Draft202012Validator.TYPE_CHECKER.redefine("integer", _is_int))


def _validator(*parts: str) -> Any:
    return _Strict({"$ref": f"{_URI}#/{_pointer(*parts)}"}, registry=_REGISTRY)


def _route(method: str, path: str) -> tuple[str, dict[str, str]] | None:
    """The document's path template for a request path, and the path's parameters."""
    for template in SPEC["paths"]:
        pattern = "^" + re.sub(r"\\\{(\w+)\\\}", r"(?P<\1>[^/]+)", re.escape(template)) + "$"
        m = re.match(pattern, path)
        if m and method.lower() in SPEC["paths"][template]:
            return template, m.groupdict()
    return None


@dataclass
class Fake:
    """The account's state and what the tests ask of the fake."""

    instances: dict[str, dict[str, Any]] = field(default_factory=dict)
    keys: dict[str, dict[str, Any]] = field(default_factory=dict)
    rulesets: dict[str, dict[str, Any]] = field(default_factory=dict)
    filesystems: dict[str, dict[str, Any]] = field(default_factory=dict)
    requests: list[tuple[str, str, Any]] = field(default_factory=list)
    violations: list[str] = field(default_factory=list)
    faults: dict[str, list[int]] = field(default_factory=dict)
    lost: dict[str, list[int]] = field(default_factory=dict)  # done, answer lost
    garbled: dict[str, int] = field(default_factory=dict)  # answers that are not JSON
    capacity: dict[str, list[str]] = field(default_factory=dict)
    global_rules: list[dict[str, Any]] = field(default_factory=list)  # the account-wide rules
    never_active: bool = False
    active_after: int = 1  # GETs of a booting instance before it is active
    # or, with a clock: seconds from launch to active (a real boot: polls do not hurry it)
    boot_seconds: float | None = None
    clock: Callable[[], float] | None = None
    launched_at: dict[str, float] = field(default_factory=dict)
    unlisted: int = 0  # the next lists leave out every booting instance (listed late)
    in_use_deletes: int = 0  # DELETEs of a ruleset/filesystem answered "in use" first
    polls: dict[str, int] = field(default_factory=dict)
    ids: Iterator[int] = field(default_factory=lambda: itertools.count(1))
    lock: threading.Lock = field(default_factory=threading.Lock)

    def fail(self, route: str, status: int, times: int = 1) -> None:
        self.faults.setdefault(route, []).extend([status] * times)

    def lose(self, route: str, status: int, times: int = 1) -> None:
        """The next ``times`` requests of ``route`` are carried out, and answered ``status``
        (a launch that happened though its answer said otherwise)."""
        self.lost.setdefault(route, []).extend([status] * times)

    def garble(self, route: str, times: int = 1) -> None:
        self.garbled[route] = self.garbled.get(route, 0) + times

    def new_id(self, kind: str) -> str:
        """32 hex digits, as Lambda's ids; the first says the kind (a, b, c, d)."""
        return f"{kind}{next(self.ids):031x}"

    # --- validation ------------------------------------------------------------------------

    def check_request(self, template: str, method: str, body: Any) -> list[str]:
        """The request's violations of the document (recorded, and answered 400 as the
        API answers a request its types refuse)."""
        op = SPEC["paths"][template][method.lower()]
        if "requestBody" not in op:
            found = [f"{method} {template}: a body the document has none for"] \
                if body is not None else []
        else:
            v = _validator("paths", template, method.lower(), "requestBody", "content",
                           "application/json", "schema")
            found = [f"{method} {template} request: {e.message}" for e in v.iter_errors(body)]
        self.violations += found
        return found

    def check_answer(self, template: str, method: str, status: int, doc: Any) -> None:
        responses = SPEC["paths"][template][method.lower()]["responses"]
        if str(status) in responses:
            v = _validator("paths", template, method.lower(), "responses", str(status),
                           "content", "application/json", "schema")
            errors = [e.message for e in v.iter_errors(doc)]
        else:  # 429 and 5xx: Lambda's error shape
            err = doc.get("error") if isinstance(doc, dict) else None
            errors = [] if isinstance(err, dict) and {"code", "message"} <= set(err) else \
                ["not Lambda's error shape"]
        self.violations += [f"{method} {template} answer {status}: {m}" for m in errors]


class _Handler(BaseHTTPRequestHandler):
    fake: Fake

    def log_message(self, *args: Any) -> None:  # quiet
        pass

    def _serve(self, method: str) -> None:
        fake = self.fake
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        body = json.loads(raw) if raw else None
        path = self.path.removeprefix("/api/v1")
        found = _route(method, "/api/v1" + path)
        with fake.lock:
            fake.requests.append((method, path, body))
            if found is None:
                fake.violations.append(f"{method} {self.path}: not in the document")
                return self._send(None, method, 404, _error(404, "no such path"))
            template, params = found
            refused = fake.check_request(template, method, body)
            if self.headers.get("Authorization") != f"Bearer {KEY}":
                return self._send(template, method, 401, {"error": {
                    "code": "global/invalid-api-key", "message": "API key was invalid",
                    "suggestion": "Check your API key or create a new one, then try again."}})
            route = f"{method} {re.sub(r'/[0-9a-f]{32}', '/{id}', path)}"
            if refused:
                return self._send(template, method, 400, _error(400, refused[0][:300]))
            queued = fake.faults.get(route)
            if queued:
                status = queued.pop(0)
                return self._send(template, method, status, _error(status, "injected"))
            status, doc = _act(fake, method, template.removeprefix("/api/v1"), params, body)
            if fake.lost.get(route):
                status = fake.lost[route].pop(0)
                return self._send(template, method, status, _error(status, "lost"))
            if fake.garbled.get(route):
                fake.garbled[route] -= 1
                return self._raw(b"<html>502 Bad Gateway</html>")
            self._send(template, method, status, doc)

    def _raw(self, data: bytes) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/html")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _send(self, template: str | None, method: str, status: int, doc: Any) -> None:
        if template is not None:
            self.fake.check_answer(template, method, status, doc)
        data = json.dumps(doc).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        if status == 429:
            self.send_header("Retry-After", "2")
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self) -> None:
        self._serve("GET")

    def do_POST(self) -> None:
        self._serve("POST")

    def do_PATCH(self) -> None:
        self._serve("PATCH")

    def do_DELETE(self) -> None:
        self._serve("DELETE")


def _error(status: int, message: str, code: str | None = None) -> dict[str, Any]:
    return {"error": {"code": code or _ERRORS.get(status, "global/unknown"),
                      "message": message}}


def _region(name: str) -> dict[str, str]:
    return {"name": name, "description": f"region {name}"}


_USER = {"id": "u1", "email": "team@example.com", "status": "active"}
_TYPES = {"gpu_8x_h100_sxm5": ("8x H100 (80 GB SXM5)", 2392, 208, 1800, 8),
          "gpu_1x_a10": ("1x A10 (24 GB PCIe)", 75, 30, 200, 1)}


def _act(fake: Fake, method: str, path: str, params: dict[str, str], body: Any
         ) -> tuple[int, Any]:
    """What Lambda does, for the routes gpufleet uses."""
    i = params.get("id", "")
    if (method, path) == ("GET", "/instance-types"):
        return 200, {"data": {name: {
            "instance_type": {"name": name, "description": d, "gpu_description": d[3:],
                              "price_cents_per_hour": c, "specs": {
                                  "vcpus": v, "memory_gib": m, "storage_gib": 1000, "gpus": g}},
            "regions_with_capacity_available": [_region(r) for r in fake.capacity.get(name, [])]}
            for name, (d, c, v, m, g) in _TYPES.items()}}
    if (method, path) == ("POST", "/ssh-keys"):
        if any(k["name"] == body["name"] for k in fake.keys.values()):
            return 400, _error(400, "SSH key name already in use")
        key = {"id": fake.new_id("b"), "name": body["name"], "public_key": body["public_key"]}
        fake.keys[key["id"]] = key
        return 200, {"data": key}
    if (method, path) == ("GET", "/ssh-keys"):
        return 200, {"data": list(fake.keys.values())}
    if (method, path) == ("DELETE", "/ssh-keys/{id}"):
        return (200, {"data": {}}) if fake.keys.pop(i, None) else \
            (404, _error(404, "no such key"))
    if path.startswith("/firewall-rulesets"):
        return _rulesets(fake, method, path, i, body)
    if path in ("/filesystems", "/file-systems", "/filesystems/{id}"):
        return _filesystems(fake, method, path, i, body)
    return _instances(fake, method, path, i, body)


def _in_use(fake: Fake, code: str, what: str) -> tuple[int, Any] | None:
    if fake.in_use_deletes:
        fake.in_use_deletes -= 1
        return 400, {"error": {"code": code, "message": f"{what} is in use",
                               "suggestion": "Terminate the instances using it first."}}
    return None


def _rulesets(fake: Fake, method: str, path: str, i: str, body: Any) -> tuple[int, Any]:
    if path == "/firewall-rulesets/global" or i == "global":
        return 200, {"data": {"id": "global", "name": "Default Workspace Global Rules",
                              "rules": fake.global_rules}}
    if (method, path) == ("POST", "/firewall-rulesets"):
        rs = {"id": fake.new_id("c"), "name": body["name"], "region": _region(body["region"]),
              "rules": body["rules"], "created": "2026-11-26T12:00:00Z", "instance_ids": []}
        fake.rulesets[rs["id"]] = rs
        return 200, {"data": rs}
    rs = fake.rulesets.get(i)
    if rs is None:
        return 404, {"error": {"code": "firewall-rulesets/firewall-ruleset-not-found",
                               "message": "Firewall ruleset not found"}}
    if method == "GET":
        return 200, {"data": rs}
    if method == "PATCH":
        rs.update({k: body[k] for k in ("name", "rules") if k in body})
        return 200, {"data": rs}
    busy = _in_use(fake, "firewall-rulesets/firewall-ruleset-in-use", "the ruleset")
    if busy:
        return busy
    del fake.rulesets[i]
    return 200, {"data": {}}


def _filesystems(fake: Fake, method: str, path: str, i: str, body: Any) -> tuple[int, Any]:
    if method == "POST":
        fs = {"id": fake.new_id("d"), "name": body["name"],
              "mount_point": f"/lambda/nfs/{body['name']}", "created": "2026-11-26T12:00:00Z",
              "created_by": _USER, "is_in_use": False, "region": _region(body["region"])}
        fake.filesystems[fs["id"]] = fs
        return 200, {"data": fs}
    if method == "GET":
        return 200, {"data": list(fake.filesystems.values())}
    if i not in fake.filesystems:
        return 404, {"error": {"code": "filesystems/filesystem-not-found",
                               "message": "Filesystem not found"}}
    busy = _in_use(fake, "filesystems/filesystem-in-use", "the filesystem")
    if busy:
        return busy
    del fake.filesystems[i]
    return 200, {"data": {"deleted_ids": [i]}}


def _instances(fake: Fake, method: str, path: str, i: str, body: Any) -> tuple[int, Any]:
    if (method, path) == ("GET", "/instances"):  # running ones: terminated are not listed
        listed = [x for x in fake.instances.values() if x["status"] not in ("terminated",)
                  and not (fake.unlisted and x["status"] == "booting")]
        fake.unlisted = max(0, fake.unlisted - 1)
        for x in listed:
            _poll(fake, x)
        return 200, {"data": listed}
    if (method, path) == ("POST", "/instance-operations/launch"):
        if body["instance_type_name"] not in _TYPES:
            return 404, {"error": {"code": "global/object-does-not-exist",
                                   "message": "Instance type not found"}}
        new = fake.new_id("a")
        if fake.clock is not None:
            fake.launched_at[new] = fake.clock()
        fake.instances[new] = {
            "id": new, "name": body.get("name", ""), "status": "booting",
            "ssh_key_names": body["ssh_key_names"],
            "file_system_names": [], "region": _region(body["region_name"]),
            "instance_type": {"name": body["instance_type_name"], "description": "x",
                              "gpu_description": "x", "price_cents_per_hour": 1,
                              "specs": {"vcpus": 1, "memory_gib": 1, "storage_gib": 1,
                                        "gpus": 1}},
            "actions": {a: {"available": True} for a in (
                "migrate", "rebuild", "restart", "cold_reboot", "terminate")},
            "tags": body.get("tags", []),
            "firewall_rulesets": body.get("firewall_rulesets", [])}
        return 200, {"data": {"instance_ids": [new]}}
    if (method, path) == ("POST", "/instance-operations/terminate"):
        gone = [fake.instances[x] for x in body["instance_ids"] if x in fake.instances]
        if len(gone) < len(body["instance_ids"]):
            return 404, {"error": {"code": "global/object-does-not-exist",
                                   "message": "Instance not found"}}
        for inst in gone:
            inst["status"] = "terminated"
        return 200, {"data": {"terminated_instances": gone}}
    inst = fake.instances.get(i)
    if inst is None:
        return 404, {"error": {"code": "global/object-does-not-exist",
                               "message": "Instance not found"}}
    if method == "POST":
        inst["name"] = body["name"]
    else:
        _poll(fake, inst)
    return 200, {"data": inst}


def _poll(fake: Fake, inst: dict[str, Any]) -> None:
    """A look at a booting instance: active after ``active_after`` looks, or once
    ``boot_seconds`` have passed on the fake's clock."""
    i = inst["id"]
    if inst["status"] != "booting" or fake.never_active:
        return
    fake.polls[i] = fake.polls.get(i, 0) + 1
    if fake.boot_seconds is not None and fake.clock is not None:
        booted = fake.clock() - fake.launched_at[i] >= fake.boot_seconds
    else:
        booted = fake.polls[i] >= fake.active_after
    if booted:
        n = int(i[1:], 16) % 250 + 1
        inst.update(status="active", ip=f"198.51.100.{n}", private_ip=f"10.19.0.{n}",
                    hostname=f"198-51-100-{n}")


@contextmanager
def serve(fake: Fake) -> Iterator[str]:
    """The fake on a free port of 127.0.0.1; yields its base URL (…/api/v1)."""
    with served(type("Handler", (_Handler,), {"fake": fake})) as url:
        yield url + "/api/v1"
