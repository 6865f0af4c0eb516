"""Write `pulumi stack export` files (deployment v3) from an offline run of the real stack
program, the way the engine stores what `pulumi up` created."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from gpufleet.components.harness import deployment_v3
from gpufleet.review.plan import run_offline


def export(files: Sequence[str | Path], stack: str = "dev", project: str = "gpufleet"
           ) -> dict[str, Any]:
    return deployment_v3(run_offline([str(f) for f in files], stack, None, None,
                                     record_outputs=True), stack, project)


def write_export(path: Path, data: dict[str, Any]) -> str:
    path.write_text(json.dumps(data, indent=2))
    return str(path)
