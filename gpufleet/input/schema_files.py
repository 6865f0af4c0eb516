"""The JSON Schemas shipped as ``gpufleet.schemas`` (the top-level ``schemas/`` folder)."""

from __future__ import annotations

import json
import re
from functools import cache
from importlib import resources
from typing import Any
from urllib.parse import urldefrag, urljoin

KINDS = ("fleet", "gateway", "volume", "profiles", "backends", "lock")
_FILES = (*KINDS, "defs", "dstack-server-config", "task")


@cache
def schema_text(kind: str) -> str:
    return (resources.files("gpufleet.schemas") / f"{kind}.schema.json").read_text("utf-8")


@cache
def schema(kind: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(schema_text(kind))
    return data


def _pattern(_validator: Any, pattern: str, instance: Any, _schema: Any) -> Any:
    """`pattern` as JSON Schema means it, without Python's one leniency: `$` must be the end
    of the string, not the place before a final newline (`name: "abc\\n"`)."""
    from jsonschema.exceptions import ValidationError

    if not isinstance(instance, str):
        return
    m = _compiled(pattern).search(instance)
    if m is None or (pattern.endswith("$") and m.end() != len(instance)):
        yield ValidationError(f"{instance!r} does not match {pattern!r}")


@cache
def _compiled(pattern: str) -> re.Pattern[str]:
    return re.compile(pattern)


@cache
def validator(kind: str) -> Any:
    """A compiled Draft 2020-12 validator whose registry holds every shipped schema."""
    from jsonschema import Draft202012Validator, validators
    from referencing import Registry, Resource

    registry: Registry[Any] = Registry().with_resources(
        (schema(name)["$id"], Resource.from_contents(schema(name))) for name in _FILES
    )
    # JSON Schema counts 2.0 as an integer; a YAML `2.0` is a float, and code that counts
    # nodes or replicas with it would break, so integers here are Python ints only.
    checker = Draft202012Validator.TYPE_CHECKER.redefine(
        "integer", lambda _c, v: isinstance(v, int) and not isinstance(v, bool))
    strict = validators.extend(  # type: ignore[no-untyped-call]
        Draft202012Validator, type_checker=checker, validators={"pattern": _pattern})
    root = schema(kind)
    return strict(_inlined(root, registry.resolver(root["$id"]), root["$id"]),
                  registry=registry)


# Keywords that only annotate: a `$ref` beside them alone validates as its target does.
_ANNOTATIONS = frozenset({"description", "title", "markdownDescription", "$comment",
                          "examples", "default"})


def _inlined(node: Any, resolver: Any, base: str, seen: frozenset[str] = frozenset()) -> Any:
    """``node`` with each `$ref` (beside annotations only) replaced by what it points at,
    once, when the validator is made: the validator then never looks a reference up (a
    third of the schema pass on 200 files, bench/validate.py). Errors are the same: a `$ref`
    yields its target's errors, whose ``schema`` is that same target. A reference in a
    cycle, or beside other keywords, stays a `$ref`, made absolute so it resolves where it
    now sits; `$defs` are left as they are (the registry keeps the originals). ``base``: the
    URI relative references start from (the shipped schemas set `$id` on their roots only)."""
    if isinstance(node, list):
        return [_inlined(v, resolver, base, seen) for v in node]
    if not isinstance(node, dict):
        return node
    ref = node.get("$ref")
    if isinstance(ref, str):
        uri = urljoin(base, ref)
        if uri in seen or not set(node) - {"$ref"} <= _ANNOTATIONS:
            rest = {k: _inlined(v, resolver, base, seen) for k, v in node.items()
                    if k != "$ref"}
            return {"$ref": uri, **rest}
        resolved = resolver.lookup(ref)
        return _inlined(resolved.contents, resolved.resolver, urldefrag(uri).url,
                        seen | {uri})
    return {k: v if k == "$defs" else _inlined(v, resolver, base, seen)
            for k, v in node.items()}
