"""A JSON GET over an authenticated HTTP session, as the GCP and Azure probes read their
clouds' REST APIs. Tests hand in a ``Get`` that answers from recorded responses."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from gpufleet.live.preflight import ProbeError

# url -> (HTTP status, parsed JSON body)
Get = Callable[[str], tuple[int, Any]]


def session_get(session: Any, timeout: float = 30.0) -> Get:
    """A Get over a ``requests``-like session (google-auth's AuthorizedSession, or a
    requests.Session carrying an Azure bearer token)."""

    def get(url: str) -> tuple[int, Any]:
        try:
            resp = session.get(url, timeout=timeout)
        except Exception as e:  # requests' and google-auth's transport errors alike
            raise ProbeError(f"GET {url}: {type(e).__name__}: {e}") from None
        try:
            body = resp.json()
        except ValueError:
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
    raise ProbeError(f"{cloud}: GET {url} answered {status}" + (f": {message}" if message
                                                                  else ""))
