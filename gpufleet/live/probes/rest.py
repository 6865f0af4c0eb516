"""A JSON GET over an authenticated session, as the GCP and Azure probes read their clouds'
REST APIs. The session is :class:`BearerSession`: gpufleet's one HTTP client
(`gpufleet.outbound`: the token never follows a redirect to another origin, one deadline per
request, a cap on the answer's size, every transport error raised naming the server) with a
token the cloud's own credential library issues. Tests hand in a ``Get`` that answers from
recorded responses, or a session of their own."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

from gpufleet.live.preflight import ProbeError
from gpufleet.outbound import HttpError, Secret, loads_strict, request

# url -> (HTTP status, parsed JSON body)
Get = Callable[[str], tuple[int, Any]]
MAX_ANSWER = 64 * 1024 * 1024  # a region's Azure resource SKUs run to a few MB
MAX_PAGES = 100  # pages of one list: far past any answer that ends


@dataclass(frozen=True, slots=True)
class Answer:
    """What a session's request returns: the parts of a `requests` response gpufleet
    reads."""

    status_code: int
    headers: Mapping[str, str]
    content: bytes

    def json(self) -> Any:
        if not self.content:
            raise ValueError("no body")
        return loads_strict(self.content)


class BearerSession:
    """``get`` and ``post`` with a bearer token from ``token()`` (asked before each request,
    so the credential library may refresh it), through gpufleet's HTTP client."""

    def __init__(self, token: Callable[[], Secret], headers: Mapping[str, str] | None = None,
                 max_bytes: int = MAX_ANSWER) -> None:
        self._token, self._headers, self._max = token, dict(headers or {}), max_bytes

    def get(self, url: str, timeout: float = 30.0) -> Answer:
        return self._send("GET", url, None, timeout)

    def post(self, url: str, json: Any = None, timeout: float = 30.0) -> Answer:
        return self._send("POST", url, json, timeout)

    def put(self, url: str, json: Any = None, timeout: float = 30.0) -> Answer:
        return self._send("PUT", url, json, timeout)

    def _send(self, method: str, url: str, body: Any, timeout: float) -> Answer:
        headers = {"Accept": "application/json", **self._headers}
        data = None
        if body is not None:
            data = json.dumps(body, allow_nan=False).encode()
            headers["Content-Type"] = "application/json"
        try:
            resp = request(method, url, body=data, headers=headers, secret=self._token(),
                           timeout=timeout, max_bytes=self._max)
        except HttpError as e:
            raise ProbeError(f"{method} {_path(url)}: {e}") from None
        return Answer(resp.status, {k.title(): v for k, v in resp.headers.items()}, resp.body)


def _path(url: str) -> str:
    """The URL without its query, for messages."""
    return url.split("?", 1)[0][:200]


def session_get(session: Any, timeout: float = 30.0) -> Get:
    """A Get over a ``requests``-like session (a :class:`BearerSession`, or a test's)."""

    def get(url: str) -> tuple[int, Any]:
        try:
            resp = session.get(url, timeout=timeout)
        except ProbeError:
            raise
        except Exception as e:  # a test session's transport errors
            raise ProbeError(f"GET {_path(url)}: {type(e).__name__}: {e}") from None
        try:
            body = resp.json()
        except (ValueError, RecursionError):
            body = None
        return int(resp.status_code), body
    return get


def get_json(get: Get, url: str, cloud: str) -> Any | None:
    """The body of a 200 answer; None for 404; ProbeError for anything else."""
    status, body = get(url)
    if status == 200:
        return body
    if status == 404:
        return None
    message = ""
    if isinstance(body, dict):
        err = body.get("error")
        if isinstance(err, dict):
            message = str(err.get("message") or err.get("code") or "")
    raise ProbeError(f"{cloud}: GET {_path(url)} answered {status}"
                     + (f": {message}" if message else ""))


def pages(get: Get, url: str, cloud: str, follow: Callable[[dict[str, Any], str], str | None]
          ) -> Iterator[dict[str, Any]]:
    """Each page of a list, the first at ``url``; ``follow(page, first url)`` is the next
    page's URL (GCP's `nextPageToken`, Azure's `nextLink`), None at the end. Bounded, and a
    next page already read is refused: paging that never ends is an error, not a loop. A
    list the cloud does not know (404) has no pages."""
    seen = {url}
    current = url
    for _ in range(MAX_PAGES):
        page = get_json(get, current, cloud)
        if not isinstance(page, dict):
            return
        yield page
        nxt = follow(page, url)
        if not nxt:
            return
        if nxt in seen:
            raise ProbeError(f"{cloud}: {_path(url)} answered a next-page link or page token "
                             "it had given before: its paging does not end")
        seen.add(nxt)
        current = nxt
    raise ProbeError(f"{cloud}: {_path(url)} paged past {MAX_PAGES} pages")


def page_token(page: dict[str, Any], url: str) -> str | None:
    """The next page of a Google API list (`nextPageToken`)."""
    token = page.get("nextPageToken")
    if not isinstance(token, str) or not token:
        return None
    return url + ("&" if "?" in url else "?") + f"pageToken={quote(token)}"


def next_link(page: dict[str, Any], url: str) -> str | None:
    """The next page of an Azure Resource Manager list (`nextLink`)."""
    link = page.get("nextLink")
    return link if isinstance(link, str) and link else None
