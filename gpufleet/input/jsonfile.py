"""Bounded reading of JSON inputs (a `pulumi stack export`, `pulumi stack output --json`):
a regular file of at most ``MAX_JSON_BYTES``, UTF-8, nested at most ``MAX_JSON_DEPTH``
levels, integers of at most 30 digits and no NaN or Infinity. Anything else is a
``JsonInputError`` saying what is wrong, never an exception of the parser's.

A large input (``FAST_FROM`` bytes on) is first read by msgspec's parser, about twice as
fast as the standard library's on a stack export (0.19 against 0.46 s for 125 MB, the
text's decoding included), and its value walked once for the bounds (``within``); a text
msgspec refuses, or a value outside the bounds, is read again the standard library's way,
which decides and says why: what is accepted, and every message, is the same either way.
"""

from __future__ import annotations

import gc
import json
import os
import stat
import sys
import threading
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from types import FrameType
from typing import Any

MAX_JSON_BYTES = 256 * 1024 * 1024  # a stack of thousands of resources stays far below
MAX_JSON_DEPTH = 100  # Pulumi's own documents nest a few tens of levels
MAX_INT_DIGITS = 30
FAST_FROM = 1 << 20  # below, the standard library's parser takes a few milliseconds at most
_INT_BOUND = 10 ** MAX_INT_DIGITS


class JsonInputError(ValueError):
    """The file is not JSON gpufleet can read; the message says why."""


def read_bounded(path: str, what: str) -> bytes:
    """The bytes of a JSON input: a regular file (never a pipe that would block), read up to
    one byte past the bound so that an oversized file is seen as such."""
    try:
        st = os.stat(path)
    except OSError as e:
        raise JsonInputError(f"cannot read {path}: {e.strerror or e}") from None
    if not stat.S_ISREG(st.st_mode):
        raise JsonInputError(f"{path} is not a regular file (a pipe or device); give {what} "
                             "as a file")
    try:
        with open(path, "rb") as fh:  # the size it has, not the bound: no 256 MB buffer
            return fh.read(min(os.fstat(fh.fileno()).st_size, MAX_JSON_BYTES) + 1)
    except OSError as e:
        raise JsonInputError(f"cannot read {path}: {e.strerror or e}") from None


def read_json_file(path: str, what: str) -> Any:
    """Read, decode and parse one JSON file, within the bounds above."""
    return parse_json(read_bounded(path, what), path, what)


def parse_json(raw: bytes, source: str, what: str) -> Any:
    return parse_json_marked(raw, source, what, None)[0]


def parse_json_marked(raw: bytes, source: str, what: str, key: str | None
                      ) -> tuple[Any, list[dict[str, Any]] | None]:
    """``parse_json``, and every object holding ``key`` where the bounds' walk found them
    on the way (msgspec's path); None where nothing was looked for (the caller looks)."""
    if len(raw) > MAX_JSON_BYTES:
        raise JsonInputError(f"{source}: larger than {MAX_JSON_BYTES // (1 << 20)} MB; this "
                             f"is not {what}")
    if raw.startswith((b"\xff\xfe", b"\xfe\xff")):
        raise JsonInputError(f"{source}: UTF-16 text; {what} is UTF-8 (PowerShell's `>` "
                             "writes UTF-16: use `--file` or `Out-File -Encoding utf8`)")
    marked: list[dict[str, Any]] | None = None if key is None else []
    with uncollected():
        data = _fast(raw, key, marked) if len(raw) >= FAST_FROM else _REFUSED
    if data is not _REFUSED:
        return data, marked
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        raise JsonInputError(f"{source}: not UTF-8 text (byte 0x{raw[e.start]:02x} at offset "
                             f"{e.start}); {what} is UTF-8 JSON") from None
    try:
        with uncollected():
            data, offset = _loads(text, source)
    except json.JSONDecodeError as e:
        raise JsonInputError(f"{source}:{e.lineno}:{e.colno}: not valid JSON ({e.msg})") \
            from None
    except RecursionError:  # the C parser's own guard, some thousand levels down
        offset = _walk(text)[1]
    if offset is not None:
        raise JsonInputError(f"{source}: nested deeper than {MAX_JSON_DEPTH} levels (at offset "
                             f"{offset}); this is not {what}")
    return data, None


