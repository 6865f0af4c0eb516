"""Write `pulumi stack export` files (deployment v3) from an offline run of the real stack
program, the way the engine stores what `pulumi up` created."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from gpufleet.compile.compiler import compile_inputs
from gpufleet.compile.runs import RunInputs
from gpufleet.components.run.harness import deployment_v3
from gpufleet.components.run.plan import run_offline
from gpufleet.input import SyncedGateway
from gpufleet.input.lockspec import Lock
from gpufleet.input.validate import validate_paths
from gpufleet.offers.catalog import load_catalog


def export(files: Sequence[str | Path], stack: str = "dev", project: str = "gpufleet",
           lock: Lock | None = None, catalog_dir: str | None = None,
           synced: Mapping[str, SyncedGateway] | None = None) -> dict[str, Any]:
    """What `pulumi up` would leave in the state for these files (offers from ``lock``
    where it covers them, as the stack program takes them; the gateways' records from
    ``synced``, as `gpufleet gateway sync` stores them)."""
    paths = [str(f) for f in files]
    validated = validate_paths(paths)
    assert validated.ok, validated.diagnostics
    compiled = compile_inputs(validated.inputs, load_catalog(catalog_dir), None, lock,
                              synced=synced)
    assert compiled.ok, compiled.diagnostics
    return deployment_v3(run_offline(RunInputs(tuple(paths), catalog_dir=catalog_dir, stack=stack),
                                     compiled, record_outputs=True), stack, project)


def write_export(path: Path, data: dict[str, Any]) -> str:
    path.write_text(json.dumps(data, indent=2))
    return str(path)
