"""lambda: a small client of Lambda Cloud's public REST API, for the components' dynamic
provider and `gpufleet preflight`. No Pulumi, no SDK, no stage of the core: gpufleet's one
HTTP client (`gpufleet.outbound`: no redirect to another origin with the key, one deadline per
request, the answer's size bounded before it is parsed) and json.

Following Lambda's OpenAPI document 1.10.0 (docs-api.lambda.ai/api/cloud): requests carry the
API key as a Bearer header; a success is `{"data": ...}`, a failure `{"error": {"code",
"message", "suggestion"?}}`. Lambda allows one request per second and one launch per 12
seconds: every request of this process waits its turn (a lock and a clock shared by all
clients), and a 429 or a 5xx answer is retried with a growing back-off (its Retry-After when
it gives one), a bounded number of times. The key is never logged or put in an error.
"""

from __future__ import annotations

import json
import os
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from gpufleet.outbound import HttpError, Secret, loads_strict, request, scrub

BASE_URL = "https://cloud.lambda.ai/api/v1"
ENV_KEY = "LAMBDA_API_KEY"
ENV_URL = "LAMBDA_API_URL"  # another endpoint (a test's fake of the API)
REQUEST_SPACING = 1.0  # seconds between two requests (Lambda: one per second)
LAUNCH_SPACING = 12.0  # seconds between two launches (Lambda: one per 12 seconds)
RETRIES = 5
MAX_BACKOFF = 60.0
MAX_ANSWER = 8 * 1024 * 1024  # an instance list of a large account stays far below
ACTIVE_WAIT = 1800.0  # how long a launch may take to become `active` (seconds)
POLL = 10.0
CAPACITY_ERROR = "instance-operations/launch/insufficient-capacity"
FIND_TRIES = 3  # looks for a launched instance by name before a launch is sent again
GONE_AFTER = 3  # consecutive 404s while booting before an instance counts as gone


class LambdaError(Exception):
    """A failed request: the HTTP status (0: none), Lambda's error code and message."""

    def __init__(self, status: int, code: str, message: str, suggestion: str = "") -> None:
        code, message, suggestion = scrub(code), scrub(message), scrub(suggestion)
        self.status, self.code, self.message, self.suggestion = status, code, message, \
            suggestion
        super().__init__(f"Lambda API: {code or status}: {message}"
                         + (f" ({suggestion})" if suggestion else ""))


class Clock(Protocol):
    def now(self) -> float: ...
    def sleep(self, seconds: float) -> None: ...


class SystemClock:
    def now(self) -> float:
        return time.monotonic()

    def sleep(self, seconds: float) -> None:
        time.sleep(seconds)


@dataclass
class Pacer:
    """When this process may send its next request, and its next launch."""

    clock: Clock = field(default_factory=SystemClock)
    spacing: float = REQUEST_SPACING
    launch_spacing: float = LAUNCH_SPACING
    last: float | None = None
    last_launch: float | None = None
    lock: threading.Lock = field(default_factory=threading.Lock)

    def wait(self, launch: bool) -> None:
        with self.lock:
            due = max(self._due(self.last, self.spacing),
                      self._due(self.last_launch, self.launch_spacing) if launch else 0.0)
            now = self.clock.now()
            if due > now:
                self.clock.sleep(due - now)
            self.last = self.clock.now()
            if launch:
                self.last_launch = self.last

    @staticmethod
    def _due(last: float | None, spacing: float) -> float:
        return 0.0 if last is None else last + spacing


PACER = Pacer()  # the process's one: Lambda's limits are per account


@dataclass
class Listing:
    """The account's instances as GET /instances last answered, shared by every client of
    this process: one request a poll tells every booting instance of a `pulumi up` its
    status (a request per instance would spend Lambda's one request a second that the
    launches need)."""

    answers: dict[str, tuple[float, dict[str, dict[str, Any]]]] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def instances(self, client: LambdaApi, max_age: float) -> dict[str, dict[str, Any]]:
        """The listed instances by id, asked again when the last answer is ``max_age`` old;
        one thread asks while the others wait for its answer."""
        with self.lock:
            at, by_id = self.answers.get(client.base, (None, {}))
            if at is None or client.pacer.clock.now() - at >= max_age:
                by_id = {str(i.get("id")): i for i in client.list("/instances")}
                self.answers[client.base] = (client.pacer.clock.now(), by_id)
            return by_id


LISTING = Listing()

# (method, url, headers, body, timeout) -> (status, headers, body) for any HTTP answer;
# HttpError when there is none
Transport = Callable[[str, str, Mapping[str, str], bytes | None, float],
                     tuple[int, Mapping[str, str], bytes]]


def http_transport(method: str, url: str, headers: Mapping[str, str], body: bytes | None,
                   timeout: float) -> tuple[int, Mapping[str, str], bytes]:
    """One request through gpufleet's HTTP client."""
    resp = request(method, url, body=body, headers=headers, timeout=timeout,
                   max_bytes=MAX_ANSWER)
    return resp.status, resp.headers, resp.body


