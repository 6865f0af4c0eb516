"""Which fleet, gateway or bucket a resource belongs to: the one place that answers it, for
the diff, drift, `up`'s capacity fallback and the policy report. Pure.

A resource belongs to the top-level gpufleet component (``gpufleet:<backend>:Fleet`` or
``:Gateway``, or a bucket's ``gpufleet:storage:Bucket``, named ``bucket:NAME``) above it in
the parent chain. Where the chain is not known (an engine error
names only a URN), the resource's name decides: every name gpufleet gives starts with its
fleet's or gateway's name.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping
from typing import Any

from gpufleet.input import Inputs, Origin

TOP_KINDS = (":Fleet", ":Gateway", ":Bucket")
BUCKET_OWNER = "bucket:"  # a bucket's owner name: never one of a fleet or gateway


def is_top(typ: str) -> bool:
    """A fleet or gateway component (the owner of everything under it)."""
    return typ.startswith("gpufleet:") and typ.endswith(TOP_KINDS)


def top_name(typ: str, name: str) -> str:
    """The owner name of a top-level component: a fleet's or gateway's own, `bucket:NAME`
    for a bucket's (never one of a fleet or gateway)."""
    return BUCKET_OWNER + name if typ.endswith(":Bucket") else name


def _type_of(urn: str, types: Mapping[str, str]) -> str:
    known = types.get(urn)
    if known:
        return known
    parts = urn.split("::")
    return parts[2].split("$")[-1] if len(parts) >= 4 else ""


def _own_name(urn: str, types: Mapping[str, str]) -> str | None:
    """The owner name ``urn`` gives itself where it is a top-level component, else None."""
    typ = _type_of(urn, types)
    return top_name(typ, urn.rsplit("::", 1)[-1]) if is_top(typ) else None


def owner_of(urn: str, parents: Mapping[str, str], types: Mapping[str, str],
             names: Collection[str] = ()) -> str | None:
    """The name of the top-level component above ``urn`` (itself included), else the longest
    of ``names`` that the resource's name is or starts with (``<name>-...``)."""
    cur, top, seen = urn, None, set()
    while cur and cur not in seen:
        seen.add(cur)
        own = _own_name(cur, types)
        if own is not None:
            top = own
        cur = parents.get(cur, "")
    if top is not None or not names:
        return top
    name = urn.rsplit("::", 1)[-1]
    hits = [n for n in names if name == n or name.startswith(n + "-")]
    return max(hits, key=len) if hits else None


def owner_map(resources: Iterable[tuple[str, str, str]]) -> dict[str, str]:
    """(urn, type, parent) -> name of the owning fleet or gateway, for every owned URN:
    ``owner_of`` each, each parent chain walked once (a resource's owner is its parent's,
    else its own name where it is a top-level component). A chain that loops (a hand-edited
    state) is walked from each of its URNs, as ``owner_of`` walks it."""
    rows = list(resources)
    parents = {urn: parent for urn, _, parent in rows}
    types = {urn: typ for urn, typ, _ in rows}
    known: dict[str, str | None] = {}
    for urn in parents:
        chain, seen, cur = [], set(), urn
        while cur and cur not in known and cur not in seen:
            seen.add(cur)
            chain.append(cur)
            cur = parents.get(cur, "")
        if cur in seen:  # a loop: no URN of it has one owner whatever the start
            known.update((u, owner_of(u, parents, types)) for u in chain)
            continue
        owner = known.get(cur) if cur else None
        for u in reversed(chain):
            if owner is None:
                owner = _own_name(u, types)
            known[u] = owner
    return {urn: owner for urn in parents if (owner := known[urn]) is not None}


def resource_owners(resources: Iterable[Mapping[str, Any]]) -> dict[str, str]:
    """``owner_map`` of a run's resource dicts (`urn`, `type`, `parent`)."""
    return owner_map((str(r["urn"]), str(r["type"]), str(r.get("parent") or ""))
                     for r in resources)


def spec_origins(inputs: Inputs) -> dict[str, Origin]:
    """Where each fleet, gateway and bucket is written, by owner name: where a run's finding
    is said."""
    origins = {f.name: f.origin for f in inputs.fleets}
    origins.update({g.name: g.origin for g in inputs.gateways})
    origins.update({BUCKET_OWNER + b.name: Origin(b.file, b.line, b.column)
                    for b in inputs.buckets})
    return origins
