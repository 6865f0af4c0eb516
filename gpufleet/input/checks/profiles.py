"""Profiles files (dstack's `profiles.yml`): the fleet fields each profile fills in ->
ProfileSpec + located diagnostics. Pure."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from gpufleet.codes import F002, F005, P001, P002, P003
from gpufleet.diagnostics import Diagnostic, KeyPath, Severity
from gpufleet.input.checks.context import Ctx, strs, tags_of
from gpufleet.input.normalize import SpecError, parse_idle_duration, parse_resources, parse_retry
from gpufleet.input.schema import Checked
from gpufleet.input.spec import Origin, ProfileSpec, frozen_map


def check_profiles(c: Checked) -> tuple[list[ProfileSpec], list[Diagnostic]]:
    ctx = Ctx(c)
    out: list[ProfileSpec] = []
    if not c.ok_above(("profiles",)):
        return out, ctx.diags
    seen: dict[str, int] = {}
    for i, raw in enumerate(ctx.data()["profiles"]):
        if not isinstance(raw, dict) or not c.ok_above(("profiles", i)):
            continue
        name = str(raw.get("name") or "")  # dstack's default: "" (selected as the default)
        if name in seen:
            ctx.error(("profiles", i, "name"), f"duplicate profile '{name}' (first at "
                      f"profiles[{seen[name]}])", P001)
        seen.setdefault(name, i)
        values = _profile_values(ctx, ("profiles", i), raw)
        line, col = c.doc.source.key(("profiles", i))
        out.append(ProfileSpec(name, Origin(c.doc.file, line, col, c.doc.index),
                               bool(raw.get("default", False)), frozen_map(values)))
    defaults = [p for p in out if p.default]
    if len(defaults) > 1:
        ctx.error(("profiles",), "several profiles set `default: true`: "
                  f"{', '.join(p.name for p in defaults)}", P002, key=True,
                  hint="keep `default: true` on one profile")
    return out, ctx.diags


def _profile_values(ctx: Ctx, base: KeyPath, raw: dict[str, Any]) -> dict[str, Any]:
    values: dict[str, Any] = {}
    raw = {k: v for k, v in raw.items() if ctx.c.ok((*base, k))}
    for key in ("backends", "regions", "availability_zones", "instance_types"):
        if key in raw:
            values[key] = strs(raw[key])
    for key in ("reservation", "spot_policy", "max_price"):
        if key in raw:
            values[key] = raw[key]
    parsers: dict[str, Callable[[Any], Any]] = {
        "retry": parse_retry, "idle_duration": parse_idle_duration}
    for key, fn in parsers.items():
        if key in raw:
            try:
                values[key] = fn(raw[key])
            except SpecError as e:
                ctx.error((*base, key, *e.subpath), e.message, e.code or F005)
    if "resources" in raw:
        ctx.error((*base, "resources"), "dstack 0.22.5's profiles have no `resources`: dstack "
                  "refuses this profiles.yml; gpufleet reads it as the default resources of "
                  "fleets that set none", P003, key=True, severity=Severity.WARNING,
                  hint="set `resources` in the fleet files and drop it here, so that dstack "
                  "reads this file too")
        res, errors = parse_resources(raw["resources"])
        for err in errors:
            ctx.error((*base, "resources", *err.subpath), err.message,
                      err.code or F002)
        values["resources"] = res
    if "tags" in raw:
        values["tags"] = frozen_map(tags_of(ctx, base, raw))
    return values
