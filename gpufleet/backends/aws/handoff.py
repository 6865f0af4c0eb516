"""aws: the dstack backend config entry for the networks of one fleet, from its stack
outputs (what `gpufleet export dstack` writes). Handoff stage."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any


def backend_entry(out: Mapping[str, Any], main: Mapping[str, Any],
                  plain: Callable[[Any], Any]) -> dict[str, Any]:
    """dstack's settings for this fleet's network (``plain`` unwraps a secret output); a
    ValueError says what the backends file lacks."""
    return {"vpc_ids": {out["region"]: plain(main.get("id"))}, "default_vpcs": False}
