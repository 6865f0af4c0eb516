"""dstack volume files -> the disks the stack creates. Pure.

A new volume is one zonal, encrypted disk (an EBS gp3 volume, a GCP balanced persistent
disk) of its size in its zone, protected from deletion; an existing one (`volume_id`) is
only handed to dstack. The disk types are dstack's own choices for its volumes.

A new volume without `availability_zone` (dstack's docs omit it: dstack picks a zone) is put
where a disk can be attached: the zone of the fleets of its backend and region when they sit
in exactly one, else the region's first zone by name; fleets in several zones make the
choice ambiguous (V022)."""

from __future__ import annotations

from collections.abc import Sequence

from gpufleet.backends import traits_of
from gpufleet.codes import V016, V017, V022
from gpufleet.compile import naming
from gpufleet.compile.design import FleetDesign, ProviderDesign, VolumeDesign
from gpufleet.diagnostics import Diagnostic
from gpufleet.input import BackendConfig, VolumeSpec
from gpufleet.offers import Catalog
from gpufleet.traits import ZoneModel


def pick_zone(v: VolumeSpec, fleets: Sequence[FleetDesign], catalog: Catalog
              ) -> tuple[str | None, str | None, Diagnostic | None]:
    """(zone, how it was chosen, or the refusal) for a new volume that names no zone."""
    here = [f for f in fleets if f.backend == v.backend and f.region == v.region]
    zones = sorted({f.zone for f in here if f.zone})
    if len(zones) == 1:
        names = ", ".join(f.name for f in here if f.zone)
        return zones[0], f"the zone of fleet(s) {names} in {v.region}", None
    if len(zones) > 1:
        return None, None, v.origin.at(
            "region", V022, f"volume '{v.name}' names no `availability_zone` and the "
            f"{v.backend} fleets in {v.region} sit in {', '.join(zones)}: a disk attaches "
            "only in its own zone", "set `availability_zone` to the zone of the fleet that "
            "mounts it")
    t = traits_of(v.backend)
    if t.zones is ZoneModel.PER_ZONE:
        known = sorted({r.location for r in catalog.rows if r.backend == v.backend
                        and r.location.startswith(f"{v.region}-")})
        first = known[0] if known else None
    else:
        first = f"{v.region}a"
    if first is None:
        return None, None, v.origin.at(
            "region", V022, f"volume '{v.name}' names no `availability_zone` and the catalog "
            f"knows no zone of {v.backend} {v.region}", "set `availability_zone`")
    why = (f"{', '.join(f.name for f in here)} take their zone at `pulumi up`, the first "
           "by name that offers their type" if here else
           f"no {v.backend} fleet of these files is in {v.region}")
    return first, f"the first zone of {v.region} by name ({why})", None


def design_volumes(volumes: Sequence[VolumeSpec], backends: Sequence[BackendConfig],
                 fleets: Sequence[FleetDesign] = (), catalog: Catalog | None = None
                 ) -> tuple[list[VolumeDesign], list[Diagnostic]]:
    out: list[VolumeDesign] = []
    diags: list[Diagnostic] = []
    seen: set[str] = set()
    for v in volumes:
        if v.name in seen:
            diags.append(v.origin.at("name", V016, f"volume '{v.name}' is declared twice",
                                     "give each volume file its own name"))
            continue
        seen.add(v.name)
        config = next((b for b in backends if b.type == v.backend), None)
        t = traits_of(v.backend)
        scope = config.get(t.scope_key) if config is not None and t.scope_key else None
        if v.zone is not None and not v.zone.startswith(v.region):
            diags.append(v.origin.at("availability_zone", V017, f"zone {v.zone} is not in "
                                     f"region {v.region}", f"pick a zone of {v.region}"))
            continue
        zone, note = v.zone, None
        if zone is None and v.volume_id is None and catalog is not None:
            zone, note, refusal = pick_zone(v, fleets, catalog)
            if refusal is not None:
                diags.append(refusal)
                continue
        labels = t.labels({**dict(v.tags), "managed-by": "gpufleet", "gpufleet-volume": v.name})
        out.append(VolumeDesign(
            name=v.name, file=v.origin.file, backend=v.backend,
            provider=ProviderDesign(v.backend, naming.provider(v.backend, scope, v.region),
                                    v.region, scope),
            region=v.region, zone=zone, size_gib=v.size_gib, disk_type=t.volume_disk_type or "",
            volume_id=v.volume_id, labels=labels,
            zone_note=f"{zone}: {note}; `availability_zone` chooses another" if note else None))
    return out, diags
