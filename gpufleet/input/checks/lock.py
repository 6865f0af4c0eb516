"""The `gpufleet.lock` file: its schema-checked entries -> Lock + located diagnostics. Pure."""

from __future__ import annotations

import ipaddress
from typing import Any

from gpufleet.codes import K002, K004
from gpufleet.diagnostics import Diagnostic, KeyPath
from gpufleet.input.checks.context import Ctx, region_of_zone
from gpufleet.input.lockspec import Lock, LockEntry
from gpufleet.input.schema import Checked
from gpufleet.input.spec import Origin


def check_lock(c: Checked) -> tuple[Lock | None, list[Diagnostic]]:
    """A ``gpufleet.lock`` document -> Lock. Entries the schema rejected are left out."""
    ctx = Ctx(c)
    if not c.ok(()):
        return None, ctx.diags
    data = ctx.data()
    parts: dict[str, dict[str, LockEntry]] = {"fleets": {}, "gateways": {}}
    for section, entries in parts.items():
        for name, raw in (data.get(section) or {}).items():
            base: KeyPath = (section, name)
            if not c.ok(base):
                continue
            zone, region = raw.get("zone"), raw["region"]
            if zone and region_of_zone(zone) not in (None, region):
                ctx.error((*base, "zone"), f"zone {zone} is not in region {region}", K002,
                          hint="run `gpufleet lock --upgrade --fleet NAME` to pick the offer "
                               "again instead of editing the lock by hand")
                continue
            gpu = raw.get("gpu") or {}
            line, col = c.doc.source.key(base)
            entries[name] = LockEntry(
                name, raw["requirements"], raw["backend"], region, zone, raw["instance_type"],
                bool(raw["spot"]), _float(raw.get("price")), str(raw.get("catalog", "")),
                int(raw.get("cpus", 0)), float(raw.get("memory_gib", 0)), gpu.get("name"),
                int(gpu.get("count", 0)), _float(gpu.get("memory_gib")), _cidr(ctx, base, raw),
                Origin(c.doc.file, line, col, c.doc.index), _overhead(raw),
                raw.get("reservation"))
    return Lock(parts["fleets"], parts["gateways"], c.doc.file), ctx.diags


def _cidr(ctx: Ctx, base: KeyPath, raw: dict[str, Any]) -> str | None:
    """The entry's address block; an invalid one is an error (the lock was edited by hand)."""
    value = raw.get("cidr")
    if value is None:
        return None
    try:
        return str(ipaddress.IPv4Network(value))
    except ValueError:
        pass
    try:
        why = f"not a network address ({ipaddress.IPv4Network(value, strict=False)} is)"
    except ValueError:
        why = "not an IPv4 network such as 10.30.0.0/16"
    ctx.error((*base, "cidr"), f"invalid address block '{value}': {why}", K004,
              hint="run `gpufleet lock` to record the block again instead of editing it")
    return None


def _overhead(raw: dict[str, Any]) -> tuple[float, float, str] | None:
    o = raw.get("overhead")
    return None if o is None else (float(o["fixed"]), float(o["per_node"]), str(o["prices"]))


def _float(v: Any) -> float | None:
    return None if v is None else float(v)
