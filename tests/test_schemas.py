"""Schema tests: each schema is a valid 2020-12 schema with an $id, documents every property,
rejects unknown keys, and accepts every bundled example."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from jsonschema import Draft202012Validator

from gpufleet.backends import SUPPORTED_BACKENDS, supports
from gpufleet.input.schema_files import schema, validator
from gpufleet.input.validate import validate_paths
from gpufleet.traits import Feature

ROOT = Path(__file__).resolve().parent.parent
KINDS = ["fleet", "gateway", "profiles", "backends", "lock", "defs"]


def _walk(node: Any, path: str = "") -> Iterator[tuple[str, Any]]:
    if isinstance(node, dict):
        yield path, node
        for k, v in node.items():
            yield from _walk(v, f"{path}/{k}")
    elif isinstance(node, list):
        for i, v in enumerate(node):
            yield from _walk(v, f"{path}/{i}")


@pytest.mark.parametrize("kind", KINDS)
def test_schema_is_valid_against_metaschema(kind: str) -> None:
    s = schema(kind)
    Draft202012Validator.check_schema(s)
    assert s["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    assert s["$id"].endswith(f"/{kind}.schema.json")


@pytest.mark.parametrize("kind", KINDS)
def test_every_property_has_a_description(kind: str) -> None:
    # `if` conditions restate a property to test it; they define nothing.
    missing = [f"{path}/properties/{name}"
               for path, node in _walk(schema(kind)) if "/if" not in path
               for name, prop in (node.get("properties") or {}).items()
               if isinstance(node.get("properties"), dict) and isinstance(prop, dict)
               and "description" not in prop]
    assert missing == []


@pytest.mark.parametrize("kind", KINDS)
def test_objects_reject_unknown_keys(kind: str) -> None:
    # Every object with declared properties closes itself, except the backends item
    # dispatcher (closed by the per-backend $defs it refers to) and dstack's free-form
    # passthrough blocks.
    open_ok = {"ssh_key", "schedule", "os_images", "creds", "backend_options"}
    offenders = []
    for path, node in _walk(schema(kind)):
        if "/if" in path or path.endswith("/then"):
            continue  # conditions and their consequences refine a closed parent
        closed = "additionalProperties" in node or path.endswith("/backends/items")
        passthrough = any(path.endswith(f"/{o}") or f"/{o}/" in path for o in open_ok)
        if isinstance(node.get("properties"), dict) and not closed and not passthrough:
            offenders.append(path)
    assert offenders == []


def test_backend_enum_matches_supported_backends() -> None:
    assert schema("defs")["$defs"]["backend"]["enum"] == list(SUPPORTED_BACKENDS)
    item = schema("backends")["properties"]["backends"]["items"]
    assert item["properties"]["type"]["enum"] == list(SUPPORTED_BACKENDS)
    assert sorted(set(schema("backends")["$defs"]) - {"access"}) == sorted(SUPPORTED_BACKENDS)


@pytest.mark.parametrize("name", ["fleet", "gateway", "volume", "profiles", "backends", "lock",
                                  "defs", "dstack-server-config", "task"])
def test_the_shipped_schemas_list_the_registrys_backends(name: str, update_golden: bool) -> None:
    """Every backend list of a schema is made from the registry (``x-gpufleet-backends``
    slots); the shipped file holds what gpufleet's own backends make, written by
    ``pytest --update-golden`` as docs/diagnostics.md is."""
    from gpufleet.backends import BACKENDS
    from gpufleet.input.schema_files import schema_text, with_backends

    from conftest import compare_or_update

    made = with_backends(json.loads(schema_text(name)), BACKENDS)
    compare_or_update(ROOT / "schemas" / f"{name}.schema.json",
                      json.dumps(made, indent=2, ensure_ascii=False) + "\n", update_golden)


def test_a_backend_list_edited_by_hand_is_made_again_and_a_plugin_joins_every_list() -> None:
    import dataclasses

    from gpufleet.backends import BACKENDS
    from gpufleet.input.schema_files import schema_text, with_backends

    raw = json.loads(schema_text("backends"))
    item = raw["properties"]["backends"]["items"]
    item["properties"]["type"]["enum"].remove("lambda")
    item["allOf"].pop()
    assert with_backends(raw, BACKENDS) != raw  # what the test above would catch
    assert with_backends(raw, BACKENDS) == json.loads(schema_text("backends"))
    toy = dataclasses.replace(BACKENDS[-1], name="toycloud",
                              settings_schema={"type": "object", "properties": {
                                  "type": {"const": "toycloud"}}})
    made = with_backends(raw, (*BACKENDS, toy))
    entry = made["properties"]["backends"]["items"]
    assert entry["properties"]["type"]["enum"][-1] == "toycloud"
    assert entry["allOf"][-1]["then"] == {"$ref": "#/$defs/toycloud"}
    assert made["$defs"]["toycloud"]["properties"]["type"] == {"const": "toycloud"}
    assert made["properties"]["filesystems"]["items"]["properties"]["backend"]["enum"][-1] \
        == "toycloud"
    defs = with_backends(json.loads(schema_text("defs")), (*BACKENDS, toy))
    assert defs["$defs"]["backend"]["enum"] == [*(t.name for t in BACKENDS), "toycloud"]


def test_cross_file_refs_resolve() -> None:
    v = validator("fleet")
    errors = list(v.iter_errors({"type": "fleet", "resources": {"gpu": {"count": []}}}))
    assert errors, "a list is not a valid GPU count; the $ref into defs must be followed"


def test_every_example_validates(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(ROOT)
    result = validate_paths(["examples"])
    assert [d for d in result.diagnostics] == []
    assert {f.name for f in result.inputs.fleets} == {
        "a4", "h100-train", "nd-h100", "a100-any", "dev-l4", "lambda-h100", "a3mega"}
    assert {g.backend for g in result.inputs.gateways} == {
        b for b in SUPPORTED_BACKENDS if supports(b, Feature.GATEWAYS)}
    assert result.inputs.profiles and result.inputs.backends


def test_examples_carry_schema_modeline() -> None:
    files = sorted((ROOT / "examples").rglob("*.y*ml"))
    files = [f for f in files if "ci" not in f.relative_to(ROOT / "examples").parts]
    assert files
    for f in files:
        first = f.read_text().splitlines()[0]
        assert first.startswith("# yaml-language-server: $schema="), f
        target = (f.parent / first.split("$schema=")[1]).resolve()
        assert target.exists(), f"{f}: modeline points at missing {target}"
