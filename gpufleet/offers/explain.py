"""Words for a selection: the resources a fleet asks for (describe_resources), and the located
diagnostic when no offer matches, with the hint that widens the search."""

from __future__ import annotations

from collections.abc import Iterable

from gpufleet.codes import O002
from gpufleet.diagnostics import Diagnostic, did_you_mean
from gpufleet.input import (
    FleetSpec,
    ResourcesSpec,
)
from gpufleet.offers.catalog import Catalog


def _hint(key: str, spot_policy: str | None = None) -> str:
    spot_allowed = spot_policy in ("auto", "spot")
    return {
        "max_price": f"raise `max_price` (spot is already allowed: `spot_policy: {spot_policy}`)"
        if spot_allowed else "raise `max_price` or allow spot (`spot_policy: auto`)",
        "spot_policy": "set `spot_policy: auto` to accept both spot and on-demand",
        "availability_zones": "list zones where the GPU is offered (see `gpufleet offers`)",
        "regions": "add a region where the GPU is offered (see `gpufleet catalog`)",
        "backends": "add a backend that offers this GPU (see `gpufleet catalog`), or "
                    "remove `backends` to allow every backend",
    }.get(key, f"relax `{key}`")


def _no_match(fleet: FleetSpec, catalog: Catalog, what: str) -> Diagnostic:
    gpu = fleet.resources.gpu
    known = sorted({r.gpu_name for r in catalog.rows if r.gpu_name})
    hint = "see `gpufleet catalog` for what the catalog offers"
    unknown = [n for n in gpu.names if n.lower() not in _lower(known)]
    if gpu.names and len(unknown) == len(gpu.names):
        hint = (f"the catalog has no GPU named {', '.join(unknown)}; "
                + (did_you_mean(unknown[0], known) or f"known GPUs: {', '.join(known)}"))
    elif gpu.names:
        shapes = sorted({(r.gpu_name or "", r.gpu_count, r.gpu_memory_gib or 0)
                         for r in catalog.rows
                         if r.gpu_name and r.gpu_name.lower() in _lower(gpu.names)})
        hint = "the catalog offers " + ", ".join(f"{c}x{n} ({m:g}GB)" for n, c, m in shapes)
    exact = _exact_values(fleet.resources)
    if exact:
        hint = (f"{exact} in dstack's grammar; write a range such as `"
                f"{exact.split('`')[1]}..` for at least that much; " + hint)
    return fleet.origin.at("resources", O002,
               f"no offer for fleet '{fleet.name}': no catalog offer matches {what}", hint)


def _exact_values(res: ResourcesSpec) -> str:
    """What a fleet asks for exactly (`memory: 24GB` is 24GB, not at least 24GB)."""
    for key, r, unit in (("memory", res.memory, "GB"), ("cpu", res.cpu.count, ""),
                         ("disk", res.disk, "GB")):
        if r is not None and r.min is not None and r.min == r.max and r.min > 0:
            value = f"{r.min:g}{unit}"
            return f"`{key}: {value}` means exactly `{value}`"
    return ""


def describe_resources(res: ResourcesSpec) -> str:
    gpu = str(res.gpu) if (res.gpu.names or res.gpu.memory or (res.gpu.count.min or 0) > 0) \
        else ""
    parts = [gpu] if gpu else ["no GPU"] if res.gpu.count.max == 0 else []
    if res.cpu.count.min not in (None, 1, 2) or res.cpu.count.max is not None or res.cpu.arch:
        parts.append(f"cpu {(res.cpu.arch + ':') if res.cpu.arch else ''}{res.cpu.count}")
    if res.memory.min not in (None, 0, 8) or res.memory.max is not None:
        parts.append(f"memory {res.memory}GB")
    return ", ".join(parts) or "dstack's defaults (cpu 2.., memory 8GB.., any GPU or none)"


def _lower(values: Iterable[str]) -> set[str]:
    return {v.lower() for v in values}
