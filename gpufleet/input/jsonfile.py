"""Bounded reading of JSON inputs (a `pulumi stack export`, `pulumi stack output --json`):
a regular file of at most ``MAX_JSON_BYTES``, UTF-8, nested at most ``MAX_JSON_DEPTH``
levels, integers of at most 30 digits and no NaN or Infinity. Anything else is a
``JsonInputError`` saying what is wrong, never an exception of the parser's.
"""

from __future__ import annotations

import json
import os
import re
import stat
from collections.abc import Callable
from typing import Any

MAX_JSON_BYTES = 256 * 1024 * 1024  # a stack of thousands of resources stays far below
MAX_JSON_DEPTH = 100  # Pulumi's own documents nest a few tens of levels
MAX_INT_DIGITS = 30


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
        with open(path, "rb") as fh:
            return fh.read(MAX_JSON_BYTES + 1)
    except OSError as e:
        raise JsonInputError(f"cannot read {path}: {e.strerror or e}") from None


def read_json_file(path: str, what: str) -> Any:
    """Read, decode and parse one JSON file, within the bounds above."""
    return parse_json(read_bounded(path, what), path, what)


def parse_json(raw: bytes, source: str, what: str) -> Any:
    if len(raw) > MAX_JSON_BYTES:
        raise JsonInputError(f"{source}: larger than {MAX_JSON_BYTES // (1 << 20)} MB; this "
                             f"is not {what}")
    if raw.startswith((b"\xff\xfe", b"\xfe\xff")):
        raise JsonInputError(f"{source}: UTF-16 text; {what} is UTF-8 (PowerShell's `>` "
                             "writes UTF-16: use `--file` or `Out-File -Encoding utf8`)")
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        raise JsonInputError(f"{source}: not UTF-8 text (byte 0x{raw[e.start]:02x} at offset "
                             f"{e.start}); {what} is UTF-8 JSON") from None
    depth, offset = json_depth(text)
    if depth > MAX_JSON_DEPTH:
        raise JsonInputError(f"{source}: nested deeper than {MAX_JSON_DEPTH} levels (at offset "
                             f"{offset}); this is not {what}")
    try:
        return json.loads(text, parse_int=_int(source), parse_constant=_constant(source))
    except json.JSONDecodeError as e:
        raise JsonInputError(f"{source}:{e.lineno}:{e.colno}: not valid JSON ({e.msg})") \
            from None


# A JSON string (its escapes included), and a character that is none of the four brackets
_STRING = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"', re.DOTALL)
_NOT_BRACKET = re.compile(r"[^\[\]{}]+")


def json_depth(text: str) -> tuple[int, int]:
    """The deepest nesting of arrays and objects outside strings, and, past
    ``MAX_JSON_DEPTH``, the offset where the bound is passed (0 within it). JSON's grammar
    makes this exact: strings are the only place brackets hide.

    The strings and everything but brackets are dropped with regular expressions (C speed:
    a 100 MB stack export in well under a second); only an input nested past the bound is
    walked again character by character, for the offset the message names."""
    structure = _STRING.sub("", text)
    quote = structure.find('"')
    if quote >= 0:  # an unterminated string: everything after its quote is inside it
        structure = structure[:quote]
    brackets = _NOT_BRACKET.sub("", structure)
    depth = deepest = 0
    for step in brackets.translate(_STEPS).encode("ascii"):
        depth += 1 if step == 43 else -1  # "+" opens, "-" closes
        if depth > deepest:
            deepest = depth
            if deepest > MAX_JSON_DEPTH:
                return _walk(text)
    return deepest, 0


_STEPS = str.maketrans({"[": "+", "{": "+", "]": "-", "}": "-"})


def _walk(text: str, stop: int = MAX_JSON_DEPTH + 1) -> tuple[int, int]:
    """The character walk: the deepest nesting up to ``stop`` and where it is reached."""
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