@dataclass
class LambdaApi:
    key: Secret = field(repr=False)
    base: str = BASE_URL
    pacer: Pacer = field(default_factory=lambda: PACER)
    listing: Listing = field(default_factory=lambda: LISTING)
    transport: Transport = http_transport
    timeout: float = 30.0
    retries: int = RETRIES

    @classmethod
    def from_env(cls, key: str | None = None) -> LambdaApi:
        """A client with ``key`` (the stack config's), else $LAMBDA_API_KEY; a LambdaError
        when there is neither, or when the key cannot travel in a header (the error names
        where it came from, never its value)."""
        secret = Secret(key, "the stack config secret `gpufleet:lambdaApiKey`") if key else \
            Secret(os.environ[ENV_KEY], f"${ENV_KEY}") if os.environ.get(ENV_KEY) else None
        if secret is None:
            raise LambdaError(0, "missing-api-key", "no Lambda API key: set the stack config "
                              "secret `gpufleet:lambdaApiKey` or $LAMBDA_API_KEY")
        try:
            secret.header_value()
        except HttpError as e:
            raise LambdaError(0, "bad-api-key", str(e)) from None
        return cls(secret, os.environ.get(ENV_URL) or BASE_URL)

    # --- one request ------------------------------------------------------------------------

    def call(self, method: str, path: str, body: Mapping[str, Any] | None = None,
             launch: bool = False, lost: Callable[[], Any] | None = None) -> Any:
        """The `data` of a successful answer; LambdaError otherwise (after the retries a
        429, a 5xx or a dropped connection get). ``lost``: for a request that must not be
        sent twice blindly (a launch has no idempotency token): asked, when an answer is lost
        (no answer, a 5xx), for the `data` the request would have answered; what it finds is
        returned, and only when it finds nothing is the request sent again."""
        delay = 1.0
        for attempt in range(self.retries + 1):
            self.pacer.wait(launch)
            failure: HttpError | None = None
            try:
                status, headers, raw = self.transport(method, f"{self.base}{path}",
                                                      self._headers(body is not None),
                                                      self._body(body), self.timeout)
            except HttpError as e:
                if not e.retryable:
                    raise LambdaError(0, "connection", f"{method} {path}: {e}") from None
                status, headers, raw, failure = 0, {}, b"", e
            if status == 429 or status >= 500 or status == 0:
                unknown = lost is not None and status != 429  # it may have been done
                found = lost() if unknown and lost is not None else None
                if found is not None:
                    return found
                if attempt < self.retries:
                    self.pacer.clock.sleep(min(_retry_after(headers) or delay, MAX_BACKOFF))
                    delay = min(delay * 2, MAX_BACKOFF)
                    continue
                if unknown:
                    raise LambdaError(status, "answer-lost", f"{method} {path}: no answer "
                                      f"after {attempt + 1} tries")
                if failure is not None:
                    raise LambdaError(0, "connection", f"{method} {path}: {failure}")
            return self._answer(method, path, status, raw)
        raise AssertionError("unreachable")  # the loop returns or raises

    def _headers(self, has_body: bool) -> dict[str, str]:
        try:
            auth = self.key.header_value()
        except HttpError as e:
            raise LambdaError(0, "bad-api-key", str(e)) from None
        headers = {"Authorization": auth, "Accept": "application/json"}
        if has_body:
            headers["Content-Type"] = "application/json"
        return headers

    @staticmethod
    def _body(body: Mapping[str, Any] | None) -> bytes | None:
        return None if body is None else json.dumps(body, allow_nan=False).encode()

    def _answer(self, method: str, path: str, status: int, raw: bytes) -> Any:
        if len(raw) > MAX_ANSWER:
            raise LambdaError(status, "answer-too-large", f"{method} {path}: more than "
                              f"{MAX_ANSWER:,} bytes")
        try:
            doc = loads_strict(raw) if raw else {}
        except (ValueError, RecursionError) as e:
            raise LambdaError(status, "bad-answer", f"{method} {path}: HTTP {status}, not "
                              f"JSON ({type(e).__name__})") from None
        if 200 <= status < 300 and isinstance(doc, dict) and "data" in doc:
            return doc["data"]
        err = doc.get("error") if isinstance(doc, dict) else None
        if isinstance(err, dict):
            raise LambdaError(status, str(err.get("code") or ""), str(err.get("message") or ""),
                              str(err.get("suggestion") or ""))
        raise LambdaError(status, "bad-answer", f"{method} {path}: HTTP {status} without a "
                          "Lambda answer")

    # --- what the stack and preflight use ---------------------------------------------------

    def instance_types(self) -> dict[str, Any]:
        data: dict[str, Any] = self.call("GET", "/instance-types")
        return data

    def launch(self, body: Mapping[str, Any]) -> str:
        """Launch one instance; its id. A launch has no idempotency token, so one whose
        answer is lost (a timeout, a dropped connection, a 5xx) is never sent again blindly:
        the instance is looked for by its unique name first and adopted when Lambda has it;
        only when it is not there after ``FIND_TRIES`` looks is the launch sent again. A 429
        launched nothing and is retried as any request is."""
        name = str(body.get("name") or "")

        def adopted() -> dict[str, Any] | None:
            found = self._adopt(name)
            return None if found is None else {"instance_ids": [found]}
        try:
            data = self.call("POST", "/instance-operations/launch", body, launch=True,
                             lost=adopted)
        except LambdaError as e:
            if e.code != "answer-lost":
                raise
            raise LambdaError(e.status, "launch-unknown", f"{e.message} and no instance named "
                              f"{name!r} appeared: check Lambda's console for it") from None
        return str(data["instance_ids"][0])

    def _adopt(self, name: str) -> str | None:
        """The id of the one instance named ``name`` (a launch whose answer was lost), looked
        for ``FIND_TRIES`` times; None when there is none. Without a name there is nothing
        to look for: the launch is not sent again."""
        if not name:
            raise LambdaError(0, "launch-unknown", "a launch without a name lost its answer; "
                              "it is not sent again (an instance may have started): check "
                              "Lambda's console")
        for look in range(FIND_TRIES):
            if look:
                self.pacer.clock.sleep(POLL)
            try:
                named = [i for i in self.list("/instances") if i.get("name") == name
                         and i.get("status") not in ("terminated", "terminating")]
            except LambdaError:
                continue
            if len(named) > 1:
                raise LambdaError(0, "launch-twice", f"{len(named)} instances are named "
                                  f"{name!r} ({', '.join(str(i.get('id')) for i in named)}): "
                                  "terminate the extra ones in Lambda's console")
            if named:
                return str(named[0].get("id"))
        return None

    def instance(self, instance_id: str) -> dict[str, Any] | None:
        """The instance, or None when Lambda no longer knows it."""
        try:
            data: dict[str, Any] = self.call("GET", f"/instances/{instance_id}")
        except LambdaError as e:
            if e.status == 404:
                return None
            raise
        return data

    def rename(self, instance_id: str, name: str) -> dict[str, Any]:
        data: dict[str, Any] = self.call("POST", f"/instances/{instance_id}", {"name": name})
        return data

    def terminate(self, instance_ids: Sequence[str]) -> None:
        try:
            self.call("POST", "/instance-operations/terminate",
                      {"instance_ids": list(instance_ids)})
        except LambdaError as e:
            if e.status != 404:  # already gone
                raise

    def wait_active(self, instance_id: str, timeout: float = ACTIVE_WAIT,
                    poll: float = POLL) -> dict[str, Any]:
        """Poll a launched instance until it is `active`; a LambdaError when it ends in
        another state or the wait runs out (the error names the instance). Each poll reads
        the process's shared instance list (``Listing``); an instance it does not hold (a
        launch listed late, or gone) is asked for by id."""
        clock = self.pacer.clock
        deadline = clock.now() + timeout
        missing, status = 0, "unknown"
        while True:
            try:
                listed = self.listing.instances(self, poll).get(instance_id)
                found: dict[str, Any] | bool | None = \
                    listed if listed is not None else self.instance(instance_id)
            except LambdaError as e:
                # an outage or a garbled answer says nothing of the instance: keep waiting
                if not (e.status == 0 or e.status >= 500 or e.code == "bad-answer"):
                    raise
                found = False
            if found is None:  # 404: Lambda may list a launch late; gone only if it stays so
                missing += 1
                if missing >= GONE_AFTER:
                    raise LambdaError(0, "launch-failed", f"instance {instance_id} was not "
                                      f"found {GONE_AFTER} times while it booted")
            elif isinstance(found, dict):
                missing, status = 0, str(found.get("status"))
                if status == "active":
                    return found
                if status in ("terminated", "terminating", "preempted", "unhealthy"):
                    raise LambdaError(0, "launch-failed", f"instance {instance_id} became "
                                      f"{status} before it was active")
            if clock.now() >= deadline:
                raise LambdaError(0, "launch-timeout", f"instance {instance_id} was not "
                                  f"active after {timeout:.0f} s (status {status})")
            clock.sleep(poll)

    def list(self, path: str) -> list[dict[str, Any]]:
        data = self.call("GET", path)
        return [d for d in data if isinstance(d, dict)] if isinstance(data, list) else []

    def delete(self, path: str) -> None:
        """DELETE, a 404 (already gone) included."""
        try:
            self.call("DELETE", path)
        except LambdaError as e:
            if e.status != 404:
                raise


def _retry_after(headers: Mapping[str, str]) -> float | None:
    value = next((v for k, v in headers.items() if k.lower() == "retry-after"), None)
    try:
        return float(value) if value is not None else None
    except ValueError:
        return None
