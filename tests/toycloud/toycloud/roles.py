"""toycloud's input and handoff roles."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any


def backend_rules(ctx: Any, base: Any, raw: dict[str, Any]) -> None:
    """Nothing its schema cannot say."""


def backend_entry(out: Mapping[str, Any], main: Mapping[str, Any],
                  plain: Callable[[Any], Any]) -> dict[str, Any]:
    return {}
