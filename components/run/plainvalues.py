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
    A scalar of an exact built-in type inside a dict or list is taken as it is, without a
    call (a derived node's seeded state is mostly strings: half the time of calling for
    each)."""
    if isinstance(value, dict):
        if value.get(_SECRET_SIG) == _SECRET:
            return {"secret": plain(value.get("value"))}
        return {k if type(k) is str else str(k): v if type(v) in _SCALARS else plain(v)
                for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [v if type(v) in _SCALARS else plain(v) for v in value]
    if value is None or isinstance(value, bool | int | float | str):
        return value
    if value is rpc.UNKNOWN or type(value).__name__ == "Unknown":
        return "<computed>"
    return str(value)
