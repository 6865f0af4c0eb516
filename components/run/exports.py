"""A program's exports resolved to plain values, as ``Output.from_input(exports)`` resolves
them, without lifting every container into Outputs.

``Output.from_input`` makes two or three Outputs of each dict and list it meets (its keys,
its values, the dict again), and an export of a 1,000-node fleet holds a dict per node: the
offline harness spent 0.7 s of a 1,000-node run (every node registered) making and awaiting
those. Here the tree is walked once and only the Outputs in it are awaited. The answer is the
same for the values a known run holds: plain dicts, lists, tuples and scalars, and Outputs of
them that are known. Anything else (an Output that is not known, as in a preview; an input
type; an awaitable; a subclass of a container; a key that is not a string) hands the whole tree to
``Output.from_input``, whose answer it is.
"""

from __future__ import annotations

from typing import Any

import pulumi

_SCALARS = frozenset({str, int, float, bool, type(None)})


class _NotPlain(Exception):
    """The tree holds something only ``Output.from_input`` resolves as the SDK does."""


async def resolved(tree: Any) -> Any:
    """``await Output.from_input(tree).future(with_unknowns=True)``."""
    try:
        return await _known(tree)
    except _NotPlain:
        return await pulumi.Output.from_input(tree).future(with_unknowns=True)


async def _known(value: Any) -> Any:
    kind = type(value)
    if kind in _SCALARS:
        return value
    if isinstance(value, pulumi.Output):
        if not await value.is_known():
            raise _NotPlain
        return await _known(await value.future())
    if kind is dict:
        out = {}
        for key, item in value.items():
            if type(key) is not str:  # the SDK refuses others (keywords must be strings)
                raise _NotPlain
            out[key] = item if type(item) in _SCALARS else await _known(item)
        return out
    if kind is list or kind is tuple:
        items = [item if type(item) in _SCALARS else await _known(item) for item in value]
        return items if kind is list else tuple(items)
    raise _NotPlain
