"""Deserialized wire values as JSON-ready data: what the mocked run records of each
registration's inputs and outputs, and of the stack's exports."""

from __future__ import annotations

from typing import Any

from pulumi.runtime import rpc

_SECRET_SIG = "4dabf18193072939515e22adb298388d"
_SECRET = "1b47061264138c4ac30d75fd1eb44270"

_SCALARS = frozenset({str, int, float, bool, type(None)})


def plain(value: Any) -> Any:
    """Deserialized wire values -> JSON-ready data (secrets marked, unknowns spelled out).
    Exact built-in types are looked at by type, a scalar never called for (a derived
    node's seeded state is mostly strings: half the time of the isinstance chain, which
    every other value still takes)."""
    kind = type(value)
    if kind is dict:
        if value.get(_SECRET_SIG) == _SECRET:
            return {"secret": plain(value.get("value"))}
        return {k if type(k) is str else str(k): v if type(v) in _SCALARS else plain(v)
                for k, v in value.items()}
    if kind is list:
        return [v if type(v) in _SCALARS else plain(v) for v in value]
    if kind in _SCALARS:
        return value
    return _plain_other(value)


def _plain_other(value: Any) -> Any:
    if isinstance(value, dict):
        if value.get(_SECRET_SIG) == _SECRET:
            return {"secret": plain(value.get("value"))}
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [plain(v) for v in value]
    if value is None or isinstance(value, bool | int | float | str):
        return value
    if value is rpc.UNKNOWN or type(value).__name__ == "Unknown":
        return "<computed>"
    return str(value)
