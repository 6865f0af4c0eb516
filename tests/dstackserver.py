"""A real dstack 0.22.5 server for the tests that talk to one (`gateway sync`, `health`):
started on 127.0.0.1 from `.venv-dstack` with a temporary home and an admin token, its
projects created through its API, its database seeded by a helper script that runs in the
dstack virtualenv with dstack's own test factories, and killed by its process group. A module
that talks to one is run by one worker (tests/conftest.py, ONE_WORKER), and the modules there
share one server (``dstack_home``), each seeding projects of its own.

Each server starts from a copy of an empty database with dstack's migrations applied, made
once per oracle (``empty_database``): applying them is most of a fresh server's start-up
(about 7 of its 11 s on the 2-core machine), and in a database without users the server
still creates its admin with the test's token."""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import secrets
import shutil
import signal
import socket
import sqlite3
import subprocess
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gpufleet.live.gateways import Server
from gpufleet.outbound import Secret

from planutil import ROOT

ORACLE = ROOT / ".venv-dstack" / "bin"


def helper(script: Path, command: str, specs: list[dict[str, Any]], *args: str,
           env: dict[str, str] | None = None) -> str:
    """Run a helper script in the dstack virtualenv, the specs on its standard input."""
    assert ORACLE.exists(), "run `make oracle` (make test does) to create .venv-dstack"
    done = subprocess.run([str(ORACLE / "python"), str(script), command, *args],
                          input=json.dumps(specs), capture_output=True, text=True, timeout=120,
                          env=env, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def post(url: str, token: str, body: dict[str, Any]) -> int:
    req = urllib.request.Request(url, data=json.dumps(body).encode(), method="POST",
                                 headers={"Authorization": f"Bearer {token}",
                                          "Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=5) as resp:
            return int(resp.status)
    except urllib.error.HTTPError as e:
        return int(e.code)


_MIGRATE = """import asyncio
from dstack._internal.server.db import migrate
asyncio.run(migrate())
"""


def empty_database() -> Path:
    """dstack's database with its migrations applied and no rows, made once per oracle
    (named by the oracle's pins; made under a lock, so workers that start servers at once
    make it once) in the oracle's folder."""
    pins = b"".join((ROOT / "tests" / f).read_bytes()
                    for f in ("oracle-requirements.txt", "oracle-constraints.txt"))
    assert ORACLE.exists(), "run `make oracle` (make test does) to create .venv-dstack"
    path = ORACLE.parent / f"empty-server-{hashlib.sha256(pins).hexdigest()[:12]}.db"
    with (ORACLE.parent / "empty-server.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not path.exists():
            with tempfile.TemporaryDirectory() as home:
                data = Path(home) / ".dstack" / "server" / "data"
                data.mkdir(parents=True)
                done = subprocess.run([str(ORACLE / "python"), "-c", _MIGRATE],
                                      env={**os.environ, "HOME": home}, capture_output=True,
                                      text=True, timeout=300, check=False)
                assert done.returncode == 0, done.stderr[-2000:]
                # one file out of the database and its write-ahead log, then in place whole
                part = path.with_name(f".{path.name}.{os.getpid()}")
                with contextlib.closing(sqlite3.connect(data / "sqlite.db")) as src, \
                        contextlib.closing(sqlite3.connect(part)) as dst:
                    src.backup(dst)
                os.replace(part, path)
    return path


def _up(port: int) -> bool:
    with socket.socket() as s:
        return s.connect_ex(("127.0.0.1", port)) == 0


@dataclass(frozen=True)
class Home:
    """A running server: its address and admin token, and what seeding its database needs."""

    server: Server
    env: dict[str, str]
    db: str  # the database's URL, as dstack's factories open it


@contextlib.contextmanager
def started(home: Path) -> Iterator[Home]:
    """A server with no project, in ``home``, killed at the end."""
    token, port = secrets.token_hex(8), free_port()
    # no background processing: the seeded records are read as seeded (it would find the
    # test addresses unreachable), and a server the worker keeps for the whole session
    # takes no processor between its tests
    env = {**os.environ, "HOME": str(home), "DSTACK_SERVER_ADMIN_TOKEN": token,
           "DSTACK_SERVER_BACKGROUND_PROCESSING_DISABLED": "1"}
    data = home / ".dstack" / "server" / "data"
    data.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(empty_database(), data / "sqlite.db")
    log = (home / "server.log").open("w")
    proc = subprocess.Popen([str(ORACLE / "dstack"), "server", "--host", "127.0.0.1",
                             "--port", str(port)], env=env, stdout=log, stderr=subprocess.STDOUT,
                            start_new_session=True)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 120
        while not (_up(port) and post(f"{url}/api/projects/list", token, {}) == 200):
            assert proc.poll() is None, (home / "server.log").read_text()[-2000:]
            assert time.monotonic() < deadline, "the dstack server did not start"
            time.sleep(0.3)
        yield Home(Server(url, Secret(token, "test"), "test"), env,
                   f"sqlite+aiosqlite:///{home}/.dstack/server/data/sqlite.db")
    finally:
        # killed outright: its graceful stop (about 3 s) is not what the tests are about and
        # its home is a temporary folder
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=20)
        log.close()


def seeded(home: Home, projects: Sequence[str], script: Path,
           specs: list[dict[str, Any]]) -> Server:
    """``projects`` made through the server's API, then ``script seed``'s records of
    ``specs`` in its database. Projects of one name cannot be made twice: the modules that
    share a server (tests/conftest.py, ``dstack_home``) each seed projects of their own."""
    server = home.server
    for p in projects:
        assert post(f"{server.url}/api/projects/create", server.token.reveal(),
                    {"project_name": p}) == 200, p
    helper(script, "seed", specs, home.db, env=home.env)
    return server


@contextlib.contextmanager
def running(home: Path, projects: Sequence[str], script: Path,
            specs: list[dict[str, Any]]) -> Iterator[Server]:
    """A server of its own with ``projects`` and ``script seed``'s records of ``specs``."""
    with started(home) as h:
        yield seeded(h, projects, script, specs)
