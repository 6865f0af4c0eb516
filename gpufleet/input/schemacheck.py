"""The schema pass without importing jsonschema: a Draft 2020-12 checker for the keywords the
shipped schemas use, whose errors carry what jsonschema's `ValidationError` carries and gpufleet
reads (``validator``, ``validator_value``, ``instance``, ``schema``, ``relative_path``/``path``,
``absolute_path``, ``context``, ``message``), in jsonschema's order and with its messages.

Why: importing jsonschema and walking a document through it were half of `gpufleet validate`'s
run (bench/validate.py, issue 60). jsonschema stays the reference: a schema with a keyword this
module does not implement (``unsupported`` says which) is checked by jsonschema as before, and
tests/test_schemacheck.py holds the two to the same errors on generated documents.

Refs: every `$ref` reaching here is absolute (``schema_files.inlined`` made it so); it is looked
up with the checker's ``resolve`` and inlined once, then validated like any node.
"""

from __future__ import annotations

import numbers
import re
from collections import deque
from collections.abc import Callable, Iterator, Sized
from functools import cache
from typing import Any

# Draft 2020-12 keywords (jsonschema's validator table) this module does not implement: a
# schema with any of them, a nested `$id` or an anchor is left to jsonschema.
_NOT_HERE = frozenset({
    "$dynamicRef", "$dynamicAnchor", "$anchor", "$recursiveRef", "contains", "dependentRequired",
    "dependentSchemas", "multipleOf", "prefixItems", "unevaluatedItems", "unevaluatedProperties",
    "uniqueItems", "minContains", "maxContains", "format"})
_TYPES = frozenset({"object", "array", "string", "integer", "number", "boolean", "null"})
_SUBSCHEMA_MAPS = ("properties", "patternProperties", "$defs")
_SUBSCHEMA_LISTS = ("allOf", "anyOf", "oneOf")


def unsupported(node: Any, root: bool = True) -> str | None:
    """The first thing in ``node`` this module leaves to jsonschema, or None."""
    if isinstance(node, bool):
        return None
    if not isinstance(node, dict):
        return f"a schema that is a {type(node).__name__}"
    for key, value in node.items():
        if key in _NOT_HERE or (key == "$id" and not root):
            return str(key)
        if key == "type" and any(t not in _TYPES for t in _listed(value)):
            return f"type {value!r}"
        if key in _SUBSCHEMA_MAPS and isinstance(value, dict):
            found = next((f for v in value.values() if (f := unsupported(v, False))), None)
        elif key in _SUBSCHEMA_LISTS and isinstance(value, list):
            found = next((f for v in value if (f := unsupported(v, False))), None)
        elif key in ("additionalProperties", "items", "propertyNames", "not", "if", "then",
                     "else"):
            found = unsupported(value, False)
        else:
            continue
        if found:
            return found
    return None


def _listed(value: Any) -> list[Any]:
    return value if isinstance(value, list) else [value]


class SchemaError:
    """One error, as jsonschema's `ValidationError` carries it (the fields gpufleet reads)."""

    __slots__ = (
        "_message",
        "context",
        "instance",
        "parent",
        "relative_path",
        "schema",
        "validator",
        "validator_value",
    )

    def __init__(self, message: str | Callable[[], str], validator: Any = None,
                 value: Any = None, instance: Any = None, schema: Any = None,
                 context: list[SchemaError] | None = None) -> None:
        self._message = message
        self.validator, self.validator_value = validator, value
        self.instance, self.schema = instance, schema
        self.relative_path: deque[str | int] = deque()
        self.context = context or []
        self.parent: SchemaError | None = None
        for child in self.context:
            child.parent = self

    @property
    def message(self) -> str:
        if not isinstance(self._message, str):
            self._message = self._message()
        return self._message

    @property
    def path(self) -> deque[str | int]:
        return self.relative_path

    @property
    def absolute_path(self) -> deque[str | int]:
        if self.parent is None:
            return self.relative_path
        out = deque(self.relative_path)
        out.extendleft(reversed(self.parent.absolute_path))
        return out

    def __repr__(self) -> str:
        return f"<SchemaError: {self.message!r}>"


