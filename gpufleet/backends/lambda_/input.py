"""lambda: the rules of a Lambda backend entry that its schema cannot state. Input stage.

dstack 0.22.5's model (core/backends/lambdalabs/models.py) takes `regions` and `creds`
(`{type: api_key, api_key}`); gpufleet reads the API key from the stack config instead, and
adds `ssh_cidrs`, `image`, `tags`, `access` and `host_setup`."""

from __future__ import annotations

from typing import Any

from gpufleet.codes import B020
from gpufleet.diagnostics import KeyPath
from gpufleet.input.checks.context import Ctx


def backend_rules(ctx: Ctx, base: KeyPath, raw: dict[str, Any]) -> None:
    if raw.get("public_ips") is False:
        ctx.error((*base, "public_ips"), "Lambda instances always have a public address: "
                  "there is no private network to keep them in", B020, key=True,
                  hint="remove `public_ips`; the fleet's firewall ruleset admits SSH from "
                       "`ssh_cidrs` only")
