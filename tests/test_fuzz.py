"""Fuzzing: mutations of the valid corpus never end in an internal error (exit 3), a signal
or a diagnostic outside the file. CI runs the "ci" profile; `pytest tests/test_fuzz.py
--hypothesis-profile=long` runs thousands of inputs locally (GPUFLEET_FUZZ_COMPILES and
GPUFLEET_FUZZ_PLANS set how many go through compile and the whole plan)."""

from __future__ import annotations

import math
import os
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from gpufleet.cli import main
from gpufleet.compile.compiler import compile_inputs
from gpufleet.input.validate import validate_paths
from gpufleet.offers.catalog import load_catalog

ROOT = Path(__file__).resolve().parent.parent
CORPUS = sorted([*(ROOT / "tests" / "cases" / "valid").glob("*.y*ml"),
                 *(ROOT / "examples" / "fleets").glob("*.yml"),
                 *(ROOT / "examples" / "gateways").glob("*.yml"),
                 ROOT / "examples" / "backends.yml", ROOT / "examples" / "profiles.yml",
                 ROOT / "examples" / "gpufleet.lock"])
TEXTS = [p.read_text() for p in CORPUS]

ODD_SCALARS = st.sampled_from([
    0, -1, 2.0, 1e309, -1e309, math.nan, True, False, None, "", " ", "~", "..", "0..", "..0",
    "1..0", "-1", "--5", "²", "nan", "inf", "1e3", "H100:1e3", "H100:-1", "x86:-1..", "24GB..:",
    "A100,,H100", "::", "3d", "-1GB", "1TB", "9" * 400, "a\nb", "\x1b[31m", "${{ x }}",
    "*.x.io", "10.0.0.1", "0.0.0.0/0", "spot", "cluster", "fleet", "gateway", "yes",
])
VALUES = st.recursive(
    ODD_SCALARS | st.integers(-10**6, 10**6) | st.text(max_size=12),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(
        st.sampled_from(["min", "max", "count", "name", "type", "gpu", "memory", "arn",
                         "size", "hosts", "user"]) | st.text(max_size=6), inner, max_size=3),
    max_leaves=6)
TAGS = st.sampled_from(["!!int ", "!!float ", "!!bool ", "!!str ", "!!binary ", "!!set ",
                        "!!python/object ", "!!null ", "&a ", "*a ", "<<: ", "!local "])


def paths_of(data: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    out = [prefix] if prefix else []
    if isinstance(data, dict):
        for k, v in data.items():
            out += paths_of(v, (*prefix, k))
    elif isinstance(data, list):
        for i, v in enumerate(data):
            out += paths_of(v, (*prefix, i))
    return out


def replace_at(data: Any, path: tuple[Any, ...], value: Any) -> Any:
    if not path:
        return value
    head, rest = path[0], path[1:]
    if isinstance(data, dict):
        return {k: (replace_at(v, rest, value) if k == head else v) for k, v in data.items()}
    return [replace_at(v, rest, value) if i == head else v for i, v in enumerate(data)]


@st.composite
def structural(draw: st.DrawFn) -> str:
    """A valid document with one value swapped for an odd one (type confusion, grammar)."""
    docs = [d for d in yaml.safe_load_all(draw(st.sampled_from(TEXTS))) if d is not None]
    doc = draw(st.sampled_from(docs)) if docs else {}
    places = paths_of(doc)
    if places:
        doc = replace_at(doc, draw(st.sampled_from(places)), draw(VALUES))
    return yaml.safe_dump(doc, allow_unicode=True)


@st.composite
def textual(draw: st.DrawFn) -> bytes:
    """A valid file with bytes replaced, inserted or deleted, or a YAML tag/anchor injected."""
    raw = bytearray(draw(st.sampled_from(TEXTS)).encode())
    for _ in range(draw(st.integers(1, 4))):
        at = draw(st.integers(0, len(raw)))
        kind = draw(st.sampled_from(["replace", "insert", "delete", "tag"]))
        if kind == "tag":
            raw[at:at] = draw(TAGS).encode()
        elif kind == "insert":
            raw[at:at] = draw(st.binary(min_size=1, max_size=4))
        elif kind == "delete":
            del raw[at:at + draw(st.integers(1, 8))]
        elif at < len(raw):
            raw[at] = draw(st.integers(0, 255))
    return bytes(raw)


def assert_located(path: Path, capsys: pytest.CaptureFixture[str], code: int) -> None:
    out = capsys.readouterr()
    assert code in (0, 1), (code, out.err[-2000:], path.read_bytes()[:2000])
    assert "Traceback" not in out.err and "internal error" not in out.err
    lines = max(1, path.read_bytes().count(b"\n") + 1)
    result = validate_paths([str(path)])
    for d in result.diagnostics:
        assert 1 <= d.line <= lines and d.column >= 1, (d, lines)


@given(structural())
def test_type_confusion_never_crashes_validate(tmp_path_factory: pytest.TempPathFactory,
                                               capsys: pytest.CaptureFixture[str],
                                               text: str) -> None:
    path = tmp_path_factory.mktemp("fuzz") / "f.yml"
    path.write_text(text)
    assert_located(path, capsys, main(["validate", str(path)]))


@given(textual())
def test_byte_mutations_never_crash_validate(tmp_path_factory: pytest.TempPathFactory,
                                             capsys: pytest.CaptureFixture[str],
                                             raw: bytes) -> None:
    path = tmp_path_factory.mktemp("fuzz") / "f.yml"
    path.write_bytes(raw)
    assert_located(path, capsys, main(["validate", str(path)]))


BACKENDS = str(ROOT / "examples" / "backends.yml")
FLEETS = [str(p) for p in sorted((ROOT / "examples" / "fleets").glob("*.yml"))]


def companions(text: str) -> list[str]:
    """The files a mutated document is planned with: the example fleets for a backends
    file, the example backends file for anything else."""
    try:
        docs = list(yaml.safe_load_all(text))
    except yaml.YAMLError:
        return [BACKENDS]
    is_backends = any(isinstance(d, dict) and "backends" in d and "type" not in d
                      for d in docs)
    return FLEETS if is_backends else [BACKENDS]


@settings(max_examples=int(os.environ.get("GPUFLEET_FUZZ_COMPILES", "60")))
@given(structural())
def test_what_validates_also_compiles(tmp_path_factory: pytest.TempPathFactory,
                                      text: str) -> None:
    """Every input `validate` accepts gets plans or located diagnostics from the compile
    stage, never an exception."""
    path = tmp_path_factory.mktemp("fuzz") / "f.yml"
    path.write_text(text)
    validated = validate_paths([str(path), *companions(text)])
    if not validated.ok:
        return
    compiled = compile_inputs(validated.inputs, load_catalog())
    for d in compiled.diagnostics:
        assert d.line >= 1 and d.column >= 1


@settings(max_examples=int(os.environ.get("GPUFLEET_FUZZ_PLANS", "25")))
@given(structural())
def test_what_compiles_also_plans(tmp_path_factory: pytest.TempPathFactory,
                                  capsys: pytest.CaptureFixture[str], text: str) -> None:
    """The whole `gpufleet plan`, the stack program included, ends in 0 or 1."""
    path = tmp_path_factory.mktemp("fuzz") / "f.yml"
    path.write_text(text)
    code = main(["plan", "--format", "json", str(path), *companions(text)])
    err = capsys.readouterr().err
    assert code in (0, 1), err[-3000:]
    assert "internal error" not in err
