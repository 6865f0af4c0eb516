"""Golden files per example: the pure plan and the recorded resources, compared exactly.

Regenerate with `pytest --update-golden` and review the diff: it is the resource graph a
change would produce.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gpufleet.compile.compiler import compile_inputs
from gpufleet.compile.digest import plan_to_json
from gpufleet.input.validate import validate_paths
from gpufleet.offers.catalog import load_catalog

from conftest import compare_or_update
from planutil import EXAMPLES, SHARED, plan_files

GOLDEN = Path(__file__).parent / "golden"
EXAMPLES_WITH_GOLDEN = sorted(str(p.relative_to(EXAMPLES))
                              for kind in ("fleets", "gateways")
                              for p in (EXAMPLES / kind).glob("*.yml"))


def _stem(example: str) -> str:
    kind = "gateway-" if example.startswith("gateways/") else ""
    return kind + Path(example).name.split(".")[0]


def _dump(data: object) -> str:
    return json.dumps(data, indent=2, sort_keys=True) + "\n"


@pytest.mark.parametrize("example", EXAMPLES_WITH_GOLDEN)
def test_plan_golden(example: str, update_golden: bool) -> None:
    files = [str(EXAMPLES / example), *SHARED]
    compiled = compile_inputs(validate_paths(files).inputs, load_catalog())
    assert compiled.ok, compiled.diagnostics
    data = [plan_to_json(p) for p in (*compiled.plans, *compiled.gateways)]
    for p in data:
        p["file"] = Path(p["file"]).name  # independent of the working directory
    compare_or_update(GOLDEN / f"{_stem(example)}.plan.json", _dump(data), update_golden)


@pytest.mark.parametrize("example", EXAMPLES_WITH_GOLDEN)
def test_resources_golden(example: str, update_golden: bool) -> None:
    report = plan_files([EXAMPLES / example, *SHARED])
    data = [{k: r[k] for k in ("urn", "type", "parent", "provider", "inputs")}
            for r in report.resources]
    compare_or_update(GOLDEN / f"{_stem(example)}.resources.json", _dump(data), update_golden)
