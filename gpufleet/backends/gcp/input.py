"""gcp: the rules of dstack's gcp backend config model that its schema cannot state
(dstack 0.22.5, ``core/backends/gcp/models.py``). Input stage."""

from __future__ import annotations

from typing import Any

from gpufleet.codes import B009
from gpufleet.diagnostics import KeyPath
from gpufleet.input.checks.context import Ctx


def backend_rules(ctx: Ctx, base: KeyPath, raw: dict[str, Any]) -> None:
    if raw.get("vpc_project_id") and not raw.get("vpc_name"):
        ctx.error((*base, "vpc_project_id"), "`vpc_project_id` (a Shared VPC's host project) "
                  "needs `vpc_name`, the host project's network the nodes join", B009,
                  key=True, hint="set `vpc_name` to the shared network's name")
