"""The compiled methods of gpufleet's dataclasses, kept between runs.

``dataclasses`` writes each class's ``__init__``, ``__repr__``, ``__eq__``, ``__hash__``,
``__setattr__`` and ``__delattr__`` as source text and compiles it, with ``exec``, every
time the class is made: the 700 methods of the classes a `gpufleet plan` imports took 57 ms
of its 140 ms of gpufleet's own imports, `validate`'s 355 took 28 of 81 (bench/startup.py
shows the whole commands). ``install()`` gives the ``dataclasses`` module an ``exec`` of its
own (a module global, found before the builtin) that, for a class of gpufleet's or the
components' modules, runs the code an earlier run compiled from the very same text, and
compiles (as ``exec`` does: no ``__future__`` flag of this module inherited) what it has not
seen. Anything else (another package's class, an argument of another shape) is compiled
and run as the builtin ``exec`` called from ``dataclasses`` does it; with the cache off
nothing is installed.

The table (text -> code, in ``marshal``'s format, which is Python's own: one file per Python
version) lives in the cache folder's `code/` (``gpufleet.cachedir``); a run that compiled
anything writes it back whole at exit (a temporary file renamed into place, readable by its
owner only; the folder is trusted as Python's .pyc files are). A table that does not read
back as one is ignored and written again.
"""

from __future__ import annotations

import atexit
import builtins
import dataclasses
from pathlib import Path
from types import CodeType
from typing import Any

from gpufleet.cachedir import PYTHON, cache_dir, read_entry, store_entry

OURS = ("gpufleet", "components")  # the packages whose classes' code is kept
KEEP = 4000  # texts kept in the table: the newest; a run's own are always newest
_FORMAT = 1


class _Table:
    def __init__(self, path: Path) -> None:
        self.path = path
        self.code: dict[str, CodeType] | None = None  # read on first use
        self.used: dict[str, CodeType] = {}
        self.compiled = 0  # texts this run compiled (not in the table)

    def lookup(self, text: str) -> CodeType:
        if self.code is None:
            self.code = read_table(self.path)
        code = self.code.get(text)
        if code is None:
            code = compile(text, "<string>", "exec", dont_inherit=True)
            self.code[text] = code
            self.compiled += 1
        self.used[text] = code
        return code

    def save(self) -> None:
        if not self.compiled:
            return
        kept = {**read_table(self.path), **self.used}
        kept = dict(list(kept.items())[-KEEP:])
        write_table(self.path, kept)


_TABLE: _Table | None = None


def install() -> None:
    """Hand ``dataclasses`` the caching ``exec`` (once; not when the cache is off or the
    module already has an ``exec`` of someone else's)."""
    global _TABLE
    folder = cache_dir("code")
    if folder is None or _TABLE is not None or "exec" in vars(dataclasses):
        return
    _TABLE = _Table(folder / f"dataclasses.{PYTHON}.bin")
    vars(dataclasses)["exec"] = _exec
    atexit.register(_TABLE.save)


def stats() -> tuple[int, int]:
    """(texts run from the table, texts compiled) so far in this process."""
    if _TABLE is None:
        return 0, 0
    return len(_TABLE.used) - _TABLE.compiled, _TABLE.compiled


def _exec(source: Any, globals: Any = None, locals: Any = None, /, **more: Any) -> None:
    table = _TABLE
    if (table is not None and not more and type(source) is str and type(globals) is dict
            and str(globals.get("__name__", "")).partition(".")[0] in OURS):
        builtins.exec(table.lookup(source), globals, locals)
        return
    if type(source) is str:  # compiled as dataclasses' own exec compiles it: no flag of ours
        source = compile(source, "<string>", "exec", dont_inherit=True)
    builtins.exec(source, globals, locals, **more)


def read_table(path: Path) -> dict[str, CodeType]:
    """The table at ``path``; empty when there is none or it does not read as one."""
    doc = read_entry(path)
    if doc is None or doc.get("format") != _FORMAT or not isinstance(doc.get("code"), dict):
        return {}
    code: dict[str, CodeType] = doc["code"]
    if not all(type(k) is str and type(v) is CodeType for k, v in code.items()):
        return {}
    return code


def write_table(path: Path, code: dict[str, CodeType]) -> None:
    """Write the table whole, or not at all."""
    store_entry(path, {"format": _FORMAT, "code": code})
