"""Which of a fleet's nodes the stack program registers: every one at `pulumi up` and
`pulumi preview`; in gpufleet's offline runs (plan, diff) only a sample, the rest derived
from it (``gpufleet.components.run.derive``). A fleet's nodes differ only in their index and
names, so a plan's cost grows with its fleets and resource kinds, not with its nodes.

The sample is the first ``PER_CLASS`` nodes of each class: nodes the seeding state holds
already, and nodes it does not (a diff of a fleet that grows derives its new nodes from new
ones). Offline plans have no state: every node is new.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager

from gpufleet.compile import FleetDesign

PER_CLASS = 2  # two of each class: the derivation checks the second against the first

_active = False
_seeded: frozenset[str] | None = None  # names of the resources the seeding state holds


@contextmanager
def sampling(seeded_names: Sequence[str] | None = None) -> Iterator[None]:
    """Register only a sample of each fleet's nodes while the block runs (one run at a
    time: the offline runs are sequential)."""
    global _active, _seeded
    _active, _seeded = True, frozenset(seeded_names) if seeded_names is not None else None
    try:
        yield
    finally:
        _active, _seeded = False, None


def is_sampling() -> bool:
    return _active


def existing(plan: FleetDesign, node: str) -> bool:
    """Whether the seeding state holds this node, under the fleet's name or one it had."""
    if _seeded is None:
        return False
    suffix = node[len(plan.name):]
    return any(old + suffix in _seeded for old in (plan.name, *plan.previous_names))


def registered_nodes(plan: FleetDesign) -> tuple[str, ...]:
    """The nodes the program registers: all of them, or the sample while sampling."""
    if not _active:
        return plan.node_names
    picked: list[str] = []
    counts = {True: 0, False: 0}
    for n in plan.node_names:
        cls = existing(plan, n)
        if counts[cls] < PER_CLASS:
            picked.append(n)
            counts[cls] += 1
    return tuple(picked)
