"""Schema pass: kind dispatch and JSON Schema errors -> located diagnostics. Pure.

Never raises on bad input: every problem becomes a :class:`Diagnostic`.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from gpufleet.backends import SUPPORTED_BACKENDS
from gpufleet.codes import (
    F006,
    F020,
    F022,
    L007,
    L008,
    L013,
    S001,
    S002,
    S003,
    S004,
    S005,
    S006,
    S007,
    S009,
    S010,
)
from gpufleet.diagnostics import Diagnostic, KeyPath, Severity, did_you_mean, format_path
from gpufleet.input.loader import Document
from gpufleet.input.schema_files import validator
from gpufleet.input.spec import DSTACK_BACKENDS, SETTINGS_KEYS

DSTACK_RUN_KINDS = ("dev-environment", "task", "service", "preset")
_TYPE_NAMES = {"string": "a string", "integer": "an integer", "number": "a number",
               "boolean": "a boolean", "object": "a mapping", "array": "a list", "null": "null"}
_NAME_PATTERN = "^[a-z][a-z0-9-]{1,40}$"


@dataclass(slots=True)
class Checked:
    """A document with its kind, schema diagnostics and the key paths they cover."""

    doc: Document
    kind: str | None
    diagnostics: list[Diagnostic] = field(default_factory=list)
    bad: set[KeyPath] = field(default_factory=set)

    def ok_above(self, path: KeyPath) -> bool:
        """True when no schema error sits at ``path`` or any of its parents."""
        return not any(path[: len(p)] == p for p in self.bad)

    def ok(self, path: KeyPath) -> bool:
        """True when no schema error sits at, above or below ``path``."""
        n = len(path)
        return not any(p[:n] == path or path[: len(p)] == p for p in self.bad)


def detect_kind(doc: Document) -> tuple[str | None, list[Diagnostic]]:
    data = doc.data
    if not isinstance(data, dict):
        got = _describe(data)
        return None, [doc.at_value((), L007, f"expected a mapping with a `type` key, got {got}",
                                   hint="start the document with `type: fleet` or "
                                        "`type: gateway`")]
    kind = data.get("type")
    if kind is None:
        if "profiles" in data:
            return "profiles", []
        if "lock_version" in data:
            return "lock", []
        items = data.get("backends")
        if isinstance(items, list) and items and all(isinstance(i, dict) for i in items):
            return "backends", []
        if SETTINGS_KEYS & set(data) and "backends" not in data:
            return "backends", []  # gpufleet's settings only (`gateways: {gw: {dns_zone}}`)
        return None, [doc.at_key((), L007, "missing `type`: cannot tell what this document is",
                                 hint="add `type: fleet` or `type: gateway`")]
    if kind in ("fleet", "gateway", "volume"):
        return kind, []
    if isinstance(kind, bool | int | float):
        return None, [doc.at_value(("type",), L007, f"`type` must be `fleet` or `gateway`, "
                                   f"not the {type(kind).__name__} {str(kind).lower()}",
                                   hint="YAML reads an unquoted yes/no/on/off as a boolean; "
                                        "write `type: fleet` or `type: gateway`")]
    if isinstance(kind, str) and kind in DSTACK_RUN_KINDS:
        return None, [doc.at_value(("type",), L008, f"`type: {kind}` is a dstack {kind} "
                                   "configuration; gpufleet only reads fleets and gateways "
                                   "(skipped)", severity=Severity.WARNING)]
    return None, [doc.at_value(("type",), L007, f"unknown configuration type '{kind}'",
                               hint=did_you_mean(str(kind), ["fleet", "gateway"])
                               or "gpufleet reads `type: fleet` and `type: gateway`")]


def check_schema(doc: Document) -> Checked:
    kind, diags = detect_kind(doc)
    checked = Checked(doc, kind, diags)
    if kind is None:
        checked.bad.add(())
        return checked
    checked.diagnostics += coerce(doc, kind)
    checked.diagnostics += narrow_backends(doc, kind)
    for path, value in _not_finite(doc.data, ()):
        checked.bad.add(path)
        checked.diagnostics.append(doc.at_value(
            path, F020, f"{_where(path, kind)} must be a finite number, not {value}; "
            "gpufleet's rule (dstack reads some of these): no bound or price holds for it",
            hint="YAML reads .nan and .inf as numbers; write a number"))
    for err in validator(kind).iter_errors(doc.data):
        if tuple(err.absolute_path) not in checked.bad:
            _translate(checked, err, kind)
    return checked


_INT_TEXT = re.compile(r"[+-]?[0-9]{1,30}")
_FLOAT_TEXT = re.compile(r"[+-]?([0-9]{1,30}(\.[0-9]{0,30})?|\.[0-9]{1,30})([eE][+-]?[0-9]{1,3})?")
_BOOL_TEXT = {"1": True, "on": True, "t": True, "true": True, "y": True, "yes": True,
              "0": False, "off": False, "f": False, "false": False, "n": False, "no": False}
_UNSET = object()


def _convert(value: Any, types: Iterable[str]) -> Any:
    """``value`` as pydantic's lax mode (which dstack's models use) reads it for a field of
    one of ``types``, else _UNSET."""
    wanted = list(types)
    if isinstance(value, bool):
        return _UNSET
    if isinstance(value, str):
        text = value.strip()
        if "integer" in wanted and _INT_TEXT.fullmatch(text):
            return int(text)
        if "number" in wanted and _FLOAT_TEXT.fullmatch(text) and math.isfinite(float(text)):
            return float(text)
        if "boolean" in wanted and text.lower() in _BOOL_TEXT:
            return _BOOL_TEXT[text.lower()]
        return _UNSET
    if isinstance(value, float) and "object" in wanted:
        return _UNSET  # `nodes: 2.0`, `gpu: 2.0`: dstack's parsers for these refuse a float
    if isinstance(value, float) and "integer" in wanted and value.is_integer():
        return int(value)
    if isinstance(value, int | float) and "string" in wanted:
        return str(value)
    if isinstance(value, int) and "boolean" in wanted and value in (0, 1):
        return bool(value)
    return _UNSET


def _wanted_types(err: Any) -> list[str]:
    if err.validator == "type":
        return _as_list(err.validator_value)
    if err.validator in ("anyOf", "oneOf") and err.context:
        return [t for e in err.context if e.validator == "type" and not e.relative_path
                for t in _as_list(e.validator_value)]
    return []


def _convertible(err: Any) -> Iterable[Any]:
    """``err`` and, below a union (`cpu: {min: 4.0}`), the errors inside the value of the
    branch its type matched (a branch of another type has its error at the value itself)."""
    yield err
    for e in err.context or ():
        if e.relative_path:
            yield from _convertible(e)


def coerce(doc: Document, kind: str) -> list[Diagnostic]:
    """Values of the wrong type that dstack's models convert (`max_price: '1.25'`,
    `reservation: 12345`, `blocks: '4'`, `default: 'true'`, `replicas: 2.0`): converted the same
    way, each with a warning, so that gpufleet accepts what dstack accepts."""
    out: list[Diagnostic] = []
    done: set[KeyPath] = set()
    for _ in range(4):  # a conversion can uncover another (a list of them)
        changed = False
        errors = [e for top in validator(kind).iter_errors(doc.data) for e in _convertible(top)]
        for err in errors:
            path = tuple(err.absolute_path)
            if err.schema.get("x-coerce") is False or path in done:
                continue
            new = _convert(err.instance, _wanted_types(err))
            if new is _UNSET or not path or not _set(doc.data, path, new):
                continue
            changed = True
            done.add(path)
            out.append(doc.at_value(path, L013, f"{_where(path, kind)}: {err.instance!r} is "
                                    f"read as {json.dumps(new)}, as dstack's models convert it",
                                    severity=Severity.WARNING,
                                    hint=f"write {json.dumps(new)} to say so"))
        if not changed:
            break
    return out


def narrow_backends(doc: Document, kind: str) -> list[Diagnostic]:
    """`backends: [azure, lambda]`: dstack backends gpufleet does not build are dropped from
    a list that names one it does, with a warning (dstack would consider them too). A list
    of such backends only stays an error (F006): nothing would be left."""
    data = doc.data
    if kind == "fleet" and isinstance(data, dict):
        paths: list[KeyPath] = [("backends",)]
    elif kind == "profiles" and isinstance(data, dict) and isinstance(data.get("profiles"),
                                                                      list):
        paths = [("profiles", i, "backends") for i in range(len(data["profiles"]))]
    else:
        return []
    out = []
    for path in paths:
        holder = data
        for key in path[:-1]:
            holder = holder[key]
        value = holder.get(path[-1]) if isinstance(holder, dict) else None
        if not isinstance(value, list) or not all(isinstance(b, str) for b in value):
            continue
        kept = [b for b in value if b in SUPPORTED_BACKENDS]
        dropped = [(i, b) for i, b in enumerate(value) if b not in SUPPORTED_BACKENDS]
        if not kept or not dropped or any(b not in DSTACK_BACKENDS for _, b in dropped):
            continue
        for i, b in dropped:
            out.append(doc.at_value((*path, i), F022, f"backend '{b}' is left out: gpufleet "
                                    f"builds on {', '.join(SUPPORTED_BACKENDS)}; this "
                                    f"{'fleet' if kind == 'fleet' else 'profile'} uses "
                                    f"{', '.join(kept)}", severity=Severity.WARNING,
                                    hint=f"dstack still considers '{b}' when it provisions "
                                         "on its own; remove it here to say so"))
        holder[path[-1]] = kept
    return out


def _set(data: Any, path: KeyPath, value: Any) -> bool:
    for key in path[:-1]:
        data = data[key]
    if isinstance(data, dict | list):
        data[path[-1]] = value  # type: ignore[index]
        return True
    return False


def _not_finite(data: Any, path: KeyPath) -> list[tuple[KeyPath, str]]:
    """Where the document holds .nan or .inf (no bound holds for NaN, so the schema's
    bounds would let it through)."""
    if isinstance(data, float) and not math.isfinite(data):
        return [(path, ".nan" if math.isnan(data) else ("-.inf" if data < 0 else ".inf"))]
    items = data.items() if isinstance(data, dict) else enumerate(data) \
        if isinstance(data, list) else ()
    return [hit for k, v in items for hit in _not_finite(v, (*path, k))]


def _describe(v: Any) -> str:
    if v is None:
        return "null"
    if isinstance(v, bool):
        return "a boolean"
    if isinstance(v, int | float):
        return "a number"
    if isinstance(v, str):
        return "a string"
    if isinstance(v, list):
        return "a list"
    return "a mapping"


MAX_UNKNOWN_KEYS = 20  # per mapping; the rest are summed up in one diagnostic


def _where(path: KeyPath, kind: str) -> str:
    return format_path(path) or kind


def _translate(c: Checked, err: Any, kind: str) -> None:
    path: KeyPath = tuple(err.absolute_path)
    v = err.validator
    doc = c.doc
    if v == "additionalProperties":
        allowed = list(err.schema.get("properties", {}))
        unknown = [key for key in err.instance if key not in allowed]
        for key in unknown:
            c.bad.add((*path, key))
        if not path and kind in MOVED_KEYS:
            for key in [k for k in unknown if k in MOVED_KEYS[kind]]:
                unknown.remove(key)
                _moved(c, key, kind)
        for key in unknown[:MAX_UNKNOWN_KEYS]:
            c.diagnostics.append(doc.at_key(
                (*path, key), S001, f"unknown key '{key}' in {_where(path, kind)}",
                hint=did_you_mean(key, allowed) or f"allowed keys: {', '.join(allowed)}"))
        if len(unknown) > MAX_UNKNOWN_KEYS:
            rest = unknown[MAX_UNKNOWN_KEYS:]
            c.diagnostics.append(doc.at_key(
                (*path, rest[0]), S001, f"{len(rest)} more unknown key(s) in "
                f"{_where(path, kind)}", hint=f"allowed keys: {', '.join(allowed)}"))
        return
    if v == "required":
        for key in err.validator_value:
            if isinstance(err.instance, dict) and key not in err.instance and (
                    (*path, key) not in c.bad):
                c.bad.add((*path, key))
                c.diagnostics.append(doc.at_key(
                    path, S004, f"missing required key '{key}' in {_where(path, kind)}",
                    hint=f"add `{key}:`"))
        return
    if v == "anyOf" and err.context:
        if all(e.validator == "type" and not e.relative_path for e in err.context):
            types = [t for e in err.context for t in _as_list(e.validator_value)]
            _type_error(c, path, types, err.instance)
            return
        if all(e.validator in ("type", "const", "minimum") and not e.relative_path
               for e in err.context):  # `blocks`: a number of at least 1, or 'auto'
            _choice_error(c, path, err.context, err.instance, kind)
            return
        # Report the error of the branch that matches the instance's type, if any.
        same_type = [e for e in err.context if e.validator != "type"]
        if same_type:
            _translate(c, min(same_type, key=lambda e: len(e.path)), kind)
            return
    reported = path in c.bad
    c.bad.add(path)
    if reported and v in ("enum", "const"):
        return  # a value of the wrong type (null, a number) is reported once, as such
    if v == "type":
        _type_error(c, path, _as_list(err.validator_value), err.instance)
    elif v == "enum":
        _enum_error(c, path, err.validator_value, err.instance, kind)
    elif v == "const":
        c.diagnostics.append(doc.at_value(path, S003, f"{_where(path, kind)} must be "
                                          f"'{err.validator_value}'"))
    elif (v == "pattern" and err.validator_value == _NAME_PATTERN
          and re.match(_NAME_PATTERN, err.instance)):  # Python's `$` lets a final "\n" in
        c.diagnostics.append(doc.at_value(
            path, S010, f"{_where(path, kind)} ends in a line break; gpufleet's rule (dstack's "
            "pattern lets it through): no cloud takes a line break in a resource name",
            hint="remove the line break (a `|` block or a \"\\n\" escape puts it there)"))
    elif v == "pattern" and err.validator_value == _NAME_PATTERN:
        c.diagnostics.append(doc.at_value(
            path, S005, f"Resource name should match regex '{_NAME_PATTERN}'",
            hint="use lower-case letters, digits and dashes, starting with a letter "
                 "(2-41 characters)"))
    elif v in ("minimum", "exclusiveMinimum", "maximum", "exclusiveMaximum"):
        words = {"minimum": "greater than or equal to", "exclusiveMinimum": "greater than",
                 "maximum": "less than or equal to", "exclusiveMaximum": "less than"}[v]
        c.diagnostics.append(doc.at_value(
            path, S006, f"Input should be {words} {err.validator_value}",
            hint=err.schema.get("x-hint") or f"check `{_where(path, kind)}`"))
    elif v == "minLength":
        c.diagnostics.append(doc.at_value(path, S006, f"{_where(path, kind)} must not be empty"))
    elif v == "maxItems":
        c.diagnostics.append(doc.at_value(
            path, S006, f"{_where(path, kind)} takes at most {err.validator_value} item(s)"))
    elif v == "False" or err.validator_value is False:
        c.diagnostics.append(doc.at_key(path, S001, f"'{path[-1]}' is not allowed here"))
    else:
        c.diagnostics.append(doc.at_value(path, S007, f"{_where(path, kind)}: {err.message}"))


# gpufleet settings that once sat in dstack's files (which dstack refuses): where they are now.
MOVED_KEYS = {"fleet": ("previous_names",),
              "gateway": ("dns_zone", "protect_address", "create_dns_zone")}


def _moved(c: Checked, key: str, kind: str) -> None:
    name = c.doc.data.get("name") if isinstance(c.doc.data, dict) else None
    value = c.doc.data.get(key)
    shown = json.dumps(value) if isinstance(value, list | bool) else value
    c.diagnostics.append(c.doc.at_key(
        (key,), S009, f"`{key}` is a gpufleet setting, and dstack refuses a {kind} file that "
        "carries it; it moved to the backends file",
        hint=f"remove it here and write in the backends file: `{kind}s: {{{name or '<name>'}: "
             f"{{{key}: {shown}}}}}`"))


def _choice_error(c: Checked, path: KeyPath, context: Iterable[Any], instance: Any,
                  kind: str) -> None:
    words = []
    for e in context:
        if e.validator == "const":
            words.append(f"'{e.validator_value}'")
        elif e.validator == "minimum" or (e.validator == "type" and "minimum" in e.schema):
            words.append(f"a whole number of at least {e.schema.get('minimum')}")
        elif e.validator == "type":
            words += [_TYPE_NAMES.get(t, t) for t in _as_list(e.validator_value)]
    unique = list(dict.fromkeys(words))
    c.bad.add(path)
    c.diagnostics.append(c.doc.at_value(
        path, S003, f"{_where(path, kind)} must be {' or '.join(unique)}, not "
        f"{json.dumps(instance) if not isinstance(instance, str) else repr(instance)}"))


def _as_list(v: Any) -> list[str]:
    return list(v) if isinstance(v, list) else [v]


def _type_error(c: Checked, path: KeyPath, types: Iterable[str], instance: Any) -> None:
    names = []
    for t in types:
        if _TYPE_NAMES.get(t, t) not in names:
            names.append(_TYPE_NAMES.get(t, t))
    want = names[0] if len(names) == 1 else ", ".join(names[:-1]) + " or " + names[-1]
    c.bad.add(path)
    hint = None
    if isinstance(instance, float) and "integer" in types:
        hint = (f"{instance!r} has a fraction; write a whole number"
                + (" or a range like \"1..4\"" if "string" in types else ""))
    elif isinstance(instance, bool) and "string" in types:
        hint = "YAML reads an unquoted yes/no/on/off/true/false as a boolean; quote it"
    elif isinstance(instance, int | float) and "string" in types:
        hint = f"YAML reads {instance!r} as a number; quote it: '{instance!r}'"
    c.diagnostics.append(c.doc.at_value(
        path, S002, f"{_where(path, c.kind or '')} must be {want}, not {_describe(instance)}",
        hint=hint))


def _enum_error(c: Checked, path: KeyPath, allowed: list[Any], value: Any, kind: str) -> None:
    is_backend = set(allowed) == set(SUPPORTED_BACKENDS)
    supported = ", ".join(SUPPORTED_BACKENDS)
    if is_backend and isinstance(value, str) and value in DSTACK_BACKENDS:
        if kind == "gateway":
            msg = f"Gateways are not supported for {value} backend by gpufleet"
        else:
            msg = f"backend '{value}' is not supported by gpufleet"
        c.diagnostics.append(c.doc.at_value(
            path, F006, msg, hint=f"gpufleet builds infrastructure on {supported}; "
                                    f"remove '{value}'"))
        return
    choices = ", ".join(f"'{a}'" for a in allowed)
    what = "backend" if is_backend else _where(path, kind)
    hint = did_you_mean(str(value), [str(a) for a in allowed]) if isinstance(value, str) else None
    c.diagnostics.append(c.doc.at_value(
        path, S003, f"invalid {what} '{value}': expected one of {choices}", hint=hint))
