"""azure: the dstack backend config entry for the networks of one fleet, from its stack
outputs (what `gpufleet export dstack` writes). Handoff stage."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any


def backend_entry(out: Mapping[str, Any], main: Mapping[str, Any],
                  plain: Callable[[Any], Any]) -> dict[str, Any]:
    """dstack's settings for this fleet's network (``plain`` unwraps a secret output); a
    ValueError says what the backends file lacks."""
    entry: dict[str, Any] = {}
    for key, value in (("tenant_id", out.get("tenant_id")),
                       ("subscription_id", out.get("scope"))):
        if not value:
            raise ValueError(f"its azure backends entry set no `{key}` when it was "
                             "deployed, and dstack's azure backend requires it: set it in "
                             "the backends file and re-run `pulumi up`")
        entry[key] = value
    rg = plain(out.get("resource_group"))
    subnet_ids = out.get("subnets") or {}
    subnet = next(iter(subnet_ids.values()), None) if subnet_ids else None
    sub_name = str(plain(subnet) or "").rsplit("/", 1)[-1]
    entry["subnet_ids"] = {out["region"]: f"{rg}/{plain(main.get('name'))}/{sub_name}"}
    return entry
