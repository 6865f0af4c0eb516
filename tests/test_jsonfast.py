"""parse_json's msgspec path (large inputs) reads and refuses exactly what the standard
library's path does, with the same messages: every case here runs both ways and compares."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from typing import Any
from unittest import mock

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gpufleet.input import jsonfile
from gpufleet.input.jsonfile import MAX_INT_DIGITS, MAX_JSON_DEPTH, JsonInputError, parse_json


def outcome(raw: bytes, fast: bool) -> tuple[str, str]:
    """('ok', repr of the value: types, order and -0.0 included) or ('refused', message)."""
    with mock.patch.object(jsonfile, "FAST_FROM", 0 if fast else 1 << 62):
        try:
            return "ok", repr(parse_json(raw, "x.json", "a stack export"))
        except JsonInputError as e:
            return "refused", str(e)


def same_both_ways(raw: bytes) -> tuple[str, str]:
    fast, slow = outcome(raw, True), outcome(raw, False)
    assert fast == slow, raw[:200]
    return fast


def deep(n: int, inner: str = "1") -> bytes:
    return ("[" * n + inner + "]" * n).encode()


HOSTILE = [
    b"1" + b"0" * MAX_INT_DIGITS, b"9" * MAX_INT_DIGITS, b"-" + b"9" * MAX_INT_DIGITS,
    b"[" + b"9" * (MAX_INT_DIGITS + 1) + b"]", b'{"a": [-' + b"1" * (MAX_INT_DIGITS + 1) + b"]}",
    b"[" + b"7" * 5000 + b"]", b"[9223372036854775807, -9223372036854775808]",
    b"[9223372036854775808, 18446744073709551616, -9223372036854775809]",
    b"NaN", b"[Infinity]", b'{"a": -Infinity}', b"[1e400, -1e400, 1.5e-400]",
    b'["\\ud800"]', b'{"\\udc00": 1}', b'"\\ud83d\\ude00"', b'["\xff"]', b'["\xed\xa0\x80"]',
    b"\xef\xbb\xbf[1]", b"\xef\xbb\xbf\xef\xbb\xbf[1]", b"\xff\xfe[\x001\x00]\x00",
    b"", b"   ", b"[1,]", b'{"a":1,}', b"[1] x", b'{"a": 1, "a": 2}', b"[01]", b"[-0, -0.0]",
    b'"a\x01b"', b"\x0c[]", b"[true, false, null, 1.0, 1, 1E2]", b'"\\u0000"',
    deep(MAX_JSON_DEPTH - 1), deep(MAX_JSON_DEPTH), deep(MAX_JSON_DEPTH + 1),
    deep(MAX_JSON_DEPTH, "9" * (MAX_INT_DIGITS + 1)), deep(5000), deep(200_000),
    b'{"a": ' * 200_000, b'{"k": [' * 50 + b"1" + b"]}" * 50,
]


@pytest.mark.parametrize("raw", HOSTILE, ids=range(len(HOSTILE)))
def test_hostile_texts_read_or_refused_alike(raw: bytes) -> None:
    same_both_ways(raw)


def test_the_bounds_still_refuse_on_the_fast_path() -> None:
    assert outcome(b"[" + b"9" * (MAX_INT_DIGITS + 1) + b"]", True) == (
        "refused", f"x.json: a {MAX_INT_DIGITS + 1}-digit number; gpufleet reads at most "
                   f"{MAX_INT_DIGITS} digits")
    kind, why = outcome(deep(MAX_JSON_DEPTH + 1), True)
    assert kind == "refused" and f"nested deeper than {MAX_JSON_DEPTH} levels" in why
    assert outcome(deep(MAX_JSON_DEPTH), True)[0] == "ok"
    assert outcome(b"[" + b"9" * MAX_INT_DIGITS + b"]", True) == (
        "ok", "[" + "9" * MAX_INT_DIGITS + "]")


def test_the_fast_path_is_the_one_taken_for_a_large_input() -> None:
    """A large valid text never reaches the standard library's parser."""
    raw = json.dumps({"resources": [{"urn": f"u{i}", "n": i, "x": [1.5, None, True]}
                                    for i in range(40_000)]}).encode()
    assert len(raw) >= jsonfile.FAST_FROM
    with mock.patch.object(jsonfile, "_loads", side_effect=AssertionError("slow path")):
        assert parse_json(raw, "x.json", "a value") == json.loads(raw)
    # a small one does, so that reading it costs no import
    with mock.patch.object(jsonfile, "_fast", side_effect=AssertionError("fast path")):
        assert parse_json(b"[1]", "x.json", "a value") == [1]


def test_without_msgspec_a_large_input_reads_the_standard_librarys_way() -> None:
    raw = b"[" + b", ".join(b'"%d"' % i for i in range(200_000)) + b"]"
    assert len(raw) >= jsonfile.FAST_FROM
    with mock.patch.dict("sys.modules", {"msgspec": None}):  # import raises ImportError
        assert parse_json(raw, "x.json", "a value") == json.loads(raw)
        assert outcome(b"[" + b"9" * (MAX_INT_DIGITS + 1) + b"]", True)[0] == "refused"


