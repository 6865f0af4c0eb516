"""aws: the rules of dstack's aws backend config model that its schema cannot state
(dstack 0.22.5, ``core/backends/aws/models.py``). Input stage."""

from __future__ import annotations

from typing import Any

from gpufleet.codes import B002, B003
from gpufleet.diagnostics import KeyPath
from gpufleet.input.checks.context import Ctx


def backend_rules(ctx: Ctx, base: KeyPath, raw: dict[str, Any]) -> None:
    if "vpc_name" in raw and "vpc_ids" in raw:
        ctx.error((*base, "vpc_ids"), "Only one of `vpc_name` and `vpc_ids` can be "
                  "specified", B002, key=True)
    if raw.get("default_vpcs") is False and not ("vpc_name" in raw or "vpc_ids" in raw):
        ctx.error((*base, "default_vpcs"), "`default_vpcs: false` needs `vpc_name` or "
                  "`vpc_ids`", B003, key=True)
