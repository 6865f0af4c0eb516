"""The evidence ledger: an append-only JSON Lines file of verdicts (acceptance checks, burn-in,
pairs, storage, topology, replacements), each entry carrying the digest of the evidence it
judged and of the entry before it, so that an edited, removed or reordered entry breaks the
chain (`gpufleet ledger verify`). The last entry cannot be removed unnoticed by the chain
alone: `verify` prints the head (its sequence number and digest) to keep elsewhere (a ticket,
a commit), and `--head DIGEST` checks that it is still there.

An append takes an exclusive lock (``LEDGER.lock``, as `gpufleet lock` does for the lock
file), checks the current head, and writes one line with a single `write` on a descriptor
opened for appending, then fsyncs it: concurrent writers queue, and a crash leaves at worst a
cut-off last line, which `verify` reports."""

from __future__ import annotations

import datetime as dt
import fcntl
import hashlib
import json
import os
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any

GENESIS = "sha256:" + "0" * 64
MAX_LINE = 1 << 20  # one entry; evidence is recorded by digest, never inline


class LedgerError(ValueError):
    """The ledger cannot be read or appended to; the message says where and why."""


def entry_digest(entry: Mapping[str, Any]) -> str:
    body = {k: v for k, v in entry.items() if k != "digest"}
    text = json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=True)
    return "sha256:" + hashlib.sha256(text.encode()).hexdigest()


def file_digest(path: str) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return "sha256:" + h.hexdigest()


@contextmanager
def _locked(path: str) -> Iterator[None]:
    fd = os.open(path + ".lock", os.O_WRONLY | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        fcntl.flock(fd, fcntl.LOCK_UN)
        os.close(fd)


def read_entries(path: str) -> tuple[list[dict[str, Any]], list[str]]:
    """(entries, problems): every line parsed and checked against the chain."""
    entries: list[dict[str, Any]] = []
    problems: list[str] = []
    try:
        with open(path, "rb") as f:
            raw = f.read()
    except FileNotFoundError:
        return [], []
    except OSError as e:
        raise LedgerError(f"cannot read {path}: {e.strerror}") from None
    prev = GENESIS
    lines = raw.split(b"\n")
    if lines and lines[-1] == b"":
        lines.pop()
    elif lines:
        problems.append(f"line {len(lines)}: cut off (no line end): an interrupted write")
    for n, line in enumerate(lines, 1):
        try:
            entry = json.loads(line)
        except ValueError:
            problems.append(f"line {n}: not a JSON entry")
            continue
        if not isinstance(entry, dict):
            problems.append(f"line {n}: not an entry")
            continue
        if entry.get("digest") != entry_digest(entry):
            problems.append(f"line {n}: edited (its digest does not match its content)")
        if entry.get("prev") != prev:
            problems.append(f"line {n}: the entry before it was removed, edited or moved "
                            "(its `prev` is not the digest of line {})".format(n - 1))
        if entry.get("seq") != n:
            problems.append(f"line {n}: sequence {entry.get('seq')} where {n} belongs "
                            "(an entry removed or moved)")
        prev = str(entry.get("digest"))
        entries.append(entry)
    return entries, problems


def append(path: str, record: Mapping[str, Any], now: dt.datetime | None = None
           ) -> dict[str, Any]:
    """Append one entry (``record``: kind, fleet, nodes, figures, threshold, verdict,
    evidence) to the ledger at ``path``; LedgerError when the ledger is already broken."""
    with _locked(path):
        entries, problems = read_entries(path)
        if problems:
            raise LedgerError(f"{path}: {problems[0]}; nothing was appended (`gpufleet ledger "
                              "verify` lists every problem)")
        entry: dict[str, Any] = {
            "seq": len(entries) + 1,
            "time": (now or dt.datetime.now(dt.UTC)).isoformat(timespec="seconds"),
            **dict(record),
            "prev": entries[-1]["digest"] if entries else GENESIS}
        entry["digest"] = entry_digest(entry)
        line = (json.dumps(entry, sort_keys=True, ensure_ascii=True) + "\n").encode()
        if len(line) > MAX_LINE:
            raise LedgerError(f"{path}: an entry of {len(line):,} bytes; record evidence by "
                              "digest")
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            os.write(fd, line)
            os.fsync(fd)
        finally:
            os.close(fd)
    return entry


def verify(path: str, head: str | None = None) -> tuple[int, list[str]]:
    """(exit code, lines): 0 the chain holds (and ``head`` is in it), 1 it is broken."""
    if not os.path.exists(path):
        return 1, [f"FAIL: {path} does not exist"]
    entries, problems = read_entries(path)
    if head is not None and not any(e.get("digest") == head for e in entries):
        problems.append(f"the head {head} you kept is not in the ledger: entries after an "
                        "earlier point were removed, or it is another ledger")
    if problems:
        return 1, [*(f"FAIL {p}" for p in problems), f"FAIL: {path} is not intact"]
    last = entries[-1] if entries else None
    return 0, [f"ok: {len(entries)} entr{'y' if len(entries) == 1 else 'ies'}, the chain holds"
               + (f"; head seq {last['seq']} {last['digest']} (keep it to detect a removed "
                  "last entry: `--head`)" if last else "")]