def test_the_real_export_reads_the_same_both_ways(real_export: dict[str, Any]) -> None:
    raw = json.dumps(real_export).encode()
    assert same_both_ways(raw)[0] == "ok"
    assert same_both_ways(b"\xef\xbb\xbf" + raw)[0] == "ok"


def test_other_threads_change_nothing() -> None:
    stop = threading.Event()
    other = threading.Thread(target=stop.wait)
    other.start()
    try:
        for raw in (deep(MAX_JSON_DEPTH), deep(MAX_JSON_DEPTH + 1), b"[" + b"1" * 40 + b"]"):
            same_both_ways(raw)
    finally:
        stop.set()
        other.join()


def _values() -> st.SearchStrategy[Any]:
    scalars = (st.none() | st.booleans() | st.floats(allow_nan=False, allow_infinity=False)
               | st.integers(-(10 ** 35), 10 ** 35) | st.text(max_size=8))
    return st.recursive(scalars, lambda inner: st.lists(inner, max_size=4)
                        | st.dictionaries(st.text(max_size=4), inner, max_size=4),
                        max_leaves=30)


@settings(deadline=None, max_examples=400, suppress_health_check=list(HealthCheck))
@given(_values(), st.integers(0, MAX_JSON_DEPTH + 2), st.booleans())
def test_any_value_at_any_depth_reads_the_same_both_ways(value: Any, wraps: int,
                                                         bom: bool) -> None:
    text = "[" * wraps + json.dumps(value) + "]" * wraps
    same_both_ways((b"\xef\xbb\xbf" if bom else b"") + text.encode())


@settings(deadline=None, max_examples=400, suppress_health_check=list(HealthCheck))
@given(_values(), st.integers(0, 10 ** 6), st.binary(min_size=1, max_size=3))
def test_any_corrupted_text_reads_or_is_refused_the_same_both_ways(
        value: Any, at: int, noise: bytes) -> None:
    raw = json.dumps(value, ensure_ascii=False).encode()
    cut = at % (len(raw) + 1)
    same_both_ways(raw[:cut] + noise + raw[cut:])


@pytest.fixture(scope="module")
def real_export() -> Iterator[dict[str, Any]]:
    from exportutil import export

    from planutil import EXAMPLES, SHARED

    yield export([EXAMPLES / "fleets" / "gcp-a4.dstack.yml", *SHARED])


def _holding(value: Any, key: str) -> list[int]:
    """The reference: ids of every object holding ``key``, one value at a time."""
    found = []
    stack = [value]
    while stack:
        v = stack.pop()
        if isinstance(v, dict):
            if key in v:
                found.append(id(v))
            stack += v.values()
        elif isinstance(v, list):
            stack += v
    return sorted(found)


@settings(deadline=None, max_examples=300, suppress_health_check=list(HealthCheck))
@given(st.recursive(st.none() | st.integers(0, 9) | st.fixed_dictionaries({"k": st.none()}),
                    lambda inner: st.lists(inner, max_size=4)
                    | st.dictionaries(st.sampled_from(["k", "a", "b"]), inner, max_size=3),
                    max_leaves=25))
def test_the_bounds_walk_marks_every_object_holding_the_key(value: Any) -> None:
    marked: list[dict[str, Any]] = []
    assert jsonfile.within(value, key="k", marked=marked)
    assert sorted(map(id, marked)) == _holding(value, "k")


def _export_outcome(text: str, fast: bool) -> tuple[str, str]:
    from gpufleet.review import StateError, parse_export

    with mock.patch.object(jsonfile, "FAST_FROM", 0 if fast else 1 << 62):
        try:
            return "ok", repr(parse_export(text))
        except StateError as e:
            return "refused", str(e)


def test_secrets_are_checked_the_same_when_the_parse_marked_them(
        real_export: dict[str, Any]) -> None:
    """Where msgspec's path marks the objects holding the signature, a well-formed set
    spares the walk; a malformed one inside a resource is named as the walk names it, one
    outside every resource's values is let be, as the walk lets it be."""
    import copy

    from gpufleet.review.state import SECRET_SIG, SECRET_VALUE

    data = copy.deepcopy(real_export)
    resources = data["deployment"]["resources"]
    i = next(i for i, r in enumerate(resources) if r.get("outputs"))
    resources[i]["outputs"]["ok"] = {SECRET_SIG: SECRET_VALUE, "ciphertext": "v1:x"}
    cases = {"good": json.dumps(data)}
    resources[i]["outputs"]["leak"] = {SECRET_SIG: SECRET_VALUE}
    cases["leak"] = json.dumps(data)
    del resources[i]["outputs"]["leak"]
    data["deployment"]["manifest"] = {"note": {SECRET_SIG: "x"}}
    cases["outside"] = json.dumps(data)
    seen = {}
    for name, text in cases.items():
        seen[name] = _export_outcome(text, True)
        assert seen[name] == _export_outcome(text, False), name
    assert seen["good"][0] == "ok" and seen["outside"][0] == "ok"
    assert seen["leak"][0] == "refused"
    assert f"resource #{i} is malformed (a secret in outputs)" in seen["leak"][1]
