"""The evidence ledger: an append-only JSON Lines file of verdicts (acceptance checks, burn-in,
pairs, storage, topology, replacements), each entry carrying the digest of the evidence it
judged and of the entry before it, so that an edited, removed or reordered entry breaks the
chain (`gpufleet ledger verify`). The last entry cannot be removed unnoticed by the chain
alone: `verify` prints the head (its sequence number and digest) to keep elsewhere (a ticket,
a commit), and `--head DIGEST` checks that it is still there.

An append opens the ledger itself (following a symlink to its target), which must be a
regular file (a FIFO, device or folder is refused and nothing is created beside it), takes an
exclusive lock on that open file (so two writers reaching one file through a symlink, a hard
link or two spellings of its path exclude each other), checks the current head, and writes
one line with a single `write` on the descriptor opened for appending, then fsyncs it:
concurrent writers queue, and a crash leaves at worst a cut-off last line, which `verify`
reports. Numbers are finite JSON (no NaN or Infinity is written or read) and reads are
bounded."""

from __future__ import annotations

import datetime as dt
import fcntl
import hashlib
import json
import os
import stat
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any

from gpufleet.outbound import loads_strict

GENESIS = "sha256:" + "0" * 64
MAX_LINE = 1 << 20  # one entry; evidence is recorded by digest, never inline
MAX_LEDGER = 256 << 20  # a ledger gpufleet reads: years of entries at a few hundred bytes


class LedgerError(ValueError):
    """The ledger cannot be read or appended to; the message says where and why."""


def entry_digest(entry: Mapping[str, Any]) -> str:
    body = {k: v for k, v in entry.items() if k != "digest"}
    text = json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=True,
                      allow_nan=False)
    return "sha256:" + hashlib.sha256(text.encode()).hexdigest()


def file_digest(path: str) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return "sha256:" + h.hexdigest()


@contextmanager
def _opened(path: str, write: bool) -> Iterator[int | None]:
    """The ledger's descriptor, locked (exclusive to write, shared to read); None when it does
    not exist and is only read. LedgerError for anything but a regular file."""
    flags = (os.O_RDWR | os.O_APPEND | os.O_CREAT) if write else os.O_RDONLY
    try:
        # O_NONBLOCK: a FIFO put in its place answers at once instead of blocking; the check
        # below refuses it (for a regular file the flag changes nothing)
        fd = os.open(path, flags | os.O_NONBLOCK | os.O_CLOEXEC, 0o644)
    except FileNotFoundError:
        if write:
            raise LedgerError(f"cannot create {path}: its folder does not exist") from None
        yield None
        return
    except OSError as e:
        raise LedgerError(f"cannot open {path}: {e.strerror}") from None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise LedgerError(f"{path} is not a regular file (a FIFO, device or folder): a "
                              "ledger is a file of its own")
        fcntl.flock(fd, fcntl.LOCK_EX if write else fcntl.LOCK_SH)
        yield fd
    finally:
        os.close(fd)  # closing releases the lock


def _read_fd(fd: int, path: str) -> bytes:
    size = os.fstat(fd).st_size
    if size > MAX_LEDGER:
        raise LedgerError(f"{path}: {size:,} bytes, over the {MAX_LEDGER:,} gpufleet reads; "
                          "start a new ledger (keep the old one's head)")
    chunks, got = [], 0
    while got <= MAX_LEDGER:
        chunk = os.pread(fd, 1 << 20, got)
        if not chunk:
            break
        chunks.append(chunk)
        got += len(chunk)
    if got > MAX_LEDGER:
        raise LedgerError(f"{path}: over the {MAX_LEDGER:,} bytes gpufleet reads")
    return b"".join(chunks)


def read_entries(path: str) -> tuple[list[dict[str, Any]], list[str]]:
    """(entries, problems): every line parsed and checked against the chain."""
    with _opened(path, write=False) as fd:
        if fd is None:
            return [], []
        try:
            raw = _read_fd(fd, path)
        except OSError as e:
            raise LedgerError(f"cannot read {path}: {e.strerror}") from None
    return _entries(raw)


def _entries(raw: bytes) -> tuple[list[dict[str, Any]], list[str]]:
    entries: list[dict[str, Any]] = []
    problems: list[str] = []
    prev = GENESIS
    lines = raw.split(b"\n")
    if lines and lines[-1] == b"":
        lines.pop()
    elif lines:
        problems.append(f"line {len(lines)}: cut off (no line end): an interrupted write")
    for n, line in enumerate(lines, 1):
        try:
            entry = loads_strict(line)
        except (ValueError, RecursionError):
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
        if entry.get("seq") != n or isinstance(entry.get("seq"), bool):
            problems.append(f"line {n}: sequence {entry.get('seq')} where {n} belongs "
                            "(an entry removed or moved)")
        prev = str(entry.get("digest"))
        entries.append(entry)
    return entries, problems


def append(path: str, record: Mapping[str, Any], now: dt.datetime | None = None
           ) -> dict[str, Any]:
    """Append one entry (``record``: kind, fleet, nodes, figures, threshold, verdict,
    evidence) to the ledger at ``path``; LedgerError when the ledger is already broken, is
    not a regular file, or the record holds a number JSON cannot carry."""
    with _opened(path, write=True) as fd:
        assert fd is not None
        entries, problems = _entries(_read_fd(fd, path))
        if problems:
            raise LedgerError(f"{path}: {problems[0]}; nothing was appended (`gpufleet ledger "
                              "verify` lists every problem)")
        entry: dict[str, Any] = {
            "seq": len(entries) + 1,
            "time": (now or dt.datetime.now(dt.UTC)).isoformat(timespec="seconds"),
            **dict(record),
            "prev": entries[-1]["digest"] if entries else GENESIS}
        try:
            entry["digest"] = entry_digest(entry)
            line = (json.dumps(entry, sort_keys=True, ensure_ascii=True, allow_nan=False)
                    + "\n").encode()
        except ValueError:
            raise LedgerError(f"{path}: the verdict holds a number that is not finite (NaN or "
                              "infinity); nothing was appended") from None
        if len(line) > MAX_LINE:
            raise LedgerError(f"{path}: an entry of {len(line):,} bytes; record evidence by "
                              "digest")
        os.write(fd, line)
        os.fsync(fd)
    return entry


def verify(path: str, head: str | None = None) -> tuple[int, list[str]]:
    """(exit code, lines): 0 the chain holds (and ``head`` is in it), 1 it is broken."""
    if not os.path.lexists(path):
        return 1, [f"FAIL: {path} does not exist"]
    if not os.path.exists(path):
        return 1, [f"FAIL: {path} does not exist (a link to a missing file)"]
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
