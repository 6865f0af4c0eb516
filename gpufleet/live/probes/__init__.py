"""Readers of the clouds' APIs for `gpufleet preflight`, one per backend. Their SDKs come
with the `live` extra and are imported only when a probe is built."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from gpufleet.live.preflight import MissingAccess, Probe


def default_probes(backends: Iterable[str]) -> dict[str, Probe]:
    """A probe per backend in use, over the default credentials of each cloud; raises
    MissingAccess naming what is missing."""
    from gpufleet.live.probes.aws import AwsProbe, boto3_client
    from gpufleet.live.probes.azure import AzureProbe, azure_get
    from gpufleet.live.probes.gcp import GcpProbe, google_get

    probes: dict[str, Probe] = {}
    missing: list[str] = []
    for backend in sorted(set(backends)):
        try:
            if backend == "aws":
                probes[backend] = AwsProbe(boto3_client())
            elif backend == "gcp":
                get, project = google_get()
                probes[backend] = GcpProbe(get, project)
            elif backend == "azure":
                probes[backend] = AzureProbe(azure_get())
        except MissingAccess as e:
            missing.append(str(e))
    if missing:  # every cloud that cannot be asked, at once
        raise MissingAccess("; ".join(missing))
    return probes


def azure_scale_set_nics(vmss_ids: Sequence[str]) -> dict[str, Any]:
    """Each scale set's instance NICs, read with the default Azure credentials."""
    from gpufleet.live.probes.azure import azure_get, scale_set_nics

    get = azure_get()
    return {vmss_id: scale_set_nics(get, vmss_id) for vmss_id in vmss_ids}


def azure_scale_sets() -> Any:
    """The scale-set API (instances, redeploy) over the default Azure credentials."""
    from gpufleet.live.probes.azure import ScaleSetApi, azure_session

    return ScaleSetApi(azure_session())
