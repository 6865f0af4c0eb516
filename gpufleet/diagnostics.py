"""Located diagnostics: the one error record every pass returns, and its text/JSON renderers.

Pure: nothing here reads files; renderers take the source text they quote as an argument.
"""

from __future__ import annotations

import json
import os
import re
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
    import difflib  # here, not at import: only a mistake needs it

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


_SUBJECT = re.compile(r"\b(fleet|gateway) '([^'\n]{1,200})'")


@dataclass(frozen=True, slots=True)
class Folded:
    """Diagnostics that say the same of several fleets or gateways, as one."""

    first: Diagnostic  # where the first of them is, its message as written
    kind: str  # "fleet", "gateway" or "" when the message names neither
    subjects: tuple[str, ...]  # the fleets or gateways, in order
    message: str  # the message without the subject
    locations: tuple[tuple[str, int, int], ...]

    def to_json(self) -> dict[str, object]:
        d = self.first
        return {"code": d.code, "severity": d.severity.value, "file": d.file, "line": d.line,
                "column": d.column, "message": self.message if len(self) > 1 else d.message,
                "hint": d.hint,
                "fleets": list(self.subjects) if self.kind == "fleet" else [],
                "gateways": list(self.subjects) if self.kind == "gateway" else [],
                "locations": [{"file": f, "line": ln, "column": c}
                              for f, ln, c in self.locations]}

    def __len__(self) -> int:
        return len(self.locations)


def fold(diags: Sequence[Diagnostic]) -> list[Folded]:
    """Identical diagnostics about different fleets or gateways folded into one, in the
    order of their first appearance; exact repeats are dropped."""
    groups: dict[tuple[str, str, str, str], list[tuple[Diagnostic, str, str]]] = {}
    for d in diags:
        m = _SUBJECT.search(d.message)
        kind, subject = (m.group(1), m.group(2)) if m else ("", "")
        template = _SUBJECT.sub(lambda x: f"{x.group(1)} \x00", d.message, count=1)
        if subject:
            template = template.replace(subject, "\x00")
        hint = (d.hint or "").replace(subject, "\x00") if subject else (d.hint or "")
        key = (d.severity.value, d.code, template, hint)
        members = groups.setdefault(key, [])
        if all((d.file, d.line, d.column, subject) != (o.file, o.line, o.column, s)
               for o, s, _ in members):
            members.append((d, subject, kind))
    out = []
    for (_, _, template, _), members in groups.items():
        first, _, kind = members[0]
        subjects = tuple(dict.fromkeys(s for _, s, _ in members if s))
        rest = template.replace(f"{kind} \x00: ", "", 1) if kind else template
        rest = rest.replace(f"{kind} \x00", f"the {kind}").replace("\x00", f"<{kind}>") \
            if kind else rest
        out.append(Folded(first, kind, subjects, rest,
                          tuple((d.file, d.line, d.column) for d, _, _ in members)))
    return out


def _names(names: Sequence[str], shown: int = 3) -> str:
    more = len(names) - shown
    return ", ".join(names[:shown]) + (f" (+{more})" if more > 0 else "")


def render_folded(diags: Sequence[Diagnostic],
                  sources: Mapping[str, Sequence[str]] | None = None) -> str:
    """Warnings said once: diagnostics about several fleets become one line naming them, with
    where each is; a diagnostic about one place renders as ``render_text`` does."""
    blocks = []
    for f in fold(diags):
        if len(f) == 1:
            blocks.append(render_text([f.first], sources))
            continue
        d = f.first
        who = f"{f.kind}s {_names(list(f.subjects))}: " if f.subjects else ""
        lines = [f"{d.severity.value}[{d.code}]: {who}{printable(f.message)}"]
        if d.hint:
            lines.append(f"  hint: {printable(d.hint)}")
        where = [f"{printable(fl)}:{ln}:{c}" for fl, ln, c in f.locations]
        lines.append(f"  at: {_names(where, 3)}")
        blocks.append("\n".join(lines))
    return "\n".join(blocks)
