"""The positive/negative corpus: every valid case passes; each invalid case gives exactly the
diagnostics pinned in its ``.expected`` file (rendered text, as ``gpufleet validate`` prints)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gpufleet.diagnostics import render_json, render_text
from gpufleet.input.validate import validate_paths

from conftest import compare_or_update

CASES = Path(__file__).parent / "cases"
VALID = sorted((CASES / "valid").glob("*.y*ml"))
# A case is a file, or a folder validated as a whole (what spans files: duplicate names, a
# host in two SSH fleets, a rename's settings in the backends file).
INVALID = sorted([*(CASES / "invalid").glob("*.y*ml"),
                  *(p for p in (CASES / "invalid").iterdir() if p.is_dir())])


def expected_of(case: Path) -> Path:
    return case.parent / f"{case.name}.expected" if case.is_dir() else \
        case.with_suffix(".expected")


@pytest.mark.parametrize("path", VALID, ids=lambda p: p.name)
def test_valid_case(path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(path.parent)
    result = validate_paths([path.name])
    assert result.diagnostics == [], render_text(result.diagnostics, result.sources)
    assert result.inputs.fleets or result.inputs.gateways or result.inputs.profiles \
        or result.inputs.backends or result.inputs.ssh_fleets


@pytest.mark.parametrize("path", INVALID, ids=lambda p: p.name)
def test_invalid_case(path: Path, monkeypatch: pytest.MonkeyPatch, update_golden: bool) -> None:
    monkeypatch.chdir(path.parent)
    result = validate_paths([path.name])
    errors = [d for d in result.diagnostics if d.is_error]
    warnings = [d for d in result.diagnostics if not d.is_error]
    assert errors or warnings, "an invalid case must produce a diagnostic"
    text = render_text(result.diagnostics, result.sources) + "\n"
    compare_or_update(expected_of(path), text, update_golden)
    records = json.loads(render_json(result.diagnostics))
    assert [(r["line"], r["column"], r["code"]) for r in records] == [
        (d.line, d.column, d.code) for d in result.diagnostics]


def test_corpus_size() -> None:
    # The foundation issue asks for at least 40 pinned invalid cases.
    assert len(INVALID) >= 40
    assert all(expected_of(p).exists() for p in INVALID)