Errors = list[SchemaError]
Keyword = Callable[["Checker", Any, Any, dict[str, Any]], Errors]


class Checker:
    """Validates instances against one schema (``iter_errors``, ``is_valid``)."""

    def __init__(self, root: Any, resolve: Callable[[str], Any]) -> None:
        self.schema = root
        self.resolve = resolve  # an absolute `$ref` -> the node it points at
        self._plans: dict[int, tuple[Any, list[tuple[Keyword, str, Any]]]] = {}

    def iter_errors(self, instance: Any) -> Iterator[SchemaError]:
        return iter(self.errors(self.schema, instance))

    def is_valid(self, instance: Any) -> bool:
        return not self.errors(self.schema, instance)

    def errors(self, node: Any, instance: Any) -> Errors:
        if node is True:
            return []
        if node is False:
            return [SchemaError(lambda: f"False schema does not allow {instance!r}",
                                instance=instance, schema=False)]
        out: Errors = []
        for check, key, value in self._plan(node):
            found = check(self, value, instance, node)
            if found:
                for err in found:
                    if err.validator is None and err.schema is None:
                        err.validator, err.validator_value = key, value
                        err.instance, err.schema = instance, node
                out += found
        return out

    def descend(self, node: Any, instance: Any, path: str | int | None = None) -> Errors:
        found = self.errors(node, instance)
        if path is not None:
            for err in found:
                err.relative_path.appendleft(path)
        return found

    def _plan(self, node: dict[str, Any]) -> list[tuple[Keyword, str, Any]]:
        entry = self._plans.get(id(node))
        if entry is None or entry[0] is not node:
            entry = (node, [(KEYWORDS[k], k, v) for k, v in node.items() if k in KEYWORDS])
            self._plans[id(node)] = entry
        return entry[1]


def _is_number(v: Any) -> bool:
    return isinstance(v, numbers.Number) and not isinstance(v, bool)


_IS: dict[str, Callable[[Any], bool]] = {
    "object": lambda v: isinstance(v, dict),
    "array": lambda v: isinstance(v, list),
    "string": lambda v: isinstance(v, str),
    "integer": lambda v: isinstance(v, int) and not isinstance(v, bool),  # no 2.0 (schema_files)
    "number": _is_number,
    "boolean": lambda v: isinstance(v, bool),
    "null": lambda v: v is None,
}


def equal(one: Any, two: Any) -> bool:
    """JSON equality: true is not 1, lists and mappings compared item by item."""
    if one is two:
        return True
    if isinstance(one, str) or isinstance(two, str):
        return bool(one == two)
    if isinstance(one, list | tuple) and isinstance(two, list | tuple):
        return len(one) == len(two) and all(equal(a, b) for a, b in zip(one, two, strict=True))
    if isinstance(one, dict) and isinstance(two, dict):
        return len(one) == len(two) and all(k in two and equal(v, two[k])
                                            for k, v in one.items())
    if isinstance(one, bool) or isinstance(two, bool):
        return False  # `one is two` above covers true against true
    return bool(one == two)


def _type(c: Checker, types: Any, inst: Any, _s: dict[str, Any]) -> Errors:
    listed = _listed(types)
    if any(_IS[t](inst) for t in listed):
        return []
    return [SchemaError(lambda: f"{inst!r} is not of type {', '.join(map(repr, listed))}")]


def _properties(c: Checker, props: dict[str, Any], inst: Any, _s: dict[str, Any]) -> Errors:
    if not isinstance(inst, dict):
        return []
    out: Errors = []
    for key, sub in props.items():
        if key in inst:
            out += c.descend(sub, inst[key], key)
    return out


