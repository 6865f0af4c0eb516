"""The one HTTP client for every request gpufleet makes itself: the dstack server (`gateway
sync`), Lambda Cloud's API (preflight and the stack's dynamic provider), the GCP and Azure
REST reads (preflight, topology) and `catalog update`. Core: the standard library only.

What it guarantees, whoever calls it:
- A credential never crosses an origin. A redirect of a request that carries one (a bearer
  token, an API key) to another scheme, host or port is refused, not followed, and said so;
  an unauthenticated request follows at most ``MAX_REDIRECTS`` redirects and never from
  https down to http.
- One deadline for the whole request (connect, send, status line, headers and body), not one
  per read: a server that drips a byte a second is cut off when the deadline passes.
- A cap on the answer's size (its declared length checked first, then what is read).
- Every transport and protocol error (refused connection, TLS, a bad status line, a
  cut-off chunked body, a header line over 64 KiB, more than 100 headers) raised as
  :class:`HttpError`, whose message names the server and nothing secret.
- A secret is a :class:`Secret`: its value never appears in its ``repr``, it is checked for
  header safety before use (a trailing carriage return from a file saved with CRLF line ends
  is the usual culprit) with an error that names where it came from, and :func:`scrub` takes
  every secret this process has seen out of any text (the CLI passes every error through it,
  so a server that echoes a token back does not get it printed either).

Proxies: ``https_proxy`` / ``http_proxy`` / ``no_proxy`` as urllib reads them; an https
request goes through the proxy as a CONNECT tunnel (the credential inside TLS).
"""

from __future__ import annotations

import io
import json
import re
import threading
import time
import urllib.parse
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # the transport's modules load at the first request (the CLI starts fast)
    import http.client
    import socket

MAX_REDIRECTS = 5
DEFAULT_TIMEOUT = 30.0
DEFAULT_MAX_BYTES = 8 * 1024 * 1024
_HEADER_SAFE = re.compile(r"[\x21-\x7e]+")  # visible ASCII: what a token may hold
_SEEN: set[str] = set()  # every secret value this process was given (for scrub)
_SEEN_LOCK = threading.Lock()
_MIN_SCRUBBED = 4  # shorter values would blank out ordinary words


class HttpError(Exception):
    """A request that did not get a usable answer; the message names the server and holds
    no secret."""

    def __init__(self, message: str, retryable: bool = False) -> None:
        super().__init__(scrub(message))
        # True: the transport failed (connection, deadline, a malformed answer) and the same
        # request may fare better later; False: it would fail the same way (a refused
        # redirect, an answer too large, a bad URL or credential)
        self.retryable = retryable


class SecretError(HttpError):
    """A secret that cannot be sent (not header-safe, empty); nothing was sent."""


class Secret:
    """A credential with where it came from (``source``: `$DSTACK_TOKEN`, the stack config
    key, a file). ``str``/``repr`` show only the source."""

    __slots__ = ("_value", "source")

    def __init__(self, value: str, source: str) -> None:
        self._value = value
        self.source = source
        _remember(value)

    def reveal(self) -> str:
        return self._value

    def __repr__(self) -> str:
        return f"Secret(from {self.source})"  # str() falls back to it

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Secret) and other._value == self._value

    def __hash__(self) -> int:
        return hash(self._value)

    def header_value(self, scheme: str = "Bearer") -> str:
        """``scheme value`` for an Authorization header; SecretError when the value cannot
        travel in a header (the error names the source, never the value)."""
        value = self._value
        if not value:
            raise SecretError(f"the credential from {self.source} is empty")
        if not _HEADER_SAFE.fullmatch(value):
            why = ("it ends with a line end (a file saved with CRLF line ends?): remove it"
                   if value.rstrip("\r\n") != value else
                   "it holds white space or a control or non-ASCII character")
            raise SecretError(f"the credential from {self.source} cannot be sent in an HTTP "
                              f"header: {why}; its value is not shown")
        return f"{scheme} {value}" if scheme else value


def _remember(value: str) -> None:
    with _SEEN_LOCK:
        for v in {value, value.strip()}:
            if len(v) >= _MIN_SCRUBBED:
                _SEEN.add(v)


def scrub(text: str) -> str:
    """``text`` with every secret value this process has seen replaced by `***`."""
    if not _SEEN or not text:
        return text
    with _SEEN_LOCK:
        seen = sorted(_SEEN, key=len, reverse=True)
    for value in seen:
        if value in text:
            text = text.replace(value, "***")
    return text


@dataclass(frozen=True, slots=True)
class Response:
    status: int
    headers: Mapping[str, str]  # names in lower case
    body: bytes
    url: str  # where the answer came from (after same-origin redirects)

    def header(self, name: str) -> str | None:
        return self.headers.get(name.lower())


