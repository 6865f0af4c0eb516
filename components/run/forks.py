"""What the processes an offline run forks share (``parallel``'s parts, ``runner``): when a
fork is safe, how a child leaves the command's output alone, and the pickled messages they
send through pipes (each its length first, then its pickle)."""

from __future__ import annotations

import os
import pickle
import threading
from collections.abc import Sequence

_LENGTH = 8  # bytes of a message's length, before its pickle


def forkable() -> bool:
    """Whether this process may fork: it can, and no other thread runs (a forked thread's
    locks would stay held in the child)."""
    return hasattr(os, "fork") and threading.active_count() == 1


def detach(inherited: Sequence[int]) -> None:
    """In a child: close the pipe ends it inherited and does not use, and send its standard
    output and error nowhere (the command's output is the command's)."""
    for fd in inherited:
        os.close(fd)
    quiet = os.open(os.devnull, os.O_WRONLY)
    os.dup2(quiet, 1)
    os.dup2(quiet, 2)


def write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


def send(fd: int, message: object) -> None:
    """``message`` pickled, its length first."""
    data = pickle.dumps(message, protocol=pickle.HIGHEST_PROTOCOL)
    write_all(fd, len(data).to_bytes(_LENGTH, "big") + data)


def receive(fd: int) -> bytes:
    """One message's pickle; b"" at the end of the stream (EOFError when cut short)."""
    header = _read_exact(fd, _LENGTH)
    if not header:
        return b""
    size = int.from_bytes(header, "big") if len(header) == _LENGTH else -1
    data = _read_exact(fd, size) if size >= 0 else b""
    if size < 0 or len(data) < size:
        raise EOFError("a message cut short")
    return data


def _read_exact(fd: int, size: int) -> bytes:
    chunks, left = [], size
    while left and (chunk := os.read(fd, min(left, 1 << 20))):
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)