@contextmanager
def uncollected(freeze: bool = False) -> Iterator[None]:
    """The cycle collector paused: a parse makes millions of containers that all live on
    and no cycle; collections in the middle would walk them again and again (a quarter of
    a 100 MB export's parse). ``freeze``: what was made inside lives until the process ends
    (a command's stack export), so it is frozen before the collector runs again, which
    would otherwise walk all of it once more at the next allocation (75 ms of a 125 MB
    export's parse)."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if freeze:
            gc.freeze()
        if was:
            gc.enable()


_REFUSED = object()


def _fast(raw: bytes, key: str | None = None, marked: list[dict[str, Any]] | None = None
          ) -> Any:
    """The value msgspec reads, where the bounds hold for it; ``_REFUSED`` otherwise (the
    standard library's path then decides). msgspec stops at the interpreter's recursion
    limit itself (a RecursionError), so a deep text costs it nothing. An install without
    msgspec (a dependency) reads the standard library's way, as a smaller text is read."""
    try:
        import msgspec
    except ImportError:
        return _REFUSED

    body = memoryview(raw)[3:] if raw.startswith(b"\xef\xbb\xbf") else raw
    try:
        data = msgspec.json.decode(body)
    except (msgspec.MsgspecError, ValueError, RecursionError):
        return _REFUSED
    return data if within(data, key=key, marked=marked) else _REFUSED


def within(value: Any, limit: int = MAX_JSON_DEPTH, key: str | None = None,
           marked: list[dict[str, Any]] | None = None) -> bool:
    """Whether a parsed value nests at most ``limit`` levels and holds no integer of over
    ``MAX_INT_DIGITS`` digits: one level at a time, like ``nesting``, strings (most values)
    passed over first (0.09 s over a 125 MB export). The objects holding ``key`` are added
    to ``marked`` on the way."""
    mark = marked.append if marked is not None and key is not None else None
    depth = 0
    level = [value] if type(value) is dict or type(value) is list else []
    while level:
        depth += 1
        if depth > limit:
            return False
        below: list[Any] = []
        add = below.append
        for item in level:
            values: Iterable[Any]
            if type(item) is dict:
                if mark is not None and key in item:
                    mark(item)
                values = item.values()
            else:
                values = item
            for v in values:
                kind = type(v)
                if kind is str:
                    continue
                if kind is dict or kind is list:
                    add(v)
                elif kind is int and not -_INT_BOUND < v < _INT_BOUND:
                    return False
        level = below
    return type(value) is not int or -_INT_BOUND < value < _INT_BOUND


def _loads(text: str, source: str) -> tuple[Any, int | None]:
    """The parsed value, and the offset where it nests deeper than the bound (None: it
    does not; the character walk that finds the offset runs for a refused text only).
    Where the C scanner counts its levels against the recursion limit (CPython 3.11), the
    limit holds the bound while it parses: set, at this very call, to the margin at which
    a value nested exactly at the bound is read and one a level deeper is refused
    (``_margin``). A refusal the text's own depth does not bear out (a hook called at the
    deepest level takes a level too) parses again the slow way: the value walked level by
    level (``nesting``: a quarter of a second on a 100 MB export), as also where the
    scanner has a limit of its own (CPython 3.12 on) or other threads run (the limit is
    the interpreter's)."""
    hooks: dict[str, Any] = {"parse_int": _int(source), "parse_constant": _constant(source)}
    margin = _margin(hooks) if threading.active_count() == 1 else None
    if margin is not None:
        try:
            return _bounded(text, hooks, MAX_JSON_DEPTH + margin), None
        except RecursionError:
            deepest, offset = _walk(text)
            if deepest > MAX_JSON_DEPTH:
                return None, offset
    data = json.loads(text, **hooks)
    return data, _walk(text)[1] if nesting(data) > MAX_JSON_DEPTH else None


def _bounded(text: str, hooks: dict[str, Any], levels: int) -> Any:
    """``json.loads`` with the recursion limit ``levels`` above this call's own depth."""
    depth = 0
    frame: FrameType | None = sys._getframe()
    while frame is not None:
        depth += 1
        frame = frame.f_back
    was = sys.getrecursionlimit()
    sys.setrecursionlimit(depth + levels)
    try:
        return json.loads(text, **hooks)
    finally:
        sys.setrecursionlimit(was)


_AT_BOUND = "[" * MAX_JSON_DEPTH + "]" * MAX_JSON_DEPTH
_PAST_BOUND = "[" + _AT_BOUND + "]"
_last_margin = [0]


def _margin(hooks: dict[str, Any]) -> int | None:
    """The margin over ``MAX_JSON_DEPTH`` at which ``_bounded``, called from the caller's
    depth, reads a value nested at the bound and refuses one a level deeper; None where
    no margin does (the scanner does not count against the recursion limit)."""
    def holds(margin: int) -> bool | None:  # None: too low, False: too high
        try:
            _bounded(_AT_BOUND, hooks, MAX_JSON_DEPTH + margin)
        except RecursionError:
            return None
        try:
            _bounded(_PAST_BOUND, hooks, MAX_JSON_DEPTH + margin)
        except RecursionError:
            return True
        return False
    if holds(_last_margin[0]):  # the margin of the last call, most often the same
        return _last_margin[0]
    for margin in range(-8, 24):
        verdict = holds(margin)
        if verdict:
            _last_margin[0] = margin
            return margin
        if verdict is False:
            return None  # reads past the bound at the lowest margin that reads the bound
    return None


def nesting(value: Any, limit: int = MAX_JSON_DEPTH) -> int:
    """How deep arrays and objects nest in a parsed value, counted up to ``limit`` + 1: one
    level at a time, each gathered by a comprehension (a 100 MB stack export in about a
    tenth of a second; regular expressions over its text, before, took most of a second).
    The parser's C scanner is safe at any depth itself: it stops with a RecursionError."""
    depth = 0
    level = [value] if type(value) is dict or type(value) is list else []
    while level and depth <= limit:
        depth += 1
        below: list[Any] = []
        for item in level:
            below += [v for v in (item.values() if type(item) is dict else item)
                      if type(v) is dict or type(v) is list]
        level = below
    return depth


def _walk(text: str, stop: int = MAX_JSON_DEPTH + 1) -> tuple[int, int]:
    """The character walk (a refused input only): the deepest nesting up to ``stop`` and
    the offset where it is reached, for the message."""
    depth = deepest = where = 0
    in_string = escaped = False
    for i, ch in enumerate(text):
        if in_string:
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == '"':
                in_string = False
        elif ch == '"':
            in_string = True
        elif ch in "[{":
            depth += 1
            if depth > deepest:
                deepest, where = depth, i
                if deepest >= stop:
                    break
        elif ch in "]}":
            depth -= 1
    return deepest, where


def _int(source: str) -> Callable[[str], int]:
    def parse(text: str) -> int:
        if len(text.lstrip("-")) > MAX_INT_DIGITS:
            raise JsonInputError(f"{source}: a {len(text.lstrip('-'))}-digit number; gpufleet "
                                 f"reads at most {MAX_INT_DIGITS} digits")
        return int(text)
    return parse


def _constant(source: str) -> Callable[[str], Any]:
    def parse(name: str) -> Any:
        raise JsonInputError(f"{source}: {name} is not a JSON number")
    return parse
