"""What preflight learns of the clouds: the facts the probes return and the checks made of
them (``gpufleet.live.preflight`` makes the verdicts). Pure."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from gpufleet.live.runner import LiveError

Verdict = Literal["ok", "fail", "skip"]
LIVE_EXTRA = "pip install 'gpufleet[live]'"


class MissingAccess(LiveError):
    """A cloud cannot be asked: its SDK is not installed or no credentials were found."""


class ProbeError(LiveError):
    """A cloud answered with an error a check cannot read past (access denied, throttled)."""


@dataclass(frozen=True, slots=True)
class Need:
    """What one fleet asks of its cloud."""

    fleet: str
    backend: str
    scope: str | None  # GCP project, Azure subscription
    region: str
    zone: str | None
    instance_type: str
    gpu: str | None  # "H100", None for CPU-only
    gpu_memory_gib: float | None
    gpus_per_node: int
    cpus_per_node: int
    spot: bool
    nodes: int  # the plan's nodes
    running: int  # nodes the stack runs now (they hold their place already)
    reservation: str | None = None  # what the instances target (cr-..., name, group id)
    reservation_kind: str | None = None  # from the backends file's declaration
    resource_group: str | None = None
    # the sources the plan lets reach SSH (its ssh_cidrs), for a cloud whose account-wide
    # rules could admit more (Lambda's global firewall ruleset)
    ssh_sources: tuple[str, ...] = ()

    @property
    def new(self) -> int:
        return max(self.nodes - self.running, 0)


@dataclass(frozen=True, slots=True)
class ReservationFacts:
    """A reservation as the cloud reports it."""

    id: str
    active: bool
    state: str
    zone: str | None
    instance_type: str
    total: int
    free: int
    ends: str | None = None


@dataclass(frozen=True, slots=True)
class QuotaKey:
    """One quota the nodes count against: ``per_node`` units each."""

    name: str  # "L-417A185B (Running On-Demand P instances)", "NVIDIA_H100_GPUS", ...
    region: str  # the region, or "global"
    unit: str  # "vCPUs", "GPUs"
    per_node: int


@dataclass(frozen=True, slots=True)
class QuotaFacts:
    """A quota's limit and use; NaN where the cloud's API does not give it (``note`` says
    where to look instead)."""

    limit: float
    used: float
    note: str = ""


@dataclass(frozen=True, slots=True)
class Check:
    fleet: str  # a fleet, or several joined by ", " for a shared reservation or quota
    what: str  # "offered", "reservation", "quota"
    verdict: Verdict
    detail: str
