"""The one registry of the backends gpufleet builds. Pure.

Each backend is a plugin (``gpufleet.backends.plugin``): its traits - capabilities and tables,
declared by ``gpufleet/backends/<cloud>/__init__``, the data every stage reads - and its roles,
each loaded on first use from the stage's own code (``compile`` its planner, ``live`` its
probe, ``handoff`` its dstack backend entry) or declared unsupported with the reason. Plugins
register in the ``gpufleet.backends`` entry-point group: gpufleet's own four in its
pyproject.toml, another package's in its own. Everything else - the schema enums, the offer
filter, the planners, the probes, the components, the bill, the export - derives from this
registry and asks the traits, never a backend's name.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from types import MappingProxyType
from typing import TYPE_CHECKING, TypeVar

from gpufleet.backends import aws, azure, gcp, lambda_
from gpufleet.traits import AccessWay, BackendTraits, Feature, OwnFeature, ResourceKind

if TYPE_CHECKING:  # the plugin machinery loads with the first plugin asked for
    from gpufleet.backends.plugin import Plugin, RoleKey

ENTRY_POINTS = "gpufleet.backends"  # the entry-point group plugins register in

# gpufleet's own backends, in the order messages list them (their traits need no loading).
BACKENDS: tuple[BackendTraits, ...] = (aws.TRAITS, gcp.TRAITS, azure.TRAITS, lambda_.TRAITS)

TRAITS_BY_NAME: Mapping[str, BackendTraits] = MappingProxyType({t.name: t for t in BACKENDS})
SUPPORTED_BACKENDS: tuple[str, ...] = tuple(t.name for t in BACKENDS)

R = TypeVar("R")


@functools.cache
def plugins() -> Mapping[str, Plugin]:
    """Every registered plugin by backend name, gpufleet's own first (loaded once). A
    plugin of the wrong shape, one that leaves a role undeclared, a second plugin of one
    name, or one of gpufleet's own missing (an install older than its entry points) is a
    PluginError naming it."""
    from gpufleet.backends.entrypoints import entry_points
    from gpufleet.backends.plugin import Plugin, PluginError

    found: dict[str, Plugin] = {}
    for ep in entry_points(group=ENTRY_POINTS):
        try:
            plugin = ep.load()
        except Exception as e:  # a broken plugin package: say which, never a traceback
            raise PluginError(f"the gpufleet plugin {ep.name!r} ({ep.value}) does not load: "
                              f"{type(e).__name__}: {e}") from None
        if not isinstance(plugin, Plugin) or plugin.traits.name != ep.name:
            raise PluginError(f"the entry point {ep.name!r} ({ep.value}) of group "
                              f"{ENTRY_POINTS} is not the Plugin of backend {ep.name!r}")
        if plugin.undeclared():
            raise PluginError(f"the gpufleet plugin {ep.name!r} declares nothing for role(s) "
                              f"{', '.join(plugin.undeclared())}: give a loader or "
                              "Unsupported(reason) for each")
        if ep.name in found:
            raise PluginError(f"two gpufleet plugins are named {ep.name!r}")
        found[ep.name] = plugin
    missing = [t.name for t in BACKENDS if t.name not in found]
    if missing:
        raise PluginError(f"gpufleet's own backend(s) {', '.join(missing)} are not registered "
                          "(an install older than its entry points): install gpufleet again "
                          "(`pip install -e .`, or `make venv`)")
    own = {t.name: found.pop(t.name) for t in BACKENDS}
    return MappingProxyType({**own, **found})


def all_backends() -> tuple[BackendTraits, ...]:
    """gpufleet's own backends and then every other registered plugin's."""
    return (*BACKENDS, *(p.traits for n, p in plugins().items() if n not in TRAITS_BY_NAME))


def backend_names() -> tuple[str, ...]:
    """The names of every registered backend, gpufleet's own first."""
    return tuple(t.name for t in all_backends())


