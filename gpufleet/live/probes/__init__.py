"""Readers of the clouds' APIs for `gpufleet preflight`: each backend's ``live`` module
(``gpufleet/backends/<cloud>/live.py``) builds its probe. Their SDKs come with the `live` extra
and are imported only when a probe is built."""

from __future__ import annotations

import importlib
from collections.abc import Iterable, Sequence
from typing import Any

from gpufleet.backends import TRAITS_BY_NAME, role_module
from gpufleet.live.preflight import MissingAccess, Probe, ScaleSetApi
from gpufleet.live.topology import TopologyReader


def default_probes(backends: Iterable[str]) -> dict[str, Probe]:
    """A probe per backend in use, over the default credentials of each cloud; raises
    MissingAccess naming what is missing."""
    probes: dict[str, Probe] = {}
    missing: list[str] = []
    for backend in sorted(set(backends)):
        if backend not in TRAITS_BY_NAME:
            continue
        module = importlib.import_module(role_module(backend, "live"))
        try:
            probes[backend] = module.probe()
        except MissingAccess as e:
            missing.append(str(e))
    if missing:  # every cloud that cannot be asked, at once
        raise MissingAccess("; ".join(missing))
    return probes


def scale_set_nics(backend: str, vmss_ids: Sequence[str]) -> dict[str, Any]:
    """Each scale set's instance NICs, read with the backend's default credentials."""
    nics: dict[str, Any] = importlib.import_module(
        role_module(backend, "live")).scale_sets_nics(vmss_ids)
    return nics


def scale_set_api(backend: str) -> ScaleSetApi:
    """The backend's scale-set API (instances, redeploy) over its default credentials."""
    api: ScaleSetApi = importlib.import_module(role_module(backend, "live")).scale_set_api()
    return api


def topology_reader(backend: str) -> TopologyReader:
    """The backend's topology reader over its default credentials (`gpufleet topology`);
    TopologyUnavailable names why a cloud has none."""
    reader: TopologyReader = importlib.import_module(
        role_module(backend, "live")).topology_reader()
    return reader


GatewayCheck = Any  # (scope, address) -> ("ok" | "blocked" | "unknown", detail)


def gateway_check(backend: str) -> GatewayCheck | None:
    """The backend's check of the VM dstack runs a gateway on (Azure: the security group its
    NIC has), over its default credentials; None when the backend has none."""
    if backend not in TRAITS_BY_NAME:
        return None
    return getattr(importlib.import_module(role_module(backend, "live")), "gateway_check", None)
