"""dstack volume files -> the disks the stack creates. Pure.

A new volume is one zonal, encrypted disk (an EBS gp3 volume, a GCP balanced persistent
disk) of its size in its zone, protected from deletion; an existing one (`volume_id`) is
only handed to dstack. The disk types are dstack's own choices for its volumes."""

from __future__ import annotations

from collections.abc import Sequence

from gpufleet.backends import traits_of
from gpufleet.codes import V016, V017
from gpufleet.compile import naming
from gpufleet.compile.plan import ProviderPlan, VolumePlan
from gpufleet.diagnostics import Diagnostic
from gpufleet.input import BackendConfig, VolumeSpec


def plan_volumes(volumes: Sequence[VolumeSpec], backends: Sequence[BackendConfig]
                 ) -> tuple[list[VolumePlan], list[Diagnostic]]:
    out: list[VolumePlan] = []
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
        labels = t.labels({**dict(v.tags), "managed-by": "gpufleet", "gpufleet-volume": v.name})
        out.append(VolumePlan(
            name=v.name, file=v.origin.file, backend=v.backend,
            provider=ProviderPlan(v.backend, naming.provider(v.backend, scope, v.region),
                                  v.region, scope),
            region=v.region, zone=v.zone, size_gib=v.size_gib, disk_type=t.volume_disk_type or "",
            volume_id=v.volume_id, labels=labels))
    return out, diags
