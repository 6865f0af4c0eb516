"""The typed registry of backend component modules, derived from ``gpufleet.backends``:
backend name -> a loader returning the package ``components/<backend>/``, which provides
``provider``, ``emit``, ``emit_gateway`` and ``emit_volume``. A module loads on first
use; a failing import is an error, never a silently missing backend."""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping, Sequence
from types import MappingProxyType
from typing import Any, Protocol

import pulumi

from gpufleet.backends import BACKENDS, component_package
from gpufleet.compile import FleetPlan, GatewayPlan, ProviderPlan, VolumePlan


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
    """What the stack outputs read from a gateway component: the network dstack's gateway
    lands in, and the addresses kept from gpufleet's own gateway VMs (a migration)."""

    @property
    def network_id(self) -> Any: ...
    @property
    def network_name(self) -> Any: ...
    @property
    def subnet_ids(self) -> Mapping[str, Any]: ...
    @property
    def old_addresses(self) -> Sequence[Any]: ...


class BackendComponents(Protocol):
    """One backend's component module."""

    def provider(self, p: ProviderPlan) -> pulumi.ProviderResource | None:
        """The plan's provider resource; None where the backend has none (a dynamic
        provider is the program's own code)."""
        ...

    def emit(self, plan: FleetPlan, prov: pulumi.ProviderResource | None,
             hosted: dict[str, Any]) -> FleetResources:
        """``hosted``: what fleets built so far share with others: the filesystems other
        fleets mount (by name), and each fleet's main network (by ``network_key``); a fleet
        adds what it holds and reads what it uses from another fleet."""
        ...

    def emit_gateway(self, plan: GatewayPlan, prov: pulumi.ProviderResource | None,
                     fleets: Mapping[str, Any] | None = None) -> GatewayResources:
        """``fleets``: the fleet components built so far, by name (a gateway that shares a
        fleet's network takes it from there)."""
        ...

    def emit_volume(self, plan: VolumePlan, opts: pulumi.ResourceOptions
                    ) -> pulumi.Output[str]:
        """A new volume's disk; its id (what dstack's `volume_id` takes)."""
        ...


def network_key(fleet: str) -> str:
    """Where a fleet's main network component is kept in ``hosted``, for fleets (and
    gateways) that join it."""
    return f"network:{fleet}"


def _loader(backend: str) -> Callable[[], BackendComponents]:
    def load() -> BackendComponents:
        module: BackendComponents = importlib.import_module(component_package(backend))
        return module
    return load


# One loader per backend of the registry (gpufleet.backends): the package of the same name.
COMPONENTS_BY_NAME: Mapping[str, Callable[[], BackendComponents]] = MappingProxyType(
    {t.name: _loader(t.name) for t in BACKENDS})


def components_for(backend: str) -> BackendComponents:
    return COMPONENTS_BY_NAME[backend]()
