"""The plan's resource tree: each resource under its parent, with siblings numbered alike (node-0
... node-7) shown as one line from three on unless expanded."""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Mapping, Sequence
from typing import Any

_NUMBERED = re.compile(r"(.*?)(\d+)(\D*)")


COLLAPSE_AT = 3  # siblings numbered alike shown as one line from this many on


def tree(resources: Sequence[Mapping[str, Any]], expand: bool = False) -> list[str]:
    """The resources as a tree; siblings of one type numbered alike (node-0 .. node-999)
    without children of their own fold into one line unless ``expand``."""
    children: dict[str, list[Mapping[str, Any]]] = defaultdict(list)
    urns = {r["urn"] for r in resources}
    for r in resources:
        children[r["parent"] if r["parent"] in urns else ""].append(r)
    out: list[str] = []

    def walk(parent: str, depth: int) -> None:
        kids = sorted(children.get(parent, []), key=lambda x: (x["type"], x["name"]))
        runs: dict[tuple[str, str, str], list[tuple[int, str]]] = defaultdict(list)
        if not expand:
            for r in kids:
                m = _NUMBERED.fullmatch(r["name"])
                if m and not children.get(r["urn"]):
                    runs[(r["type"], m.group(1), m.group(3))].append((int(m.group(2)),
                                                                      r["name"]))
        shown: set[tuple[str, str, str]] = set()
        for r in kids:
            m = _NUMBERED.fullmatch(r["name"])
            key = (r["type"], m.group(1), m.group(3)) if m else None
            if key is not None and len(runs.get(key, ())) >= COLLAPSE_AT:
                if key not in shown:
                    shown.add(key)
                    run = sorted(runs[key])
                    out.append(f"{'  ' * depth}+ {r['type']}  {run[0][1]} .. {run[-1][1]}: "
                               f"{len(run):,} x (`--expand` lists them)")
                continue
            out.append(f"{'  ' * depth}+ {r['type']}  {r['name']}")
            walk(r["urn"], depth + 1)
    walk("", 1)
    return out