def is_backend(backend: object) -> bool:
    """Whether some plugin builds ``backend`` (gpufleet's own need no loading)."""
    return isinstance(backend, str) and find(backend) is not None


def traits_of(backend: str) -> BackendTraits:
    """The traits of a backend gpufleet builds (a KeyError names an unknown one)."""
    found = find(backend)
    if found is None:
        raise KeyError(backend)
    return found


def find(backend: str) -> BackendTraits | None:
    """The traits of ``backend``, None when no plugin builds it (gpufleet's own backends
    are found without loading the plugins)."""
    found = TRAITS_BY_NAME.get(backend)
    if found is None and isinstance(backend, str):
        plugin = plugins().get(backend)
        found = plugin.traits if plugin is not None else None
    return found


_loaded: dict[tuple[str, str], object] = {}


def role_of(backend: str, key: RoleKey[R]) -> R:
    """The backend's code for one role, typed by the stage's key (loaded once). A
    RoleUnsupported carries the plugin's reason; a PluginError names a loaded object that
    is not what the role's Protocol asks for."""
    from gpufleet.backends.plugin import PluginError, RoleUnsupported, Unsupported

    done = _loaded.get((backend, key.name))
    if done is None:
        declared = plugins()[backend].roles[key.name]
        if isinstance(declared, Unsupported):
            raise RoleUnsupported(declared.reason)
        done = declared()
        if not isinstance(done, key.kind):
            raise PluginError(f"backend {backend!r}: its {key.name} role is not a "
                              f"{key.kind.__name__}")
        _loaded[(backend, key.name)] = done
    assert isinstance(done, key.kind)
    return done


def role_supported(backend: str, key: RoleKey[R]) -> bool:
    from gpufleet.backends.plugin import Unsupported

    return not isinstance(plugins()[backend].roles[key.name], Unsupported)


def backend_of_type(token: str) -> str | None:
    """The backend whose Pulumi package (or dynamic provider module) prefixes a resource type
    or invoke token: `aws:ec2/instance:Instance`, `pulumi-python:dynamic/lambda:Instance`."""
    return next((t.name for t in all_backends() if t.pulumi_package
                 and token.startswith(t.pulumi_package + ":")), None)


def supports(backend: str, feature: Feature) -> bool:
    """Whether gpufleet can build ``feature`` on ``backend`` (False for unknown backends)."""
    found = find(backend)
    return found is not None and found.supports(feature)


def backends_with(feature: Feature) -> tuple[str, ...]:
    return tuple(t.name for t in all_backends() if t.supports(feature))


def owns(backend: str, key: str, where: str = "access") -> bool:
    """Whether ``backend`` has the cloud-only capability ``key`` (traits.OwnFeature)."""
    found = find(backend)
    return found is not None and found.owns(key, where)


def owners(key: str, where: str = "access") -> tuple[str, ...]:
    """The backends that have the cloud-only capability ``key``; () when none does."""
    return tuple(t.name for t in all_backends() if t.owns(key, where))


def own_features() -> tuple[OwnFeature, ...]:
    """Every backend's cloud-only capabilities, the first owner's declaration of each."""
    seen: dict[tuple[str, str], OwnFeature] = {}
    for t in all_backends():
        for f in t.own_features:
            seen.setdefault((f.key, f.where), f)
    return tuple(seen.values())


def access_way(method: str | None) -> AccessWay | None:
    """The cloud service an access method names (iap, ssm, ...); None for gpufleet's own
    (public, bastion, none)."""
    return next((f.way for f in own_features() if f.key == method and f.way is not None),
                None)


def node_types() -> tuple[str, ...]:
    """Pulumi types of fleet nodes on every backend."""
    return tuple(n for t in all_backends() for n in t.node_types)


def resource_kinds() -> dict[str, ResourceKind]:
    """Every resource type of every backend, with its replacing inputs and category."""
    return {n: k for t in all_backends() for n, k in t.resources.items()}
