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
    from jsonschema import Draft202012Validator
    from referencing import Registry, Resource

    registry: Registry[Any] = Registry().with_resources(
        (schema(name)["$id"], Resource.from_contents(schema(name))) for name in _FILES
    )
    return Draft202012Validator(schema(kind), registry=registry)
