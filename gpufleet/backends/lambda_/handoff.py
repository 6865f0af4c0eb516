"""lambda: no dstack backend entry. Handoff stage.

A Lambda fleet is handed to dstack as an SSH fleet of its instances' public addresses: a
dstack server's own `lambda` backend would launch instances of its own, outside the stack
(`gpufleet export dstack` writes no server-config project for a backend without networks)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any


def backend_entry(out: Mapping[str, Any], main: Mapping[str, Any],
                  plain: Callable[[Any], Any]) -> dict[str, Any]:
    raise ValueError("Lambda builds no network a dstack backend could use; its fleets are "
                     "handed over as SSH fleets")
