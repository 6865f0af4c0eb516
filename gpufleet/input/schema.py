"""Schema pass: kind dispatch and JSON Schema errors -> located diagnostics. Pure.

Never raises on bad input: every problem becomes a :class:`Diagnostic`.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from gpufleet.backends import backend_names
from gpufleet.codes import (
    F006,
    F020,
    L007,
    L008,
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
from gpufleet.diagnostics import Diagnostic, KeyPath, Severity, did_you_mean
from gpufleet.input.coerce import (
    _as_list,
    _not_finite,
    _where,
    coerce,
    narrow_backends,
    schema_of,
)
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
    converted, errors = coerce(doc, kind)
    narrowed = narrow_backends(doc, kind)
    checked.diagnostics += converted + narrowed
    if narrowed:  # backends left out of a list: the errors were for the list before
        errors = list(validator(kind).iter_errors(doc.data))
    for path, value in _not_finite(doc.data, ()):
        checked.bad.add(path)
        checked.diagnostics.append(doc.at_value(
            path, F020, f"{_where(path, kind)} must be a finite number, not {value}; "
            "gpufleet's rule (dstack reads some of these): no bound or price holds for it",
            hint="YAML reads .nan and .inf as numbers; write a number"))
    for err in errors:
        if tuple(err.absolute_path) not in checked.bad:
            _translate(checked, err, kind)
    return checked


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


def _translate(c: Checked, err: Any, kind: str) -> None:
    path: KeyPath = tuple(err.absolute_path)
    v = err.validator
    if v == "additionalProperties":
        _unknown_keys(c, err, path, kind)
        return
    if v == "required":
        for key in err.validator_value:
            if isinstance(err.instance, dict) and key not in err.instance and (
                    (*path, key) not in c.bad):
                c.bad.add((*path, key))
                c.diagnostics.append(c.doc.at_key(
                    path, S004, f"missing required key '{key}' in {_where(path, kind)}",
                    hint=f"add `{key}:`"))
        return
    if v == "anyOf" and err.context and _any_of(c, err, path, kind):
        return
    reported = path in c.bad
    c.bad.add(path)
    if reported and v in ("enum", "const"):
        return  # a value of the wrong type (null, a number) is reported once, as such
    _value_error(c, err, path, kind)


# keys older dstack versions had, and the key that replaced each: `retry_policy` is `retry`
# in dstack 0.22.5 (its server migration of 2024-05-29 removes the old `retry_policy`
# column; spelling alone would suggest `creation_policy`)
RENAMED_KEYS = {"retry_policy": "retry"}


def _unknown_keys(c: Checked, err: Any, path: KeyPath, kind: str) -> None:
    allowed = list(schema_of(err).get("properties", {}))
    unknown = [key for key in err.instance if key not in allowed]
    for key in unknown:
        c.bad.add((*path, key))
    if not path and kind in MOVED_KEYS:
        for key in [k for k in unknown if k in MOVED_KEYS[kind]]:
            unknown.remove(key)
            _moved(c, key, kind)
    for key in unknown[:MAX_UNKNOWN_KEYS]:
        renamed = RENAMED_KEYS.get(key)
        hint = (f"dstack renamed it: use '{renamed}'" if renamed in allowed else
                did_you_mean(key, allowed) or f"allowed keys: {', '.join(allowed)}")
        c.diagnostics.append(c.doc.at_key(
            (*path, key), S001, f"unknown key '{key}' in {_where(path, kind)}", hint=hint))
    if len(unknown) > MAX_UNKNOWN_KEYS:
        rest = unknown[MAX_UNKNOWN_KEYS:]
        c.diagnostics.append(c.doc.at_key(
            (*path, rest[0]), S001, f"{len(rest)} more unknown key(s) in "
            f"{_where(path, kind)}", hint=f"allowed keys: {', '.join(allowed)}"))


def _any_of(c: Checked, err: Any, path: KeyPath, kind: str) -> bool:
    """An `anyOf` reported as the one error that fits the value; False: report it plainly."""
    if all(e.validator == "type" and not e.relative_path for e in err.context):
        types = [t for e in err.context for t in _as_list(e.validator_value)]
        _type_error(c, path, types, err.instance)
        return True
    if all(e.validator in ("type", "const", "minimum") and not e.relative_path
           for e in err.context):  # `blocks`: a number of at least 1, or 'auto'
        _choice_error(c, path, err.context, err.instance, kind)
        return True
    # Report the error of the branch that matches the instance's type, if any.
    same_type = [e for e in err.context if e.validator != "type"]
    if same_type:
        _translate(c, min(same_type, key=lambda e: len(e.path)), kind)
        return True
    return False


_BOUND_WORDS = {"minimum": "greater than or equal to", "exclusiveMinimum": "greater than",
                "maximum": "less than or equal to", "exclusiveMaximum": "less than"}


def _value_error(c: Checked, err: Any, path: KeyPath, kind: str) -> None:
    v, doc = err.validator, c.doc
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
    elif v in _BOUND_WORDS:
        c.diagnostics.append(doc.at_value(
            path, S006, f"Input should be {_BOUND_WORDS[v]} {err.validator_value}",
            hint=schema_of(err).get("x-hint") or f"check `{_where(path, kind)}`"))
    elif v == "minLength":
        c.diagnostics.append(doc.at_value(path, S006, f"{_where(path, kind)} must not be empty"))
    elif v == "maxItems":
        c.diagnostics.append(doc.at_value(
            path, S006, f"{_where(path, kind)} takes at most {err.validator_value} item(s)"))
    elif v == "not" and err.validator_value == {} and path:  # a key another one excludes
        c.diagnostics.append(doc.at_key(path, S001, f"'{path[-1]}' is not allowed here",
                                        hint=schema_of(err).get("x-hint")))
    elif err.schema is False:  # jsonschema puts no key in the path of a `false` schema
        c.diagnostics.append(doc.at_value(path, S001, f"{_where(path, kind)}: a key is not "
                                          "allowed here", hint=f"check `{_where(path, kind)}`"))
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
        elif e.validator == "minimum" or (e.validator == "type" and "minimum" in schema_of(e)):
            words.append(f"a whole number of at least {schema_of(e).get('minimum')}")
        elif e.validator == "type":
            words += [_TYPE_NAMES.get(t, t) for t in _as_list(e.validator_value)]
    unique = list(dict.fromkeys(words))
    c.bad.add(path)
    c.diagnostics.append(c.doc.at_value(
        path, S003, f"{_where(path, kind)} must be {' or '.join(unique)}, not "
        f"{json.dumps(instance) if not isinstance(instance, str) else repr(instance)}"))


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
    supported_ones = backend_names()
    is_backend = set(allowed) == set(supported_ones)
    supported = ", ".join(supported_ones)
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
