"""Whether an offline run of the plan fits the memory at hand, asked before it starts: a
process killed for memory (or a segfault under a limit) tells the user nothing. Pure but for
reading the machine's limits."""

from __future__ import annotations

import contextlib
import resource
from collections.abc import Sequence

from gpufleet.codes import C022
from gpufleet.compile import FleetDesign
from gpufleet.diagnostics import Diagnostic
from gpufleet.input import Inputs

# Offline runs register two nodes per fleet and derive the others (components/run/derive.py):
# `gpufleet plan` of one aws fleet of 16,000 nodes peaks at 154 MB as text and 710 MB as JSON
# (each node's record, its boot script included, written out): about 0.04 MB per node over
# a 160 MB base, with headroom
BASE_MB = 160.0
PER_NODE_MB = 0.04
# under an address-space limit (`ulimit -v`), what a process maps beyond what it touches:
# thread stacks, the gRPC runtime's arenas
MAPPED_HEADROOM_MB = 768.0


def needed_mb(plans: Sequence[FleetDesign]) -> float:
    return BASE_MB + PER_NODE_MB * sum(p.nodes for p in plans)


def available_mb() -> float | None:
    """What this process may still take: the room left under its address-space limit (the
    limit less what it maps now), and the machine's available memory (Linux's
    MemAvailable); None when neither can be read."""
    limits: list[float] = []
    soft, _ = resource.getrlimit(resource.RLIMIT_AS)
    if soft not in (resource.RLIM_INFINITY, -1):
        limits.append(soft / 2**20 - _proc_kb("/proc/self/status", "VmSize:") / 1024
                      - MAPPED_HEADROOM_MB)
    free = _proc_kb("/proc/meminfo", "MemAvailable:")
    if free:
        limits.append(free / 1024)
    return min(limits) if limits else None


def _proc_kb(path: str, key: str) -> float:
    """A `key: N kB` line of a /proc file (0 when it cannot be read)."""
    with contextlib.suppress(OSError, ValueError, IndexError), \
            open(path, encoding="ascii") as fh:
        for line in fh:
            if line.startswith(key):
                return float(line.split()[1])
    return 0.0


def memory_refusal(plans: Sequence[FleetDesign], inputs: Inputs,
                   available: float | None) -> list[Diagnostic]:
    """An error at the largest fleet's `nodes` when the run would not fit ``available``."""
    if available is None or not plans:
        return []
    need = needed_mb(plans)
    if need <= available:
        return []
    big = max(plans, key=lambda p: p.nodes)
    fleet = next((f for f in inputs.fleets if f.name == big.name), None)
    if fleet is None:
        return []
    total = sum(p.nodes for p in plans)
    return [fleet.origin.at(
        "nodes", C022, f"the offline run of {total:,} node(s) ({big.name}: {big.nodes:,}) "
        f"needs about {need:,.0f} MB; this process may take {available:,.0f} MB",
        "plan on a machine with more memory, or plan the big fleet's networks alone "
        "(`nodes: 0..N`) and let dstack provision its nodes")]
