"""The backends file's `filesystems:` -> FilesystemSpec, with each managed service's sizes.

Sizes and throughput tiers, from the services' documentation:
- AWS FSx for Lustre, PERSISTENT_2 SSD: 1200 GiB, 2400 GiB, then multiples of 2400 GiB;
  125, 250, 500 or 1000 MB/s per TiB (FSx CreateFileSystem API, StorageCapacity and
  PerUnitStorageThroughput).
- GCP Managed Lustre (docs.cloud.google.com/managed-lustre/docs/performance-tiers): at 1000
  / 500 / 250 MB/s per TiB the minimum and step are 9,000 / 18,000 / 36,000 GiB up to
  1,530,000 / 3,060,000 / 6,120,000 GiB, then 72,000 / 144,000 / 288,000 GiB up to
  10,008,000 / 20,016,000 / 40,032,000 GiB; at 125, 72,000 GiB steps up to 12,240,000 GiB.
  The maxima are system limits; an instance created in the small-step range cannot grow
  past it. (The Dynamic tier is not offered.)
- Azure Managed Lustre (AMLFS-Durable-Premium-N): minimum and step 48 / 16 / 8 / 4 TiB at
  40 / 125 / 250 / 500 MB/s per TiB, up to 768 / 128 / 128 / 128 TiB without a support
  request (learn.microsoft.com, Azure Managed Lustre sizes): above warns (V009).
- GCP Filestore zonal: 1,024 GiB to 102,400 GiB, in 256 GiB steps below 10 TiB and 2.5 TiB
  steps from 10 TiB (cloud.google.com/filestore/docs/service-tiers-zonal). Azure Files
  premium NFS: 100 GiB to 102,400 GiB. AWS EFS: elastic, no size.
Lustre can fail writes at about 80% full, so a declared `expected_usage_gib` without about
25% headroom warns (V007).
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from gpufleet.backends import is_backend, traits_of
from gpufleet.codes import V003, V007, V009, V010, V011, V012, V013, V014, V023
from gpufleet.diagnostics import Diagnostic, KeyPath, Severity
from gpufleet.input.checks.context import Ctx
from gpufleet.input.schema import Checked
from gpufleet.input.spec import FilesystemSpec, Origin, frozen_map
from gpufleet.traits import LustreTier

_TIB = 1024

HEADROOM = 1.25
# top-level directories a filesystem must not be mounted over (or inside of)
SYSTEM_DIRS = frozenset({"bin", "boot", "dev", "etc", "lib", "lib32", "lib64", "libx32",
                         "proc", "root", "run", "sbin", "snap", "sys", "tmp", "usr", "var"})



def _size_hint(spec: LustreTier, gib: int) -> str:
    if spec.largest is not None and spec.hard_max and gib > spec.largest:
        return f"the largest at this tier is {spec.largest:,} GiB"
    if spec.switch is not None and spec.big_step is not None and gib > spec.switch:
        low = gib // spec.big_step * spec.big_step
        return (f"above {spec.switch:,} GiB it grows in {spec.big_step:,} GiB steps: use "
                f"{max(low, spec.switch):,} or {low + spec.big_step:,} GiB")
    return "valid sizes start " + ", ".join(f"{s:,}" for s in spec.first()) + " GiB"


def check_filesystems(c: Checked) -> tuple[list[FilesystemSpec], list[Diagnostic]]:
    ctx = Ctx(c)
    out: list[FilesystemSpec] = []
    seen: set[str] = set()
    for i, raw in enumerate(ctx.entries("filesystems")):
        base: KeyPath = ("filesystems", i)
        if not c.ok(base):
            continue
        fs = _one(ctx, c, base, raw)
        if fs is None:
            continue
        if fs.name in seen:  # before its mount path: a second entry mounts at the same one
            ctx.error((*base, "name"), f"filesystem '{fs.name}' is declared twice", V014,
                      hint="keep one entry per filesystem")
            continue
        clash = next((o for o in out if o.mount == fs.mount
                      and set(o.fleets) & set(fs.fleets)), None)
        if clash is not None:
            ctx.error((*base, "mount"), f"filesystem '{clash.name}' is mounted at "
                      f"{fs.mount} on the same fleet", V013,
                      hint="give each filesystem a mount path of its own")
            continue
        seen.add(fs.name)
        out.append(fs)
    return out, ctx.diags


def _one(ctx: Ctx, c: Checked, base: KeyPath, raw: Mapping[str, object]
         ) -> FilesystemSpec | None:
    backend, kind = str(raw["backend"]), str(raw["kind"])
    capacity = raw.get("capacity_gib")
    tier = raw.get("throughput")
    name = str(raw["name"])
    if kind == "nfs" and tier is not None:
        ctx.error((*base, "throughput"), "`throughput` is a Lustre tier; an nfs filesystem "
                  "has none", V011, hint="remove `throughput`")
        return None
    if kind == "lustre":
        if not _lustre_size(ctx, base, backend, name, tier, capacity):
            return None
    elif not _nfs_size(ctx, base, backend, name, capacity):
        return None
    service = traits_of(backend).filesystems.get(kind) if is_backend(backend) \
        else None
    default = (service.default_mount if service else "/mnt/{name}").format(name=name)
    mount = str(raw.get("mount") or default)
    if service is not None and service.mount_pattern is not None \
            and not re.fullmatch(service.mount_pattern, mount):
        ctx.error((*base, "mount"), f"{backend} refuses the mount path {mount}: "
                  f"{service.mount_rule}", V023,
                  hint=f"mount it at {default}, or drop `mount` for that default")
        return None
    top = mount.split("/")[1]
    if top in SYSTEM_DIRS or ".." in mount.split("/"):
        ctx.error((*base, "mount"), f"{mount} would cover the system's own files", V012,
                  hint=f"mount it under /mnt or a directory of its own, like /mnt/{name}")
        return None
    usage = raw.get("expected_usage_gib")
    if kind == "lustre" and usage is not None and capacity is not None \
            and int(str(capacity)) < HEADROOM * int(str(usage)):
        ctx.error((*base, "capacity_gib"), f"{capacity} GiB leaves "
                 f"{100 * (int(str(capacity)) / int(str(usage)) - 1):.0f}% headroom over the "
                 f"expected {usage} GiB; Lustre can fail writes at about 80% full", V007,
                  hint="size it at least 25% above expected_usage_gib",
                  severity=Severity.WARNING)
    line, col = c.doc.source.key(base)
    positions = {str(k[-1]): pos for k, pos in c.doc.source.keys.items()
                 if len(k) == len(base) + 1 and tuple(k[:-1]) == base}
    return FilesystemSpec(
        name, backend, str(raw["region"]), kind, _names(raw["fleets"]),
        mount,
        Origin(c.doc.file, line, col, c.doc.index, frozen_map(positions)),
        None if raw.get("zone") is None else str(raw["zone"]),
        None if capacity is None else int(str(capacity)),
        int(str(tier)) if kind == "lustre" and tier is not None else None,
        None if usage is None else int(str(usage)),
        _price(raw.get("price")), _positive(raw.get("expect_throughput")))


def _positive(value: object) -> float | None:
    """A number the schema accepted (> 0), or None."""
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) \
        and value > 0 else None


def _price(value: object) -> tuple[float, str] | None:
    if not isinstance(value, Mapping):
        return None
    return float(str(value["per_gb_month"])), str(value["source"])


def _names(value: object) -> tuple[str, ...]:
    return tuple(str(v) for v in value) if isinstance(value, list) else ()


def _lustre_size(ctx: Ctx, base: KeyPath, backend: str, name: str, tier: object,
                 capacity: object) -> bool:
    """The throughput tier and size of a Lustre filesystem are ones the service offers."""
    t = traits_of(backend)
    tier = int(str(tier)) if tier is not None else t.default_lustre_throughput
    tiers = t.lustre_tiers
    if tier not in tiers:
        ctx.error((*base, "throughput"), f"{backend} Lustre has no {tier} MB/s per TiB "
                  "tier", V011, hint="pick one of " + ", ".join(map(str, tiers)))
        return False
    spec = tiers[tier]
    if capacity is None:
        ctx.error(base, f"filesystem '{name}' has no capacity_gib", V010,
                  hint=f"set capacity_gib: {spec.first()[0]} (the smallest at this tier)")
        return False
    gib = int(str(capacity))
    if not spec.valid(gib):
        ctx.error((*base, "capacity_gib"), f"{capacity} GiB is not a size {backend} "
                  f"Lustre offers at {tier} MB/s per TiB", V003, hint=_size_hint(spec, gib))
        return False
    if not spec.hard_max and spec.largest is not None and gib > spec.largest:
        ctx.error((*base, "capacity_gib"), f"{capacity} GiB is above the "
                  f"{spec.largest // _TIB} TiB {backend} Lustre offers at {tier} MB/s per "
                  "TiB without a support request", V009,
                  hint="ask the cloud to raise the limit before `gpufleet up`, or stay "
                  f"at {spec.largest:,} GiB", severity=Severity.WARNING)
    return True


def _nfs_size(ctx: Ctx, base: KeyPath, backend: str, name: str, capacity: object) -> bool:
    """An NFS filesystem's size is within the service's bounds and steps."""
    sizes = traits_of(backend).nfs_sizes
    if sizes is None:  # elastic
        return True
    if capacity is None:
        ctx.error(base, f"filesystem '{name}' has no capacity_gib", V010,
                  hint=f"set capacity_gib: {sizes.smallest} or more")
        return False
    gib = int(str(capacity))
    if not sizes.smallest <= gib <= sizes.largest:
        ctx.error((*base, "capacity_gib"), f"{capacity} GiB is outside what {backend} "
                  f"NFS offers ({sizes.smallest:,} to {sizes.largest:,} GiB)", V003,
                  hint=f"pick a size from {sizes.smallest:,} to {sizes.largest:,} GiB")
        return False
    step = sizes.step(gib)
    if gib % step:
        ctx.error((*base, "capacity_gib"), f"{capacity} GiB is not a {sizes.service} "
                  f"size: it grows in {step:,} GiB steps in this range", V003,
                  hint=f"use {gib // step * step:,} or {(gib // step + 1) * step:,} GiB")
        return False
    return True
