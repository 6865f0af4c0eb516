"""The typed registry of backend component modules: backend name -> the package registered
for it in the ``gpufleet.components`` entry-point group (gpufleet's own: ``components/<cloud>/``,
declared in pyproject.toml), which provides ``provider``, ``emit``, ``emit_gateway``,
``emit_volume`` and its ``offline`` answers. A package loads on first use; a backend with
none, a failing import or a package of the wrong shape is an error naming it, never a
silently missing backend."""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, Protocol, runtime_checkable

import pulumi

from gpufleet.backends.plugin import PluginError
from gpufleet.compile import FleetDesign, GatewayDesign, ProviderDesign, VolumeDesign

ENTRY_POINTS = "gpufleet.components"


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


# an invoke's offline answer: (args) -> result (each cloud's ``offline`` module, the runner)
Invoke = Callable[[dict[str, Any]], dict[str, Any]]


@runtime_checkable
class OfflineAnswers(Protocol):
    """A backend's answers for offline runs: its invokes' mocks and its types' outputs."""

    def invokes(self, dns_zones: Iterable[str]) -> dict[str, Invoke]: ...
    def outputs(self, typ: str, name: str, inputs: dict[str, Any]) -> dict[str, Any]: ...


@runtime_checkable
class BackendComponents(Protocol):
    """One backend's component module."""

    @property
    def offline(self) -> OfflineAnswers: ...

    def provider(self, p: ProviderDesign) -> pulumi.ProviderResource | None:
        """The plan's provider resource; None where the backend has none (a dynamic
        provider is the program's own code)."""
        ...

    def emit(self, plan: FleetDesign, prov: pulumi.ProviderResource | None,
             shared: dict[str, Any]) -> FleetResources:
        """``shared``: what fleets built so far share with others: the filesystems other
        fleets mount (by name), and each fleet's main network (by ``network_key``); a fleet
        adds what it holds and reads what it uses from another fleet."""
        ...

    def emit_gateway(self, plan: GatewayDesign, prov: pulumi.ProviderResource | None,
                     fleets: Mapping[str, Any] | None = None) -> GatewayResources:
        """``fleets``: the fleet components built so far, by name (a gateway that shares a
        fleet's network takes it from there)."""
        ...

    def emit_volume(self, plan: VolumeDesign, opts: pulumi.ResourceOptions
                    ) -> pulumi.Output[str]:
        """A new volume's disk; its id (what dstack's `volume_id` takes)."""
        ...


def network_key(fleet: str) -> str:
    """Where a fleet's main network component is kept in ``shared``, for fleets (and
    gateways) that join it."""
    return f"network:{fleet}"


@functools.cache
def _entries() -> dict[str, Any]:
    from gpufleet.backends.entrypoints import entry_points

    return {ep.name: ep for ep in entry_points(group=ENTRY_POINTS)}


@functools.cache
def components_for(backend: str) -> BackendComponents:
    """The backend's component package (loaded once)."""
    ep = _entries().get(backend)
    if ep is None:
        raise PluginError(f"backend {backend!r} has no Pulumi components: register its package "
                          f"in the {ENTRY_POINTS} entry-point group")
    module = ep.load()
    if not isinstance(module, BackendComponents) or \
            not isinstance(module.offline, OfflineAnswers):
        raise PluginError(f"the components of backend {backend!r} ({ep.value}) lack provider, "
                          "emit, emit_gateway, emit_volume or offline answers")
    return module


def registered() -> tuple[str, ...]:
    """The backends that registered components."""
    return tuple(_entries())
