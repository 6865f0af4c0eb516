"""The backends file's `buckets:` -> BucketSpec, each name held to its store's own rule (the
store's naming page, in gpufleet/objectstores.py and each cloud's ``buckets``), each class to
its rules, each `cache_of` to a bucket of the file. Pure."""

from __future__ import annotations

from typing import Any

from gpufleet.codes import V024, V025, V026
from gpufleet.diagnostics import Diagnostic, KeyPath
from gpufleet.input.bucketspec import BucketMount, BucketSpec
from gpufleet.input.checks.context import Ctx
from gpufleet.input.schema import Checked
from gpufleet.objectstores import R2_CLOUD, R2_LOCATIONS, bucket_service


def check_buckets(c: Checked) -> tuple[list[BucketSpec], list[Diagnostic]]:
    ctx = Ctx(c)
    out: list[BucketSpec] = []
    seen: dict[tuple[str, str], KeyPath] = {}
    for i, raw in enumerate(ctx.entries("buckets")):
        base: KeyPath = ("buckets", i)
        if not c.ok(base):
            continue
        spec = _bucket(ctx, base, raw)
        if spec is None:
            continue
        if (spec.cloud, spec.name) in seen:
            ctx.error((*base, "name"), f"bucket '{spec.name}' is declared twice in "
                      f"{spec.cloud}", V024, hint="keep one entry per bucket")
            continue
        seen[(spec.cloud, spec.name)] = base
        out.append(spec)
    names = {b.name for b in out}
    for i, raw in enumerate(ctx.entries("buckets")):
        source = raw.get("cache_of") if isinstance(raw, dict) else None
        if source is not None and (source not in names or source == raw.get("name")):
            ctx.error(("buckets", i, "cache_of"), f"`cache_of: {source}` names no other "
                      "bucket of this file", V025,
                      hint=f"one of: {', '.join(sorted(names - {raw.get('name')})) or 'none'}")
    return out, ctx.diags


def _bucket(ctx: Ctx, base: KeyPath, raw: dict[str, Any]) -> BucketSpec | None:
    cloud, name, klass = str(raw["cloud"]), str(raw["name"]), str(raw.get("class", "standard"))
    store = bucket_service(cloud)
    if store is None:
        ctx.error((*base, "cloud"), f"{cloud} has no object store gpufleet builds buckets in",
                  V024)
        return None
    if not store.name_pattern.fullmatch(name) or len(name) > store.name_max:
        ctx.error((*base, "name"), f"'{name}' is not a {store.title} bucket name",
                  V024, hint=f"the rule: {store.name_source}")
        return None
    if klass not in store.classes:
        ctx.error((*base, "class"), f"{store.title} has no class '{klass}' gpufleet builds",
                  V024, hint=f"one of: {', '.join(store.classes)}")
        return None
    if not _class_rules(ctx, base, raw, store.classes[klass], name, cloud):
        return None
    life = raw.get("lifecycle") or {}
    line, col = ctx.c.doc.source.key(base)
    return BucketSpec(
        name, cloud, str(raw["region"]), klass, _mounts(raw, name), ctx.c.doc.file, line, col,
        raw.get("zone"), bool(raw.get("versioning", False)), life.get("expire_days"),
        life.get("noncurrent_days"), str(life.get("prefix", "")), raw.get("cache_of"),
        raw.get("expected_gb"), raw.get("account_id"))


def _class_rules(ctx: Ctx, base: KeyPath, raw: dict[str, Any], klass: Any, name: str,
                 cloud: str) -> bool:
    zone = raw.get("zone")
    if klass.zonal:
        if not zone:
            ctx.error(base, f"bucket '{name}': {klass.title} needs `zone`", V026, key=True,
                      hint=klass.rule)
            return False
        if not name.endswith(f"--{zone}--x-s3") or raw.get("versioning"):
            ctx.error((*base, "name"), f"bucket '{name}': {klass.rule}; and it keeps no "
                      "versions", V026, hint=f"name it like data--{zone}--x-s3")
            return False
    elif zone:
        ctx.error((*base, "zone"), f"bucket '{name}': a {klass.title} bucket is regional: "
                  "remove `zone`", V026)
        return False
    if cloud == R2_CLOUD and raw["region"] not in R2_LOCATIONS:
        ctx.error((*base, "region"), f"'{raw['region']}' is not an R2 location hint", V026,
                  hint=f"one of: {', '.join(sorted(R2_LOCATIONS))} "
                       "(developers.cloudflare.com/r2/reference/data-location/)")
        return False
    return True


def _mounts(raw: dict[str, Any], name: str) -> tuple[BucketMount, ...]:
    out = []
    for m in raw.get("mounts") or []:
        transfer = m.get("transfer") or {}
        out.append(BucketMount(str(m["fleet"]), str(m.get("path") or f"/mnt/{name}"),
                               bool(m.get("read_only", True)),
                               transfer.get("read_gb_per_month"),
                               transfer.get("write_gb_per_month")))
    return tuple(out)
