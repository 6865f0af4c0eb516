"""The plan's resources: counts per type, the tree (each resource under its parent, with
siblings numbered alike (node-0 ... node-7) shown as one line from three on unless expanded)
and the look-ups the offline run answered."""

from __future__ import annotations

import json
import re
from collections import Counter, defaultdict
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


def counts(resources: Sequence[Mapping[str, Any]]) -> dict[str, int]:
    return dict(sorted(Counter(r["type"] for r in resources).items()))


def lookups(found: Sequence[tuple[str, Mapping[str, Any]]]
            ) -> list[tuple[str, Mapping[str, Any], int]]:
    """The offline lookups, each once, with how many times the program made it."""
    seen: dict[str, tuple[str, Mapping[str, Any], int]] = {}
    for t, a in found:
        key = t + json.dumps(dict(a), sort_keys=True)
        seen[key] = (t, a, seen[key][2] + 1 if key in seen else 1)
    return list(seen.values())


def resource_lines(resources: Sequence[Mapping[str, Any]],
                   found: Sequence[tuple[str, Mapping[str, Any]]], expand: bool) -> list[str]:
    """Counts per type; with ``expand`` the tree and the look-ups answered offline."""
    by_type = counts(resources)
    width = max((len(t) for t in by_type), default=0)
    lines = [f"resources: {len(resources)} to create",
             *(f"  {t.ljust(width)}  {c}" for t, c in by_type.items())]
    if not expand:
        more = " and the look-ups answered offline" if found else ""
        return [*lines, f"  (`--expand` lists every resource as a tree{more}; `--format "
                "json` keeps everything)"]
    lines += ["", "resource tree:", *tree(resources, expand)]
    if found:
        lines += ["", "looked up offline (answered with placeholders; `pulumi preview` reads "
                  "the real values):"]
        lines += [f"  {t} {json.dumps(dict(a), sort_keys=True)}" + (f" ({n} times)" if n > 1
                                                                    else "")
                  for t, a, n in lookups(found)]
    return lines
