"""The acceptance tasks in topology order: the nodes' addresses sorted by their positions in
the network (`gpufleet topology --format json`), so that neighbours in the pairs ring and in
the NCCL run's host list are neighbours in the network, and a slow link is named with the
layer it crosses. Pure."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from gpufleet.traits import TOPOLOGY_LAYERS

LAYERS = TOPOLOGY_LAYERS
_ADDRESS = re.compile(r"[0-9A-Fa-f.:]{2,45}")


def topology_positions(doc: Any, fleet: str) -> dict[str, tuple[str, ...]]:
    """Address -> layer ids (outermost first) of ``fleet``'s nodes in a topology document
    (the report, or one fleet's entry); ValueError when it holds none of them or an address
    that is not an IP address."""
    entries = doc.get("fleets", [doc]) if isinstance(doc, dict) else []
    out: dict[str, tuple[str, ...]] = {}
    for f in entries:
        if not isinstance(f, dict) or f.get("fleet") != fleet:
            continue
        for n in f.get("nodes") or []:
            layers = n.get("layers") if isinstance(n, dict) else None
            address = n.get("address") if isinstance(n, dict) else None
            if not isinstance(layers, dict) or not isinstance(address, str):
                raise ValueError(f"a node of fleet {fleet} has no address or layers")
            if not _ADDRESS.fullmatch(address):
                raise ValueError(f"{address!r} is not an IP address")
            out[address] = tuple(str(layers[k]) for k in LAYERS if k in layers)
    if not out:
        raise ValueError(f"the topology document holds no node of fleet {fleet}")
    return out


def ordered(positions: Mapping[str, tuple[str, ...]]) -> list[str]:
    return sorted(positions, key=lambda a: (positions[a], a))


def _awk_sort(source: str) -> str:
    """A shell pipe stage: lines of ``source`` whose first field is an address, those in the
    bash array ``order`` first in its order, the others after them as they came."""
    return ("awk -v order=\"${order[*]}\" 'BEGIN {n = split(order, o, \" \"); "
            "for (i = 1; i <= n; i++) r[o[i]] = i} {k = ($1 in r) ? r[$1] : 100000 + NR; "
            f"print k \"\\t\" $0}}' {source}".rstrip() + " | sort -n | cut -f2-")


def in_topology_order(task: dict[str, Any], order: Sequence[str]) -> dict[str, Any]:
    """The NCCL or pairs task with its hosts in ``order``: the MPI hostfile (NCCL) or the
    node list (pairs) rewritten before the run; addresses not listed keep dstack's order
    after the listed ones."""
    commands = list(task["commands"])
    run = commands[-1]
    if "$DSTACK_MPI_HOSTFILE" in run:
        run = run.replace('--hostfile "$DSTACK_MPI_HOSTFILE"', '--hostfile "$hosts"').replace(
            "then\n", "then\n  hosts=$(mktemp)\n  "
            + _awk_sort('"$DSTACK_MPI_HOSTFILE"') + ' > "$hosts"\n', 1)
    elif 'mapfile -t ips <<< "$DSTACK_NODES_IPS"' in run:
        run = run.replace('mapfile -t ips <<< "$DSTACK_NODES_IPS"',
                          "mapfile -t ips < <(printf '%s\\n' \"$DSTACK_NODES_IPS\" | "
                          + _awk_sort("") + ")", 1)
    else:
        return task
    # the nodes' addresses in topology order (`gpufleet topology --format json`)
    return {**task, "commands": [*commands[:-1], f"order=({' '.join(order)})\n{run}"]}


def crossing(a: tuple[str, ...] | None, b: tuple[str, ...] | None) -> str:
    """What a link between two positions crosses, for the pairs checker."""
    if a is None or b is None:
        return "its layer is unknown (a node is not in the topology document)"
    for i, layer in enumerate(LAYERS):
        if i >= len(a) or i >= len(b):
            break
        if a[i] != b[i]:
            return f"it crosses the {layer} layer ({a[i]} / {b[i]})"
    return "both nodes sit under the same network nodes"