def origin(url: str) -> str:
    """scheme://host[:port] of ``url``, default ports left out: what a message names."""
    scheme, host, port = _origin_key(url)
    default = {"http": 80, "https": 443}.get(scheme)
    return f"{scheme}://{host}" + ("" if port == default else f":{port}")


def _origin_key(url: str) -> tuple[str, str, int | None]:
    parts = urllib.parse.urlsplit(url)
    scheme = parts.scheme.lower()
    try:
        port = parts.port or {"http": 80, "https": 443}.get(scheme)
    except ValueError:
        port = None
    return scheme, (parts.hostname or "").lower(), port


def request(method: str, url: str, *, body: bytes | None = None,
            headers: Mapping[str, str] | None = None, secret: Secret | None = None,
            auth_scheme: str = "Bearer", timeout: float = DEFAULT_TIMEOUT,
            max_bytes: int = DEFAULT_MAX_BYTES) -> Response:
    """Send one request and read the whole answer within ``timeout`` seconds in all; the
    answer is returned for any HTTP status (errors included). ``secret`` goes in the
    Authorization header (``auth_scheme value``). HttpError for everything else."""
    sent_headers = dict(headers or {})
    if secret is not None:
        sent_headers["Authorization"] = secret.header_value(auth_scheme)
    deadline = time.monotonic() + timeout
    current, verb, data = url, method.upper(), body
    for _ in range(MAX_REDIRECTS + 1):
        answer = _once(verb, current, data, sent_headers, deadline, timeout, max_bytes)
        location = answer.header("location")
        if answer.status not in (301, 302, 303, 307, 308) or not location:
            return answer
        target = urllib.parse.urljoin(current, location)
        _may_follow(current, target, secret is not None or "Authorization" in sent_headers)
        if answer.status == 303 or (answer.status in (301, 302) and verb == "POST"):
            verb, data = "GET", None
            sent_headers.pop("Content-Type", None)
        current = target
    raise HttpError(f"{origin(url)}: more than {MAX_REDIRECTS} redirects; not followed")


def _may_follow(current: str, target: str, authenticated: bool) -> None:
    was, now = _origin_key(current), _origin_key(target)
    if now[0] not in ("http", "https"):
        raise HttpError(f"{origin(current)} redirected to a {now[0] or 'relative'}: URL; not "
                        "followed")
    if authenticated and was != now:
        raise HttpError(
            f"{origin(current)} redirected a request that carries a credential to another "
            f"origin ({origin(target)}); not followed: gpufleet sends a credential only to "
            "the server it was given (if that origin is the server, name it directly)")
    if was[0] == "https" and now[0] == "http":
        raise HttpError(f"{origin(current)} redirected from https to http ({origin(target)});"
                        " not followed")


def _once(method: str, url: str, body: bytes | None, headers: Mapping[str, str],
          deadline: float, timeout: float, max_bytes: int) -> Response:
    import http.client
    import ssl

    where = origin(url)
    parts = urllib.parse.urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise HttpError(f"{url[:80]!r}: not an http:// or https:// URL")
    conn: http.client.HTTPConnection | None = None
    resp: http.client.HTTPResponse | None = None
    try:
        conn, target, extra = _connection(parts, deadline)
        conn.response_class = _deadline_response(deadline)
        conn.connect()
        _set_timeout(conn, deadline)
        conn.request(method, target, body=body, headers={**headers, **extra})
        _set_timeout(conn, deadline)
        resp = conn.getresponse()
        declared = resp.getheader("Content-Length")
        if declared and declared.isdigit() and int(declared) > max_bytes:
            raise HttpError(f"{where}: an answer of {int(declared):,} bytes, over the "
                            f"{max_bytes:,} gpufleet reads")
        raw = resp.read(max_bytes + 1)
        if len(raw) > max_bytes:
            raise HttpError(f"{where}: an answer over the {max_bytes:,} bytes gpufleet reads")
        names = {k.lower(): v for k, v in resp.getheaders()}
        return Response(int(resp.status), names, raw, url)
    except HttpError:
        raise
    except TimeoutError:
        raise HttpError(f"{where}: no whole answer within {timeout:g} s", True) from None
    except ssl.SSLError as e:
        raise HttpError(f"{where}: TLS failed ({e.reason or type(e).__name__})", True) from None
    except (http.client.IncompleteRead, http.client.LineTooLong,
            http.client.BadStatusLine, http.client.HTTPException) as e:
        raise HttpError(f"{where}: a malformed HTTP answer ({_what(e)})", True) from None
    except OSError as e:
        raise HttpError(f"{where}: cannot connect or read ({e.strerror or type(e).__name__})",
                        True) from None
    except (ValueError, UnicodeError) as e:
        raise HttpError(f"{where}: the request or answer is malformed ({type(e).__name__})"
                        ) from None
    finally:
        if resp is not None:
            resp.close()  # its file holds the socket open past the connection's close
        if conn is not None:
            conn.close()


