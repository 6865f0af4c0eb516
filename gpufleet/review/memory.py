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

# Offline runs register two nodes per fleet and derive the others (components/run/derive.py).
# Measured (bench/plan.py's 16,000-node aws fleet and `plan examples/`, peak RSS, text and JSON
# alike, as the JSON output streams): 90 MB for 2 aws nodes, 139 MB for 16,000 (0.003 MB a
# node), 180 MB for the examples (three provider SDKs): a 200 MB base and 0.005 MB a node
# keep a margin of about half over what was measured.
BASE_MB = 200.0
PER_NODE_MB = 0.005
# under an address-space limit (`ulimit -v`), what a process maps beyond what it touches
# (thread stacks, the gRPC runtime's arenas): its peak virtual size was 320 MB for the aws
# fleets above and 408 MB for the examples, 230 MB over their peak RSS
MAPPED_HEADROOM_MB = 250.0


def needed_mb(plans: Sequence[FleetDesign]) -> float:
    return BASE_MB + PER_NODE_MB * sum(p.nodes for p in plans)


def available_mb() -> float | None:
    """What this process may take: the room under its address-space limit (the limit less
    what the run maps beyond what it touches), and the machine's available memory (Linux's
    MemAvailable); None when neither can be read."""
    limits: list[float] = []
    soft, _ = resource.getrlimit(resource.RLIMIT_AS)
    if soft not in (resource.RLIM_INFINITY, -1):
        limits.append(soft / 2**20 - MAPPED_HEADROOM_MB)
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
