"""gpufleet's schema checker (schemacheck) against jsonschema, the reference: the same errors, in
the same order, with the same fields and messages, for every shipped schema, on the examples,
the test cases and generated documents (mostly what the schema describes, with wrong values,
wrong types and unknown keys mixed in)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gpufleet.input.loader import LoadResult, load_text
from gpufleet.input.schema_files import (
    _FILES,
    _resolved,
    jsonschema_validator,
    schema,
    validator,
)
from gpufleet.input.schemacheck import Checker, equal, unsupported

ROOT = Path(__file__).resolve().parent.parent


def signature(errors: Any) -> list[Any]:
    """Every field gpufleet reads of each error, recursively through ``context``."""
    return [(e.validator, _json(e.validator_value), _json(e.instance), _json(e.schema),
             list(e.relative_path), list(e.absolute_path), e.message, signature(e.context))
            for e in errors]


def _json(value: Any) -> str:
    return json.dumps(value, sort_keys=False, default=repr)


def same(kind: str, instance: Any) -> None:
    ours = signature(validator(kind).iter_errors(instance))
    theirs = signature(jsonschema_validator(kind).iter_errors(instance))
    assert ours == theirs, (kind, instance)
    assert validator(kind).is_valid(instance) == (not theirs)


def test_every_shipped_schema_is_checked_here() -> None:
    """The fast path is not silently lost: a keyword added to a schema that schemacheck
    does not implement fails here (implement it, or accept jsonschema's import)."""
    for kind in _FILES:
        assert isinstance(validator(kind), Checker), (kind, unsupported(schema(kind)))


def test_what_is_left_to_jsonschema() -> None:
    assert unsupported({"type": "array", "uniqueItems": True}) == "uniqueItems"
    assert unsupported({"properties": {"a": {"$id": "x", "type": "string"}}}) == "$id"
    assert unsupported({"anyOf": [{"type": "decimal"}]}) == "type 'decimal'"
    assert unsupported({"type": 5}) == "type 5"
    assert unsupported({"items": {"not": {"prefixItems": []}}}) == "prefixItems"
    assert unsupported({"$id": "root", "type": "object"}) is None


def documents() -> list[tuple[str, Any]]:
    """Every document of the examples and test cases, read as `gpufleet validate` reads them
    (the hostile cases it refuses, an alias bomb among them, are left out)."""
    out = []
    for path in sorted([*ROOT.glob("examples/**/*.yml"), *ROOT.glob("tests/cases/**/*.yml")]):
        result = LoadResult()
        load_text(path.name, path.read_text(errors="replace"), result)
        out += [(path.name, d.data) for d in result.documents]
    return out


@pytest.mark.parametrize("kind", _FILES)
def test_same_errors_on_the_examples_and_cases(kind: str) -> None:
    docs = documents()
    assert len(docs) > 50
    for _name, doc in docs:
        same(kind, doc)


LEAVES = st.one_of(
    st.none(), st.booleans(), st.integers(-3, 70000), st.floats(allow_nan=False),
    st.sampled_from(["", "a", "H100:8", "1..4", "24GB..", "auto", "x\n", "fleet", "aws",
                     "Abc", "100GB", "2h", "us-east-1", "spot", "1.25", "true"]),
    st.just([]), st.just({}))


def _node(node: Any) -> Any:
    while isinstance(node, dict) and "$ref" in node and len(node) == 1:
        node = _resolved(node["$ref"])
    return node


def _instance(draw: st.DrawFn, node: Any, depth: int = 0) -> Any:
    """A document for ``node``: one plain recursion inside one composite (a composite per
    level made Hypothesis build a strategy and a span for each, most of the test's time)."""
    node = _node(node)
    if depth > 5 or not isinstance(node, dict) or draw(st.integers(0, 24)) == 0:
        return draw(LEAVES)
    for key in ("anyOf", "oneOf"):
        if key in node:
            return _instance(draw, draw(st.sampled_from(node[key])), depth + 1)
    if "allOf" in node and draw(st.booleans()):
        return _instance(draw, draw(st.sampled_from(node["allOf"])), depth + 1)
    if "const" in node:
        return node["const"]
    if "enum" in node:
        return draw(st.sampled_from(node["enum"]))
    props = node.get("properties")
    if isinstance(props, dict) and props:
        keys = draw(st.lists(st.sampled_from(tuple(sorted(props))), max_size=6, unique=True))
        if draw(st.integers(0, 4)):  # mostly with the keys it requires
            keys = [*dict.fromkeys([*node.get("required", ()), *keys])]
        out = {k: _instance(draw, props[k], depth + 1) for k in keys}
        if draw(st.integers(0, 6)) == 0:
            out[draw(st.sampled_from(("memroy", "nodes", "x", "type")))] = draw(LEAVES)
        return out
    items = node.get("items")
    if isinstance(items, dict):
        return [_instance(draw, items, depth + 1) for _ in range(draw(st.integers(0, 3)))]
    extra = node.get("additionalProperties")
    if isinstance(extra, dict):
        names = draw(st.lists(st.sampled_from(("a", "gw", "H100")), max_size=2, unique=True))
        return {n: _instance(draw, extra, depth + 1) for n in names}
    types = node.get("type")
    if types in ("integer", "number") and draw(st.booleans()):
        low = node.get("minimum", node.get("exclusiveMinimum", 0))
        return draw(st.integers(int(low) - 1, int(low) + 3))
    return draw(LEAVES)


@st.composite
def instances(draw: st.DrawFn, node: Any) -> Any:
    return _instance(draw, node)


@pytest.mark.parametrize("kind", _FILES)
@given(data=st.data())
def test_same_errors_on_generated_documents(kind: str, data: st.DataObject) -> None:
    same(kind, data.draw(instances(validator(kind).schema)))


def test_json_equality_as_jsonschema_has_it() -> None:
    assert equal(1, 1.0) and equal([1, {"a": 2}], [1.0, {"a": 2.0}])
    assert not equal(True, 1) and not equal(0, False) and not equal([True], [1])
    assert not equal({"a": 1}, {"a": 1, "b": 2}) and not equal("1", 1)
    assert equal(None, None) and not equal(None, 0)


def test_a_plugin_settings_schema_with_another_keyword_is_left_to_jsonschema() -> None:
    """A backend plugin's settings land in the backends schema's `$defs`: one keyword
    schemacheck does not implement sends that schema to jsonschema."""
    import dataclasses

    from gpufleet.backends import all_backends
    from gpufleet.input.schema_files import schema_text, with_backends

    backends = tuple(all_backends())
    toy = dataclasses.replace(backends[-1], name="toycloud", settings_schema={
        "type": "object", "properties": {"zones": {"type": "array", "uniqueItems": True}}})
    made = with_backends(json.loads(schema_text("backends")), (*backends, toy))
    assert unsupported(made) == "uniqueItems"
    assert unsupported(with_backends(json.loads(schema_text("backends")), backends)) is None