def _what(e: Exception) -> str:
    """A protocol error's kind, without the bytes it quotes (they may be anything)."""
    import http.client

    kinds = {http.client.IncompleteRead: "the body is cut off",
             http.client.LineTooLong: "a header or status line is too long",
             http.client.BadStatusLine: "a bad status line"}
    for cls, text in kinds.items():
        if isinstance(e, cls):
            return text
    text = str(e)
    return "more than 100 headers" if "headers" in text else type(e).__name__


def _connection(parts: urllib.parse.SplitResult, deadline: float
                ) -> tuple[http.client.HTTPConnection, str, dict[str, str]]:
    """The connection to make (direct, or through the environment's proxy), the request
    target to send and the headers the proxy wants with it."""
    import http.client
    import ssl

    left = max(deadline - time.monotonic(), 0.001)
    host, port = parts.hostname or "", parts.port
    path = parts.path or "/"
    target = path + (f"?{parts.query}" if parts.query else "")
    proxy = _proxy_for(parts)
    if proxy is None:
        if parts.scheme == "https":
            return http.client.HTTPSConnection(host, port, timeout=left,
                                               context=ssl.create_default_context()), target, {}
        return http.client.HTTPConnection(host, port, timeout=left), target, {}
    p = urllib.parse.urlsplit(proxy)
    auth: dict[str, str] = {}
    if p.username:
        import base64

        pair = f"{urllib.parse.unquote(p.username)}:{urllib.parse.unquote(p.password or '')}"
        auth["Proxy-Authorization"] = "Basic " + base64.b64encode(pair.encode()).decode()
    if parts.scheme == "https":
        conn: http.client.HTTPConnection = http.client.HTTPSConnection(
            p.hostname or "", p.port or 8080, timeout=left,
            context=ssl.create_default_context())
        conn.set_tunnel(host, port or 443, headers=auth)
        return conn, target, {}
    conn = http.client.HTTPConnection(p.hostname or "", p.port or 8080, timeout=left)
    return conn, urllib.parse.urlunsplit(parts), auth


def _proxy_for(parts: urllib.parse.SplitResult) -> str | None:
    import urllib.request

    proxies = urllib.request.getproxies()
    proxy = proxies.get(parts.scheme)
    if not proxy or urllib.request.proxy_bypass(parts.hostname or ""):
        return None
    return proxy if "://" in proxy else f"http://{proxy}"


def _set_timeout(conn: http.client.HTTPConnection, deadline: float) -> None:
    left = deadline - time.monotonic()
    if left <= 0:
        raise TimeoutError
    if conn.sock is not None:
        conn.sock.settimeout(left)


class _DeadlineReader(io.RawIOBase):
    """A socket's bytes, each read bounded by what is left of the request's deadline."""

    def __init__(self, sock: socket.socket, deadline: float) -> None:
        # the socket's own raw file: it holds a reference, so the connection closing the
        # socket after the headers (Connection: close) leaves the body readable
        self._sock, self._raw, self._deadline = sock, sock.makefile("rb", buffering=0), \
            deadline

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        left = self._deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError
        self._sock.settimeout(left)
        got: int | None = self._raw.readinto(buffer)
        return got or 0

    def close(self) -> None:
        self._raw.close()
        super().close()


class _SockView:
    """What HTTPResponse asks of its socket: a file over it that keeps the deadline."""

    def __init__(self, sock: socket.socket, deadline: float) -> None:
        self._sock, self._deadline = sock, deadline

    def makefile(self, mode: str, *args: Any, **kwargs: Any) -> io.BufferedReader:
        return io.BufferedReader(_DeadlineReader(self._sock, self._deadline))


def _deadline_response(deadline: float) -> Any:
    import http.client

    def make(sock: socket.socket, *args: Any, **kwargs: Any) -> http.client.HTTPResponse:
        return http.client.HTTPResponse(_SockView(sock, deadline), *args,  # type: ignore[arg-type]
                                        **kwargs)
    return make


def loads_strict(raw: bytes | str) -> Any:
    """JSON as the standard allows it: NaN and Infinity (which Python's parser takes) are a
    ValueError, as any other text that is not JSON. The C parser bounds its own depth
    (RecursionError)."""
    return json.loads(raw, parse_constant=_no_constant)


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")
