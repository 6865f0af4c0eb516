"""How far a YAML document's aliases expand it, measured over PyYAML's composed node graph
before anything is built (``gpufleet.input.loader`` refuses past the bound)."""

from __future__ import annotations

from yaml.nodes import MappingNode, Node, SequenceNode

# Values aliases may expand to in one document, scalars included, each time an alias repeats
# them: an alias or merge bomb is refused past this many, before any is built.
MAX_VALUES = 100_000
MERGE_TAG = "tag:yaml.org,2002:merge"


class _Unsized(Exception):
    """The node graph has a fault the builder names itself (a recursive alias, a merge of
    what is not a mapping)."""


def split_merges(node: MappingNode) -> tuple[list[tuple[Node, Node]], list[Node]]:
    """A mapping's own (key, value) pairs, and what its merge keys (`<<: *a`,
    `<<: [*a, *b]`) bring in, in order: the loader builds the pairs, then merges the rest."""
    pairs: list[tuple[Node, Node]] = []
    merged: list[Node] = []
    for knode, vnode in node.value:
        if knode.tag != MERGE_TAG:
            pairs.append((knode, vnode))
        else:
            merged.extend(vnode.value if isinstance(vnode, SequenceNode) else [vnode])
    return pairs, merged


def _children(node: Node) -> list[Node]:
    """The nodes the builder builds under ``node``, in its order."""
    if isinstance(node, SequenceNode):
        return list(node.value)
    if not isinstance(node, MappingNode):
        return []
    pairs, merged = split_merges(node)
    if not all(isinstance(m, MappingNode) for m in merged):
        raise _Unsized
    return [v for _, v in pairs] + merged


def expansion_past_bound(root: Node, bound: int = MAX_VALUES) -> Node | None:
    """The repeated node whose expansion takes the count of expanded values past
    ``bound``, found over the node graph without building it; None when the count stays
    within (or the graph has a fault the builder reports). The count is the builder's: each
    time a node is reached again through an alias, it and everything under it. Each node's
    expanded size is computed once and nothing already seen is walked twice, so a bomb is
    refused in the time its text takes to compose, not after building 100,000 values."""
    sizes: dict[int, int] = {}
    active: set[int] = set()

    def size(node: Node) -> int:
        key = id(node)
        if key not in sizes:
            if key in active:
                raise _Unsized  # recursive alias
            active.add(key)
            # held at bound + 1: the count passes the bound either way, and a chain of
            # anchors each repeating the one before twice stays a small number
            sizes[key] = min(1 + sum(size(child) for child in _children(node)), bound + 1)
            active.discard(key)
        return sizes[key]

    seen: set[int] = set()
    count = 0

    def visit(node: Node) -> Node | None:
        nonlocal count
        if id(node) in seen:
            count += size(node)
            return node if count > bound else None
        seen.add(id(node))
        for child in _children(node):
            if (past := visit(child)) is not None:
                return past
        return None
    try:
        return visit(root)
    except _Unsized:
        return None
