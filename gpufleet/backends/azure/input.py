"""azure: the rules of dstack's azure backend config model that its schema cannot state
(dstack 0.22.5, ``core/backends/azure/models.py``). Input stage."""

from __future__ import annotations

from typing import Any

from gpufleet.codes import B004, B007
from gpufleet.diagnostics import KeyPath
from gpufleet.input.checks.context import Ctx


def backend_rules(ctx: Ctx, base: KeyPath, raw: dict[str, Any]) -> None:
    vpcs, subnets = raw.get("vpc_ids") or {}, raw.get("subnet_ids") or {}
    if raw.get("public_ips") is False and not (vpcs or subnets):
        ctx.error((*base, "public_ips"), "`vpc_ids` or `subnet_ids` must be specified if "
                  "`public_ips: false`.", B004, key=True)
    for loc in sorted(set(vpcs) & set(subnets)):
        ctx.error((*base, "subnet_ids", loc), f"location '{loc}' is in both `vpc_ids` and "
                  "`subnet_ids`", B007, key=True, hint="keep one of the two")
