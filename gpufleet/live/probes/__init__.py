"""Readers of the clouds' APIs for `gpufleet preflight`, `topology`, `replace` and `gateway
check`: each backend plugin's live roles (``gpufleet.backends.role_of``), typed by the keys
below. Their SDKs come with the `live` extra and are imported only when a reader is built."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any, Protocol, runtime_checkable

from gpufleet.backends import is_backend, role_of, role_supported
from gpufleet.backends.plugin import RoleKey, RoleUnsupported
from gpufleet.live.preflight import MissingAccess, Probe, ScaleSetApi
from gpufleet.live.topology import TopologyReader, TopologyUnavailable


@runtime_checkable
class ProbeRole(Protocol):
    def probe(self) -> Probe:
        """A probe over the cloud's default credentials; MissingAccess naming what is
        missing."""
        ...


@runtime_checkable
class TopologyRole(Protocol):
    def topology_reader(self) -> TopologyReader: ...


@runtime_checkable
class ScaleSetRole(Protocol):
    def scale_set_api(self) -> ScaleSetApi: ...
    def scale_sets_nics(self, vmss_ids: Sequence[str]) -> dict[str, Any]: ...


GatewayCheck = Any  # (scope, address) -> ("ok" | "blocked" | "unknown", detail)


@runtime_checkable
class GatewayCheckRole(Protocol):
    def gateway_check(self, scope: str | None, address: str) -> tuple[str, str]: ...


PROBE: RoleKey[ProbeRole] = RoleKey("probe", ProbeRole)  # type: ignore[type-abstract]
TOPOLOGY: RoleKey[TopologyRole] = RoleKey("topology", TopologyRole)  # type: ignore[type-abstract]
SCALE_SETS: RoleKey[ScaleSetRole] = RoleKey("scale_sets", ScaleSetRole)  # type: ignore[type-abstract]
GATEWAY_CHECK: RoleKey[GatewayCheckRole] = RoleKey(
    "gateway_check", GatewayCheckRole)  # type: ignore[type-abstract]


def default_probes(backends: Iterable[str]) -> dict[str, Probe]:
    """A probe per backend in use, over the default credentials of each cloud; raises
    MissingAccess naming what is missing."""
    probes: dict[str, Probe] = {}
    missing: list[str] = []
    for backend in sorted(set(backends)):
        if not is_backend(backend):
            continue
        try:
            probes[backend] = role_of(backend, PROBE).probe()
        except MissingAccess as e:
            missing.append(str(e))
    if missing:  # every cloud that cannot be asked, at once
        raise MissingAccess("; ".join(missing))
    return probes


def scale_set_nics(backend: str, vmss_ids: Sequence[str]) -> dict[str, Any]:
    """Each scale set's instance NICs, read with the backend's default credentials."""
    return role_of(backend, SCALE_SETS).scale_sets_nics(vmss_ids)


def scale_set_api(backend: str) -> ScaleSetApi:
    """The backend's scale-set API (instances, redeploy) over its default credentials."""
    return role_of(backend, SCALE_SETS).scale_set_api()


def topology_reader(backend: str) -> TopologyReader:
    """The backend's topology reader over its default credentials (`gpufleet topology`);
    TopologyUnavailable names why a cloud has none."""
    try:
        return role_of(backend, TOPOLOGY).topology_reader()
    except RoleUnsupported as e:
        raise TopologyUnavailable(str(e)) from None


def gateway_check(backend: str) -> GatewayCheck | None:
    """The backend's check of the VM dstack runs a gateway on (Azure: the security group its
    NIC has), over its default credentials; None when the backend has none."""
    if not is_backend(backend) or not role_supported(backend, GATEWAY_CHECK):
        return None
    return role_of(backend, GATEWAY_CHECK).gateway_check
