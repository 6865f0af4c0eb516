"""The JSON Schemas shipped as ``gpufleet.schemas`` (the top-level ``schemas/`` folder)."""

from __future__ import annotations

import json
from functools import cache
from importlib import resources
from typing import Any

KINDS = ("fleet", "gateway", "profiles", "backends", "lock")
_FILES = (*KINDS, "defs", "dstack-server-config", "task")


@cache
def schema_text(kind: str) -> str:
    return (resources.files("gpufleet.schemas") / f"{kind}.schema.json").read_text("utf-8")


@cache
def schema(kind: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(schema_text(kind))
    return data


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
        Draft202012Validator, type_checker=checker)
    return strict(schema(kind), registry=registry)
