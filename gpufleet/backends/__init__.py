"""The one registry of the backends gpufleet builds. Pure.

Each backend is a folder ``gpufleet/backends/<cloud>/``: its ``__init__`` declares its
:class:`~gpufleet.traits.BackendTraits` (capabilities and tables), and role modules named
after the stage that loads them hold its code (``compile`` its planner, ``live`` its probe,
``handoff`` its dstack backend entry). Everything else - the schema enum, the offer filter,
the planners, the probes, the components, the bill, the export - derives from ``BACKENDS``
below and asks the traits, never a backend's name.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

from gpufleet.backends import aws, azure, gcp, lambda_
from gpufleet.traits import BackendTraits, Feature, ResourceKind

# The backends gpufleet builds, in the order messages list them.
BACKENDS: tuple[BackendTraits, ...] = (aws.TRAITS, gcp.TRAITS, azure.TRAITS, lambda_.TRAITS)

TRAITS_BY_NAME: Mapping[str, BackendTraits] = MappingProxyType({t.name: t for t in BACKENDS})
SUPPORTED_BACKENDS: tuple[str, ...] = tuple(t.name for t in BACKENDS)


def traits_of(backend: str) -> BackendTraits:
    """The traits of a backend gpufleet builds (a KeyError names an unknown one)."""
    return TRAITS_BY_NAME[backend]


def role_module(backend: str, stage: str) -> str:
    """The module of a backend's code for one stage (``gpufleet.backends.aws.compile``)."""
    return f"{__name__}.{traits_of(backend).folder}.{stage}"


def component_package(backend: str) -> str:
    """The package of a backend's Pulumi components (``gpufleet.components.aws``)."""
    return f"gpufleet.components.{traits_of(backend).folder}"


def backend_of_type(token: str) -> str | None:
    """The backend whose Pulumi package (or dynamic provider module) prefixes a resource type
    or invoke token: `aws:ec2/instance:Instance`, `pulumi-python:dynamic/lambda:Instance`."""
    return next((t.name for t in BACKENDS if t.pulumi_package
                 and token.startswith(t.pulumi_package + ":")), None)


def supports(backend: str, feature: Feature) -> bool:
    """Whether gpufleet can build ``feature`` on ``backend`` (False for unknown backends)."""
    found = TRAITS_BY_NAME.get(backend)
    return found is not None and found.supports(feature)


def backends_with(feature: Feature) -> tuple[str, ...]:
    return tuple(t.name for t in BACKENDS if t.supports(feature))


def node_types() -> tuple[str, ...]:
    """Pulumi types of fleet nodes on every backend."""
    return tuple(n for t in BACKENDS for n in t.node_types)


def resource_kinds() -> dict[str, ResourceKind]:
    """Every resource type of every backend, with its replacing inputs and category."""
    return {n: k for t in BACKENDS for n, k in t.resources.items()}
