"""dstack volume files (`type: volume`) -> VolumeSpec. Pure.

dstack 0.22.5's volume models (core/models/volumes.py) take aws and gcp among gpufleet's
backends (azure has none). gpufleet's own rules: a `name` (the disk's resource name derives
from it) and, for a new volume, `availability_zone` (the disk is built there by Pulumi, not
placed later by dstack)."""

from __future__ import annotations

from gpufleet.backends import all_backends
from gpufleet.codes import V001, V002, V015
from gpufleet.diagnostics import Diagnostic
from gpufleet.input.checks.context import Ctx
from gpufleet.input.normalize import SpecError, parse_memory
from gpufleet.input.schema import Checked
from gpufleet.input.spec import Origin, VolumeSpec

# dstack 0.22.5's volume backends (gpufleet builds on those with a volume disk type)
DSTACK_VOLUME_BACKENDS = ("aws", "gcp", "runpod", "kubernetes", "daytona", "lium")


def check_volume(c: Checked) -> tuple[VolumeSpec | None, list[Diagnostic]]:
    ctx = Ctx(c)
    d = ctx.data()
    if not c.ok(()):
        return None, ctx.diags
    backend = str(d.get("backend"))
    volume_backends = tuple(t.name for t in all_backends() if t.volume_disk_type)
    if backend not in volume_backends:
        if backend in DSTACK_VOLUME_BACKENDS:
            ctx.error(("backend",), f"gpufleet builds volumes on {' and '.join(volume_backends)}"
                      f", not {backend}", V001, hint="let dstack manage this volume")
        else:
            ctx.error(("backend",), f"dstack 0.22.5 has no {backend} volumes (its volume "
                      f"backends: {', '.join(DSTACK_VOLUME_BACKENDS)})", V001,
                      hint="on azure, mount a filesystem on the hosts and pass it to runs as "
                           "an instance volume")
        return None, ctx.diags
    if "name" not in d:
        ctx.error((), "volume has no `name`; gpufleet derives the disk's resource name from it",
                  V002, key=True, hint="add `name: <lower-case name>`")
        return None, ctx.diags
    if "region" not in d:
        ctx.error((), f"a {backend} volume needs `region` (dstack: Field required)", V002,
                  key=True, hint="add `region: <the fleets' region>`")
        return None, ctx.diags
    volume_id = d.get("volume_id")
    size: float | None = None
    if volume_id is None:
        if "size" not in d:
            ctx.error((), "a new volume needs `size` (dstack: \"must be specified when creating "
                      "new volumes\"); or name an existing one with `volume_id`", V002,
                      key=True, hint="add `size: 100GB`")
            return None, ctx.diags
        try:
            size = parse_memory(d["size"])
        except SpecError as e:
            ctx.error(("size",), f"`size`: {e}", V015, hint="write it like 100GB or 1TB")
            return None, ctx.diags
        if size < 1:
            ctx.error(("size",), "a volume holds at least 1GB", V015, hint="write 1GB or more")
            return None, ctx.diags
    line, col = c.doc.source.key(())
    return VolumeSpec(
        str(d["name"]), backend, str(d["region"]),
        str(d["availability_zone"]) if "availability_zone" in d else None,
        None if size is None else int(-(-size // 1)), None if volume_id is None
        else str(volume_id), dict(d.get("tags") or {}),
        Origin(c.doc.file, line, col, c.doc.index)), ctx.diags
