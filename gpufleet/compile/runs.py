"""What the Pulumi layer is handed and what it gives back, for the offline runs the pipeline
(``gpufleet.review.pipeline``) sequences: one value for a run's inputs, the resources a run
of the stack program registered, and what the policy pack found. Pure: the Pulumi layer
imports these; the core never imports the Pulumi layer, it is handed its two functions."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from gpufleet.compile.compiler import Compiled
from gpufleet.input import Lock, SyncedGateway
from gpufleet.offers import Catalog

Progress = Callable[[str], None]


@dataclass(frozen=True)
class RunInputs:
    """One run's inputs, beside the parsed files: the files named on the command line, the
    profile, the catalog (and the folder it came from, which the stack config records), the
    lock, the stack and what its config holds (the gateways' addresses, the SSH key)."""

    paths: tuple[str, ...]
    catalog: Catalog | None = None  # what compiles; a run of compiled plans needs none
    profile: str | None = None
    catalog_dir: str | None = None
    stack: str = "dev"
    lock: Lock | None = None
    locked: bool = False
    synced: Mapping[str, SyncedGateway] = field(default_factory=dict)
    ssh_public_key: str | None = None  # the stack config's, where it is known


@dataclass(frozen=True)
class Registered:
    """What one run of the stack program registered: each resource as JSON (sorted by URN),
    the invokes it made, the stack's exports."""

    resources: tuple[dict[str, Any], ...]
    invokes: tuple[tuple[str, dict[str, Any]], ...] = ()
    exports: Mapping[str, Any] = field(default_factory=dict)


class ProgramRun(Protocol):
    """The stack program under the mock monitor, on the compiled plans."""

    def __call__(self, run: RunInputs, compiled: Compiled,
                 progress: Progress | None = None) -> Registered: ...


class SeededRun(Protocol):
    """The stack program as a preview over a stack's state: ``seed`` holds each resource's
    id and outputs by URN. A ``RunRefused`` when the program cannot use what the state
    records."""

    def __call__(self, run: RunInputs, compiled: Compiled,
                 seed: Mapping[str, tuple[str, Mapping[str, Any]]],
                 project: str) -> tuple[dict[str, Any], ...]: ...


class RunRefused(Exception):
    """The stack program failed on the values it was given; the message says what."""


@dataclass(frozen=True)
class PolicySubject:
    """One resource as the policy pack checks it: its JSON, the fleet or gateway owning it,
    where that is declared, and the pack config it is checked with."""

    resource: Mapping[str, Any]
    owner: str | None
    where: str
    config: Mapping[str, Any]


@dataclass(frozen=True)
class Finding:
    """One rule's message about ``subject`` (its index among the subjects)."""

    subject: int
    rule: str
    level: str
    message: str
    remediation: str


class PolicyRun(Protocol):
    """Every rule of the policy pack (at ``levels``, a rule's own level where absent) over
    the subjects."""

    def __call__(self, subjects: Sequence[PolicySubject],
                 levels: Mapping[str, str]) -> list[Finding]: ...
