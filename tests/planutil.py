"""Helpers shared by the plan tests: compile files and run the stack program offline."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from functools import cache
from pathlib import Path
from typing import Any

from gpufleet.cli.runs import build_report
from gpufleet.input import SyncedGateway, stackconfig
from gpufleet.input.validate import validate_paths
from gpufleet.offers.catalog import load_catalog
from gpufleet.review import PlanReport

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "examples"
SHARED = [str(EXAMPLES / "backends.yml"), str(EXAMPLES / "profiles.yml")]
# A well-formed public key for backends files written by tests (no private half exists).
TEST_KEY = ("ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIBIQCyff2ckZRUZ6RiZdRKLoVIKhAaBehbvNN+zI6TxR"
            " gpufleet-tests")


def plan_files(files: Sequence[str | Path], stack: str = "dev",
               synced: Mapping[str, SyncedGateway] | None = None) -> PlanReport:
    """The offline plan; ``synced``: the gateways' addresses as `gpufleet gateway sync`
    stores them in the stack config."""
    paths = [str(f) for f in files]
    validated = validate_paths(paths)
    assert validated.ok, validated.diagnostics
    report, diags = build_report(validated, load_catalog(), paths, stack, None, None,
                                 synced=synced)
    assert report is not None, diags
    return report


@cache
def examples_report() -> PlanReport:
    """The bundled examples' plan, run once per test process (a frozen report: tests read
    it, none changes it; the examples folder is never written by a test)."""
    return plan_files([EXAMPLES])


@cache
def _examples_json() -> str:
    from click.testing import CliRunner

    from gpufleet.cli import cli

    r = CliRunner().invoke(cli, ["plan", "--format", "json", str(EXAMPLES)])
    assert r.exit_code == 0, r.stderr
    return r.stdout


def examples_plan_json() -> dict[str, Any]:
    """`gpufleet plan --format json examples/`, run once per test process; a fresh copy for
    each caller."""
    data: dict[str, Any] = json.loads(_examples_json())
    return data


def write(tmp: Path, name: str, text: str) -> str:
    p = tmp / name
    p.write_text(text)
    return str(p)


def by_type(report: PlanReport, typ: str) -> list[dict[str, Any]]:
    return [dict(r) for r in report.resources if r["type"] == typ]


def named(report: PlanReport, name: str, typ: str | None = None) -> dict[str, Any]:
    hits = [dict(r) for r in report.resources
            if r["name"] == name and (typ is None or r["type"] == typ)]
    assert len(hits) == 1, (name, [h["type"] for h in hits])
    return hits[0]


def children(report: PlanReport, parent_name: str) -> list[dict[str, Any]]:
    parents = {r["urn"] for r in report.resources if r["name"] == parent_name and not r["custom"]}
    return [dict(r) for r in report.resources if r["parent"] in parents]


def stack_config(paths: Sequence[str | Path], profile: str | None = None,
                 catalog: str | None = None, lock: str | Path | None = None) -> dict[str, str]:
    """The stack config of an offline run over ``paths`` (as `gpufleet plan` makes it)."""
    return stackconfig.offline_settings([str(p) for p in paths], profile, catalog,
                                        str(lock) if lock else None).to_config()
