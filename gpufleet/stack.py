"""Entry of the Pulumi program in ``stacks/``: config -> files -> validated inputs.

Later stages (offers, plan, emit) hang off :func:`run`; until then the program refuses to
deploy anything from invalid YAML and stops with the rendered diagnostics.
"""

from __future__ import annotations

import glob
import os
from pathlib import Path

from gpufleet.diagnostics import render_text
from gpufleet.inputs import Validated, validate_paths


def resolve_files(patterns: list[str], base: Path) -> list[str]:
    """Paths or globs relative to the stack folder -> existing paths, in a stable order."""
    out: list[str] = []
    for pattern in patterns:
        full = pattern if os.path.isabs(pattern) else str(base / pattern)
        matches = sorted(glob.glob(full, recursive=True)) or [full]
        out.extend(m for m in matches if m not in out)
    return out


def load_validated(patterns: list[str], base: Path) -> Validated:
    result = validate_paths(resolve_files(patterns, base))
    if not result.ok:
        raise ValueError("invalid gpufleet input:\n" + render_text(
            [d for d in result.diagnostics if d.is_error], result.sources))
    return result


def run() -> None:  # pragma: no cover - exercised through the Pulumi engine or `gpufleet plan`
    import pulumi

    cfg = pulumi.Config("gpufleet")
    root = pulumi.get_root_directory() or os.getcwd()
    files = cfg.get_object("files") or []
    load_validated(list(files), Path(root))
