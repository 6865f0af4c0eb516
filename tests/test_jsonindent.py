"""The plan's JSON writer: the very text ``json.dumps(obj, indent=2)`` writes, in pieces, with
a number that is not finite written null."""

from __future__ import annotations

import enum
import json
import math
from collections import OrderedDict
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gpufleet.views.jsonindent import indented_chunks


def _text(obj: Any, size: int = 1 << 20) -> str:
    return "".join(indented_chunks(obj, size))


def _finite(obj: Any) -> Any:
    """The document the standard encoder is given to compare with: NaN and infinities null."""
    if isinstance(obj, float) and not math.isfinite(obj):
        return None
    if isinstance(obj, dict):
        return {k: _finite(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [_finite(v) for v in obj]
    return obj


SCALARS = (st.none() | st.booleans() | st.integers() | st.floats()
           | st.text(st.characters(codec="utf-8") | st.sampled_from("\"\\\n\t\x00\u2028é😀")))
KEYS = st.text(max_size=8) | st.integers() | st.booleans() | st.none() | st.floats(
    allow_nan=False, allow_infinity=False)
TREES = st.recursive(SCALARS, lambda kids: st.lists(kids, max_size=5)
                     | st.lists(kids, max_size=4).map(tuple)
                     | st.dictionaries(KEYS, kids, max_size=5), max_leaves=40)


@settings(max_examples=300, deadline=None)
@given(TREES, st.integers(1, 64))
def test_any_tree_is_written_as_the_standard_encoder_writes_it(obj: Any, size: int) -> None:
    assert _text(obj, size) == json.dumps(_finite(obj), indent=2)


def test_the_examples_plan_is_the_standard_encoders_text() -> None:
    from gpufleet.views.plan import plan_json_chunks

    from planutil import examples_report

    report = examples_report()
    pieces = list(plan_json_chunks(report))
    text = "".join(pieces)
    assert json.dumps(json.loads(text), indent=2) == text and json.loads(text)["resources"]
    small = list(indented_chunks(json.loads(text), size=1000))
    assert len(small) > 10 and "".join(small) == text
    # each piece ends where a whole item of the top two levels ends
    assert all(p.endswith(("}", "]", '"', "e", "l")) or p[-1].isdigit() for p in small[:-1])


def test_a_number_that_is_not_finite_is_null_and_the_input_is_unchanged() -> None:
    doc = {"a": [1, float("nan"), {"b": float("inf")}], "c": (1, -float("inf")), "d": -0.0}
    assert json.loads(_text(doc)) == {"a": [1, None, {"b": None}], "c": [1, None], "d": -0.0}
    assert math.isnan(doc["a"][1])  # type: ignore[index,arg-type]


class Colour(enum.Enum):
    RED = "red"


class Level(enum.IntEnum):
    HIGH = 3


class Name(str):
    pass


def test_subclasses_and_keys_are_written_as_the_standard_encoder_writes_them() -> None:
    doc = {"level": Level.HIGH, Name("k"): Name("v"), 1: 2.5, 2.5: True, None: [], False: {},
           "ordered": OrderedDict([("z", 1), ("a", 2)]), "big": 10**30, "tiny": 5e-324}
    assert _text(doc) == json.dumps(doc, indent=2)


@pytest.mark.parametrize("bad", [{"x": Colour.RED}, {"x": {1, 2}}, {(1, 2): "tuple key"},
                                 [object()], {"x": b"bytes"}])
def test_what_json_cannot_hold_is_refused_with_the_standard_encoders_error(bad: Any) -> None:
    with pytest.raises(TypeError) as ours:
        _text(bad)
    with pytest.raises(TypeError) as theirs:
        json.dumps(bad, indent=2)
    assert str(ours.value) == str(theirs.value)
