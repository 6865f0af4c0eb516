"""Located diagnostics: the one error record every pass returns, and its text/JSON renderers.

Pure: nothing here reads files; renderers take the source text they quote as an argument.
"""

from __future__ import annotations

import difflib
import json
import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum

KeyPath = tuple[str | int, ...]


class Severity(StrEnum):
    ERROR = "error"
    WARNING = "warning"


@dataclass(frozen=True, slots=True, order=True)
class Diagnostic:
    """One problem found in one input file, located at 1-based line and column."""

    file: str
    line: int
    column: int
    code: str
    message: str
    path: KeyPath = field(default=(), compare=False)
    severity: Severity = field(default=Severity.ERROR, compare=False)
    hint: str | None = field(default=None, compare=False)

    @property
    def is_error(self) -> bool:
        return self.severity is Severity.ERROR


def format_path(path: KeyPath) -> str:
    """Render a key path the way users write it: ``resources.gpu``, ``backends[1]``."""
    out = ""
    for part in path:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += f".{part}" if out else str(part)
    return out


def json_path(path: KeyPath) -> str:
    """Render a key path as JSONPath (``$.resources.gpu``)."""
    out = "$"
    for part in path:
        out += f"[{part}]" if isinstance(part, int) else f".{part}"
    return out


def did_you_mean(word: str, choices: Iterable[str], cutoff: float = 0.6) -> str | None:
    """Return a ``did you mean 'x'?`` hint for the closest choice, if any is close enough."""
    matches = difflib.get_close_matches(word, list(choices), n=1, cutoff=cutoff)
    return f"did you mean '{matches[0]}'?" if matches else None


def sort_diagnostics(diags: Iterable[Diagnostic]) -> list[Diagnostic]:
    return sorted(diags, key=lambda d: (d.file, d.line, d.column, d.code, d.message))


def render_text(
    diags: Sequence[Diagnostic], sources: Mapping[str, Sequence[str]] | None = None
) -> str:
    """Render diagnostics as ``file:line:col: severity[CODE]: message`` blocks with a caret."""
    blocks = []
    for d in diags:
        lines = [f"{printable(d.file)}:{d.line}:{d.column}: {d.severity.value}[{d.code}]: "
                 f"{printable(d.message)}"]
        if d.hint:
            lines.append(f"  hint: {printable(d.hint)}")
        src = (sources or {}).get(d.file)
        if src is not None and 1 <= d.line <= len(src):
            text, column = window(src[d.line - 1].rstrip("\r\n"), d.column)
            gutter = str(d.line)
            lines.append(f"  {gutter:>4} | {text}")
            lines.append(f"  {'':>4} | {' ' * (column - 1)}^")
        blocks.append("\n".join(lines))
    return "\n".join(blocks)


_CONTROL = {c: f"\\x{c:02x}" for c in (*range(0x20), 0x7F)}
_CONTROL.update({0x09: "\\t", 0x0A: "\\n", 0x0D: "\\r"})
_CONTROL.update({c: f"\\u{c:04x}" for c in (*range(0x80, 0xA0), 0x2028, 0x2029)})
MAX_MESSAGE = 2000
WINDOW = 120


def printable(text: str) -> str:
    """Control characters (newlines, terminal escapes) spelled out, so that text from a file
    can never start a line of its own or drive the terminal; long text is cut."""
    out = text.translate(_CONTROL)
    return out if len(out) <= MAX_MESSAGE else out[:MAX_MESSAGE] + "..."


def window(line: str, column: int) -> tuple[str, int]:
    """At most WINDOW characters of a source line around ``column``, made printable, and the
    caret's column within what is shown."""
    line = line.expandtabs(1)  # a tab is one column for the YAML parser too
    start = max(0, min(column - 1 - WINDOW // 3, len(line) - WINDOW))
    part = line[start:start + WINDOW]
    shown = ("..." if start else "") + part + ("..." if start + WINDOW < len(line) else "")
    before = printable(("..." if start else "") + line[start:column - 1])
    return printable(shown), len(before) + 1


def to_record(d: Diagnostic) -> dict[str, object]:
    return {
        "file": d.file,
        "line": d.line,
        "column": d.column,
        "path": json_path(d.path),
        "code": d.code,
        "severity": d.severity.value,
        "message": d.message,
        "hint": d.hint,
    }


def render_json(diags: Sequence[Diagnostic]) -> str:
    return json.dumps([to_record(d) for d in diags], indent=2)


def display_path(path: str) -> str:
    """A path as shown in diagnostics: relative to the working directory when inside it."""
    try:
        rel = os.path.relpath(path)
    except ValueError:
        return path
    return path if rel.startswith("..") else rel