def _additional(c: Checker, ap: Any, inst: Any, s: dict[str, Any]) -> Errors:
    if not isinstance(inst, dict):
        return []
    props = s.get("properties", {})
    patterns = "|".join(s.get("patternProperties", {}))
    extras = {k for k in inst if k not in props and not (patterns and re.search(patterns, k))}
    if isinstance(ap, dict):
        return [e for k in extras for e in c.descend(ap, inst[k], k)]
    if ap or not extras:
        return []
    if "patternProperties" in s:
        verb = "does" if len(extras) == 1 else "do"
        return [SchemaError(lambda: f"{', '.join(map(repr, sorted(extras)))} {verb} not match "
                            f"any of the regexes: "
                            f"{', '.join(map(repr, sorted(s['patternProperties'])))}")]
    shown = sorted(extras, key=str)
    verb = "was" if len(shown) == 1 else "were"
    return [SchemaError(lambda: "Additional properties are not allowed "
                        f"({', '.join(map(repr, shown))} {verb} unexpected)")]


def _pattern_properties(c: Checker, pp: dict[str, Any], inst: Any,
                        _s: dict[str, Any]) -> Errors:
    if not isinstance(inst, dict):
        return []
    return [e for pattern, sub in pp.items() for k, v in inst.items()
            if re.search(pattern, k) for e in c.descend(sub, v, k)]


def _property_names(c: Checker, sub: Any, inst: Any, _s: dict[str, Any]) -> Errors:
    if not isinstance(inst, dict):
        return []
    return [e for k in inst for e in c.errors(sub, k)]


def _required(c: Checker, req: list[str], inst: Any, _s: dict[str, Any]) -> Errors:
    if not isinstance(inst, dict):
        return []
    return [SchemaError(f"{k!r} is a required property") for k in req if k not in inst]


def _items(c: Checker, sub: Any, inst: Any, _s: dict[str, Any]) -> Errors:
    if not isinstance(inst, list):
        return []
    if sub is False and inst:
        rest = inst if len(inst) != 1 else inst[0]
        return [SchemaError(lambda: f"Expected at most 0 items but found {len(inst)} "
                            f"extra: {rest!r}")]
    return [e for i, v in enumerate(inst) for e in c.descend(sub, v, i)]


def _sized(kind: type[Sized], low: bool, one: str, other: str) -> Keyword:
    """minItems/maxItems/minLength/maxLength/minProperties/maxProperties; ``one`` is the
    message at the bound jsonschema words apart (1 for a minimum, 0 for a maximum)."""
    def check(c: Checker, bound: Any, inst: Any, _s: dict[str, Any]) -> Errors:
        if not isinstance(inst, kind) or (len(inst) >= bound if low else len(inst) <= bound):
            return []
        word = one if bound == (1 if low else 0) else other
        return [SchemaError(lambda: f"{inst!r} {word}")]
    return check


def _bound(fails: Callable[[Any, Any], bool], words: str) -> Keyword:
    def check(c: Checker, bound: Any, inst: Any, _s: dict[str, Any]) -> Errors:
        if not _is_number(inst) or not fails(inst, bound):
            return []
        return [SchemaError(lambda: f"{inst!r} {words} {bound!r}")]
    return check


def _enum(c: Checker, enums: list[Any], inst: Any, _s: dict[str, Any]) -> Errors:
    if any(equal(each, inst) for each in enums):
        return []
    return [SchemaError(lambda: f"{inst!r} is not one of {enums!r}")]


def _const(c: Checker, const: Any, inst: Any, _s: dict[str, Any]) -> Errors:
    return [] if equal(inst, const) else [SchemaError(lambda: f"{const!r} was expected")]


def matches(pattern: str, text: str) -> bool:
    """`pattern` as JSON Schema means it, without Python's one leniency: `$` must be the end
    of the string, not the place before a final newline (`name: "abc\\n"`)."""
    m = _compiled(pattern).search(text)
    return m is not None and not (pattern.endswith("$") and m.end() != len(text))


