"""A hostile HTTP server on the loopback address, for the outbound client and every command
that talks to a server: it records what it was sent and answers with one behaviour chosen per
test (a redirect elsewhere, a bad status line, a cut-off chunked body, a 70 KB header, 150
headers, a slow drip, an error that echoes the Authorization header, a huge body).

Raw sockets, not http.server: most behaviours are answers no well-behaved server library
would write. Every connection is served on its own thread and bounded in time; the server
stops when the test's context ends. ``served`` runs a well-behaved one (http.server) the same
way, for the fakes that answer as a real service would."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

Behaviour = Callable[["Seen", socket.socket], None]


@dataclass
class Seen:
    """One request as the server read it."""

    method: str
    target: str
    headers: dict[str, str]
    body: bytes


@dataclass
class Hostile:
    url: str
    seen: list[Seen] = field(default_factory=list)

    def all_bytes(self) -> str:
        return "\n".join(f"{s.method} {s.target} {s.headers} {s.body!r}" for s in self.seen)


def _read_request(conn: socket.socket) -> Seen | None:
    conn.settimeout(5)
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = conn.recv(65536)
        if not chunk:
            return None
        data += chunk
    head, _, rest = data.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    method, target, _ = ([*lines[0].split(" ", 2), "", ""])[:3]
    headers = {}
    for line in lines[1:]:
        k, _, v = line.partition(":")
        headers[k.strip().lower()] = v.strip()
    length = int(headers.get("content-length", "0") or 0)
    while len(rest) < length:
        chunk = conn.recv(65536)
        if not chunk:
            break
        rest += chunk
    return Seen(method, target, headers, rest[:length])


@contextmanager
def hostile(behaviour: Behaviour) -> Iterator[Hostile]:
    """A server answering every request with ``behaviour(seen, connection)``."""
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind(("127.0.0.1", 0))
    listener.listen(16)
    server = Hostile(f"http://127.0.0.1:{listener.getsockname()[1]}")
    stop = threading.Event()

    def serve(conn: socket.socket) -> None:
        with conn:
            try:
                seen = _read_request(conn)
                if seen is None:
                    return
                server.seen.append(seen)
                behaviour(seen, conn)
            except OSError:
                pass

    def loop() -> None:
        while True:
            try:
                conn, _ = listener.accept()
            except OSError:
                return  # the listener was shut down
            if stop.is_set():
                conn.close()
                return
            threading.Thread(target=serve, args=(conn,), daemon=True).start()

    thread = threading.Thread(target=loop, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        # wake the blocked accept at once (a polling timeout cost every test its length)
        stop.set()
        try:
            listener.shutdown(socket.SHUT_RDWR)
        except OSError:
            socket.create_connection(listener.getsockname(), timeout=1).close()
        thread.join(5)
        assert not thread.is_alive(), "the hostile server's accept loop did not stop"
        listener.close()


@contextmanager
def served(handler: Callable[..., BaseHTTPRequestHandler]) -> Iterator[str]:
    """An http.server answering with ``handler`` on a free port of 127.0.0.1 until the
    context ends; yields its URL. It looks for its shutdown every 10 ms (``serve_forever``'s
    0.5 s default cost every test that started one half a second at its end)."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, args=(0.01,), daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)


def answer(status: int = 200, body: bytes = b"{}", headers: dict[str, str] | None = None,
           ) -> Behaviour:
    def go(seen: Seen, conn: socket.socket) -> None:
        extra = "".join(f"{k}: {v}\r\n" for k, v in (headers or {}).items())
        conn.sendall(f"HTTP/1.1 {status} X\r\nContent-Length: {len(body)}\r\n{extra}"
                     "Connection: close\r\n\r\n".encode() + body)
    return go


def redirect(location: str, status: int = 302) -> Behaviour:
    return answer(status, b"", {"Location": location})


def echo_authorization(status: int = 401) -> Behaviour:
    """An error whose body and a header quote back the credential it was sent."""
    def go(seen: Seen, conn: socket.socket) -> None:
        auth = seen.headers.get("authorization", "")
        body = (f'{{"detail": [{{"msg": "bad token {auth}", "code": "x"}}], '
                f'"error": {{"code": "e", "message": "bad key {auth}"}}}}').encode()
        answer(status, body, {"X-Echo": auth})(seen, conn)
    return go


def raw(data: bytes) -> Behaviour:
    def go(seen: Seen, conn: socket.socket) -> None:
        conn.sendall(data)
    return go


def bad_status_line() -> Behaviour:
    return raw(b"HTTP/9.9 TWO HUNDRED\r\n\r\n")


def cut_chunked() -> Behaviour:
    return raw(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n100\r\n{\"data\":")


def long_header(size: int = 70 * 1024) -> Behaviour:
    return raw(b"HTTP/1.1 200 OK\r\nX-Big: " + b"a" * size + b"\r\nContent-Length: 2\r\n\r\n{}")


def many_headers(count: int = 150) -> Behaviour:
    lines = b"".join(b"X-H%d: v\r\n" % i for i in range(count))
    return raw(b"HTTP/1.1 200 OK\r\n" + lines + b"Content-Length: 2\r\n\r\n{}")


def drip(seconds: float = 30.0, every: float = 0.25) -> Behaviour:
    """A valid answer sent a byte each ``every`` seconds (each read succeeds; the whole never
    ends in time)."""
    def go(seen: Seen, conn: socket.socket) -> None:
        body = b'{"data": ' + b" " * 200 + b"{}}"
        data = b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n" % len(body) + body
        end = time.monotonic() + seconds
        for byte in data:
            if time.monotonic() > end:
                return
            conn.sendall(bytes([byte]))
            time.sleep(every)
    return go


def huge(size: int = 64 * 1024 * 1024, declare: bool = False) -> Behaviour:
    def go(seen: Seen, conn: socket.socket) -> None:
        head = (b"Content-Length: %d\r\n" % size) if declare else b""
        conn.sendall(b"HTTP/1.1 200 OK\r\n" + head + b"Connection: close\r\n\r\n")
        chunk = b"x" * 65536
        sent = 0
        try:
            while sent < size:
                conn.sendall(chunk)
                sent += len(chunk)
        except OSError:
            return
    return go


def hang_up() -> Behaviour:
    def go(seen: Seen, conn: socket.socket) -> None:
        conn.shutdown(socket.SHUT_RDWR)
    return go


HOSTILE = {
    "bad-status": bad_status_line, "cut-chunked": cut_chunked, "long-header": long_header,
    "many-headers": many_headers, "hang-up": hang_up, "huge": huge,
    "echo": echo_authorization,
}
