"""A cloud as one plugin: its traits (data every stage reads) and, for every role a stage asks
of a cloud, either where its code is or why the cloud has none. Pure; imports no stage.

A plugin object is registered in the ``gpufleet.backends`` entry-point group (gpufleet's own
clouds in its pyproject.toml, another package's in its own); each role is a loader, called on
first use, so a command loads only the code of the roles it asks for. A stage asks through
``gpufleet.backends.role_of(backend, KEY)`` with a ``RoleKey`` it owns: the key names the role
and the Protocol the loaded object must satisfy, so the answer is typed and a plugin that
lacks a role fails by name at load, not deep inside a command.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Generic, TypeVar

from gpufleet.traits import BackendTraits

# Every role a stage asks of a cloud. A plugin declares each: a loader, or Unsupported.
ROLES: tuple[str, ...] = (
    "input",          # the backends-file rules its schema cannot state (input stage)
    "compile",        # the planner: fleet + offer -> the plan the components build
    "probe",          # preflight: quotas, capacity, reservations, images (live)
    "topology",       # where the nodes sit in the cloud's network (live)
    "scale_sets",     # a scale set's instances and their redeploy (live)
    "gateway_check",  # the VM dstack runs a gateway on admits 80/443 (live)
    "handoff",        # dstack's backend entry for the fleet's networks (handoff)
)

R = TypeVar("R")


class PluginError(Exception):
    """A plugin that cannot be used: not registered, a role missing, or of the wrong shape."""


@dataclass(frozen=True)
class Unsupported:
    """A role the cloud does not have, and why (said to the user who asks for it)."""

    reason: str


@dataclass(frozen=True)
class Plugin:
    """One cloud: its traits, and each role's loader (or why it has none)."""

    traits: BackendTraits
    roles: Mapping[str, Callable[[], object] | Unsupported] = field(default_factory=dict)

    def undeclared(self) -> list[str]:
        """The roles the plugin says nothing about (a registered plugin has none)."""
        return [r for r in ROLES if r not in self.roles]


@dataclass(frozen=True)
class RoleKey(Generic[R]):
    """A role as a stage asks for it: its name (one of ROLES) and the Protocol (runtime
    checkable) the loaded object satisfies."""

    name: str
    kind: type[R]

    def __post_init__(self) -> None:
        if self.name not in ROLES:
            raise PluginError(f"unknown role {self.name!r}; roles: {', '.join(ROLES)}")


class RoleUnsupported(PluginError):
    """The cloud declares the role unsupported; the message is its reason."""