def _pattern(c: Checker, pattern: str, inst: Any, _s: dict[str, Any]) -> Errors:
    if not isinstance(inst, str) or matches(pattern, inst):
        return []
    return [SchemaError(lambda: f"{inst!r} does not match {pattern!r}")]


@cache
def _compiled(pattern: str) -> re.Pattern[str]:
    return re.compile(pattern)


def _all_of(c: Checker, subs: list[Any], inst: Any, _s: dict[str, Any]) -> Errors:
    return [e for sub in subs for e in c.errors(sub, inst)]


def _any_of(c: Checker, subs: list[Any], inst: Any, _s: dict[str, Any]) -> Errors:
    tried: Errors = []
    for sub in subs:
        found = c.errors(sub, inst)
        if not found:
            return []
        tried += found
    return [SchemaError(lambda: f"{inst!r} is not valid under any of the given schemas",
                        context=tried)]


def _one_of(c: Checker, subs: list[Any], inst: Any, _s: dict[str, Any]) -> Errors:
    tried: Errors = []
    first = 0
    for i, sub in enumerate(subs):
        found = c.errors(sub, inst)
        if not found:
            first = i
            break
        tried += found
    else:
        return [SchemaError(lambda: f"{inst!r} is not valid under any of the given schemas",
                            context=tried)]
    more = [sub for sub in subs[first + 1:] if not c.errors(sub, inst)]
    if not more:
        return []
    more.append(subs[first])
    return [SchemaError(lambda: f"{inst!r} is valid under each of {', '.join(map(repr, more))}")]


def _not(c: Checker, sub: Any, inst: Any, _s: dict[str, Any]) -> Errors:
    if c.errors(sub, inst):
        return []
    return [SchemaError(lambda: f"{inst!r} should not be valid under {sub!r}")]


def _if(c: Checker, sub: Any, inst: Any, s: dict[str, Any]) -> Errors:
    branch = "else" if c.errors(sub, inst) else "then"
    return c.errors(s[branch], inst) if branch in s else []


def _ref(c: Checker, uri: str, inst: Any, _s: dict[str, Any]) -> Errors:
    return c.errors(c.resolve(uri), inst)


KEYWORDS: dict[str, Keyword] = {
    "$ref": _ref,
    "additionalProperties": _additional,
    "allOf": _all_of,
    "anyOf": _any_of,
    "const": _const,
    "enum": _enum,
    "exclusiveMaximum": _bound(lambda v, b: v >= b, "is greater than or equal to the maximum of"),
    "exclusiveMinimum": _bound(lambda v, b: v <= b, "is less than or equal to the minimum of"),
    "if": _if,
    "items": _items,
    "maximum": _bound(lambda v, b: v > b, "is greater than the maximum of"),
    "minimum": _bound(lambda v, b: v < b, "is less than the minimum of"),
    "not": _not,
    "oneOf": _one_of,
    "pattern": _pattern,
    "patternProperties": _pattern_properties,
    "properties": _properties,
    "propertyNames": _property_names,
    "required": _required,
    "type": _type,
}
# maxItems/minItems, maxLength/minLength, maxProperties/minProperties: what each counts, and
# jsonschema's words past a maximum and below a minimum
_SIZED: dict[str, tuple[type[Sized], str, str]] = {
    "Items": (list, "is too long", "is too short"),
    "Length": (str, "is too long", "is too short"),
    "Properties": (dict, "has too many properties", "does not have enough properties"),
}
for _suffix, (_kind, _many, _few) in _SIZED.items():
    KEYWORDS["max" + _suffix] = _sized(_kind, False, "is expected to be empty", _many)
    KEYWORDS["min" + _suffix] = _sized(_kind, True, "should be non-empty", _few)
