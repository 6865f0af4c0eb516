"""The index of an SDK module's types (``lazyinputs``) kept between runs, as Python keeps a
module's compiled code in ``__pycache__``: building it means unmarshalling the module's whole
``.pyc`` (5 MB for GCP's compute ``_inputs``) and reading and splitting its text (4.8 MB),
about 0.2 s of a cold ``gpufleet plan`` of the examples; reading it back means reading one
file's header and, for each class a run makes, its part of the file.

An entry is one file per module under ``gpufleet.cachedir.cache_dir("sdk")``: a marker line,
the header's length (8 bytes, big-endian), the header (``marshal``: the key, the preamble's
code, each class's name, bases, decorator and where its part lies after the header) and
each class's part, marshalled alone: the index's classes its text names and its body's
code. The key is the
module's name and source path, the source's size and modification time, the interpreter's
bytecode magic number and this format's number: an SDK upgraded, a file edited or another
Python reads no old entry. An entry is written whole (a temporary file renamed into place),
readable by its owner only, in a folder only its owner may enter (the trust a ``.pyc``
gets); one that does not read back whole, with the key asked for and the shape written, is
ignored and written again. ``GPUFLEET_CACHE=off`` turns it off with the other caches."""

from __future__ import annotations

import hashlib
import importlib.util
import marshal
import os
import types
import weakref
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from gpufleet.cachedir import cache_dir, write_entry

FORMAT = 2
_MARK = b"gpufleet sdk type index\n"
_LENGTH = 8  # bytes of the header's length
# module name, source path, source size, modification time (ns), bytecode magic, FORMAT
Key = tuple[str, str, int, int, bytes, int]
# a class in the header: its bases, decorator, and where its refs and body lie after it
Header = tuple[tuple[str, ...], str | None, int, int]


@dataclass(frozen=True)
class Entry:
    """One class of a stored index."""

    name: str
    bases: tuple[str, ...]
    decorator: str | None
    refs: tuple[str, ...]  # the index's classes its definition names
    body: types.CodeType


class Stored:
    """An index read back: the preamble's code and each class's bases and decorator; a
    class's body and the classes its text names are read (``os.pread``, from the entry's
    file, opened once) when first asked for. A part that does not read back whole is a
    ValueError (or EOFError: the file cut short since), for the caller to fall back on."""

    def __init__(self, preamble: types.CodeType, classes: dict[str, Header], fd: int,
                 base: int) -> None:
        self.preamble, self.classes = preamble, classes
        self._fd, self._base = fd, base
        self._read: dict[str, tuple[tuple[str, ...], types.CodeType]] = {}
        weakref.finalize(self, os.close, fd)

    def _entry(self, name: str) -> tuple[tuple[str, ...], types.CodeType]:
        got = self._read.get(name)
        if got is None:
            *_, start, end = self.classes[name]
            value = marshal.loads(os.pread(self._fd, end - start, self._base + start))
            if not (isinstance(value, tuple) and len(value) == 2
                    and isinstance(value[0], tuple)
                    and all(isinstance(r, str) and r in self.classes for r in value[0])
                    and isinstance(value[1], types.CodeType)):
                raise ValueError(f"the stored body of {name} is not its refs and code")
            self._read[name] = got = value
        return got

    def refs(self, name: str) -> tuple[str, ...]:
        """The index's classes the definition of ``name`` names."""
        return self._entry(name)[0]

    def body(self, name: str) -> types.CodeType:
        return self._entry(name)[1]


def key(name: str, path: str) -> Key | None:
    """What an entry for module ``name`` (its source at ``path``) must have been written
    for; None when the cache is off or the source cannot be read."""
    folder = cache_dir("sdk")
    if folder is None:
        return None
    try:
        st = os.stat(path)
    except OSError:
        return None
    return (name, path, st.st_size, st.st_mtime_ns, importlib.util.MAGIC_NUMBER, FORMAT)


def _file(entry_key: Key) -> Path | None:
    folder = cache_dir("sdk")
    if folder is None:
        return None
    digest = hashlib.sha256(f"{entry_key[0]}\0{entry_key[1]}".encode()).hexdigest()[:40]
    return folder / f"{digest}.types"


def _shaped(classes: object, size: int) -> bool:
    """Whether a header's classes are what ``save`` writes, each body within ``size``."""
    if not isinstance(classes, dict):
        return False
    for name, value in classes.items():
        if not (isinstance(name, str) and isinstance(value, tuple) and len(value) == 4):
            return False
        bases, decorator, start, end = value
        if not (isinstance(bases, tuple) and all(isinstance(b, str) for b in bases)
                and (decorator is None or isinstance(decorator, str))
                and type(start) is int and type(end) is int and 0 <= start <= end <= size):
            return False
    return True


def load(entry_key: Key) -> Stored | None:
    """The entry written for ``entry_key``, or None (none, another key, not whole). Only
    its header is read here."""
    path = _file(entry_key)
    if path is None:
        return None
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        at = len(_MARK) + _LENGTH
        head = os.pread(fd, at, 0)
        size = int.from_bytes(head[len(_MARK):], "big")
        header = marshal.loads(os.pread(fd, size, at)) if head.startswith(_MARK) else None
        rest = os.fstat(fd).st_size - at - size
    except (OSError, ValueError, EOFError, TypeError):
        header = None
    if not (isinstance(header, tuple) and len(header) == 3 and header[0] == entry_key
            and isinstance(header[1], types.CodeType) and _shaped(header[2], rest)):
        os.close(fd)
        return None
    return Stored(header[1], header[2], fd, at + size)


def save(entry_key: Key, preamble: types.CodeType, entries: Sequence[Entry]) -> None:
    """Write the entry for ``entry_key`` whole, or nothing (a cache that cannot be written is
    no cache, never a failed run)."""
    path = _file(entry_key)
    if path is None:
        return
    bodies, classes, at = [], {}, 0
    for e in entries:
        body = marshal.dumps((e.refs, e.body))
        bodies.append(body)
        classes[e.name] = (e.bases, e.decorator, at, at + len(body))
        at += len(body)
    header = marshal.dumps((entry_key, preamble, classes))
    write_entry(path, b"".join([_MARK, len(header).to_bytes(_LENGTH, "big"), header, *bodies]))
