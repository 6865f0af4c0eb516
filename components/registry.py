"""The typed registry of backend component modules: backend name -> a loader returning the
module, which provides ``provider``, ``emit`` and ``emit_gateway``. A module loads on first
use; a failing import is an error, never a silently missing backend."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from types import MappingProxyType
from typing import Any, Protocol

import pulumi

from gpufleet.compile import FleetPlan, GatewayPlan, ProviderPlan


class FleetResources(Protocol):
    """What the stack outputs read from a fleet component."""

    @property
    def internal_ips(self) -> Sequence[Any]: ...
    @property
    def public_ips(self) -> Sequence[Any]: ...
    @property
    def bastion_address(self) -> Any: ...
    @property
    def network_ids(self) -> Mapping[str, Any]: ...
    @property
    def network_names(self) -> Mapping[str, Any]: ...
    @property
    def subnet_ids(self) -> Mapping[str, Any]: ...


class GatewayResources(Protocol):
    @property
    def addresses(self) -> Sequence[Any]: ...


class BackendComponents(Protocol):
    """One backend's component module."""

    def provider(self, p: ProviderPlan) -> pulumi.ProviderResource: ...

    def emit(self, plan: FleetPlan, prov: pulumi.ProviderResource,
             hosted: dict[str, Any]) -> FleetResources:
        """``hosted``: the filesystems built so far that other fleets mount (by name); a
        fleet adds the ones it holds and reads the ones it mounts from another fleet."""
        ...

    def emit_gateway(self, plan: GatewayPlan, prov: pulumi.ProviderResource
                     ) -> GatewayResources: ...


def _aws() -> BackendComponents:
    from . import aws
    return aws


def _gcp() -> BackendComponents:
    from . import gcp
    return gcp


def _azure() -> BackendComponents:
    from . import azure
    return azure


COMPONENTS_BY_NAME: Mapping[str, Callable[[], BackendComponents]] = MappingProxyType(
    {"aws": _aws, "gcp": _gcp, "azure": _azure})


def components_for(backend: str) -> BackendComponents:
    return COMPONENTS_BY_NAME[backend]()
