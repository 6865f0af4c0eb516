"""The lock file's model (gpufleet.lock): each fleet's and gateway's chosen offer, the digest of
what chose it, and its address block."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from gpufleet.input.spec import Origin

Place = tuple[str, str, str | None, str, bool]


LOCK_FILE = "gpufleet.lock"


def offer_place(obj: Any) -> Place:
    """Backend, region, zone, instance type and spot of a lock entry, an offer or a plan:
    what decides whether `pulumi up` replaces nodes (gateways are never spot)."""
    return (obj.backend, obj.region, obj.zone, obj.instance_type, bool(getattr(obj, "spot",
                                                                              False)))


@dataclass(frozen=True, slots=True)
class LockEntry:
    """One locked offer of ``gpufleet.lock``: what was chosen, and for which requirements."""

    name: str
    requirements: str  # "sha256:<hex>" of the requirements the offer was chosen for
    backend: str
    region: str
    zone: str | None
    instance_type: str
    spot: bool
    price: float | None = None
    catalog: str = ""
    cpus: int = 0
    memory_gib: float = 0.0
    gpu_name: str | None = None
    gpu_count: int = 0
    gpu_memory_gib: float | None = None
    # The address block allocated to the fleet's networks (None in locks written before
    # blocks were recorded: `gpufleet lock` records them without moving anything).
    cidr: str | None = None
    origin: Origin | None = field(default=None, compare=False)
    # USD/h beside the instances when locked: (fixed, per node, price table); None in locks
    # written before overheads were recorded (`gpufleet lock` records them, moving nothing).
    overhead: tuple[float, float, str] | None = None
    reservation: str | None = None  # what the nodes consume (the cr-... id on AWS)

    def short(self) -> str:
        price = "price unknown" if self.price is None else f"${self.price:.2f}"
        return (f"{self.backend} {self.zone or self.region} {self.instance_type} "
                f"{'spot' if self.spot else 'on-demand'} {price}")

    def same_offer(self, other: Any) -> bool:
        """The same machine in the same place as ``other`` (an entry, offer or plan)."""
        return offer_place(self) == offer_place(other)


@dataclass(frozen=True, slots=True)
class Lock:
    """A parsed ``gpufleet.lock``; ``exists`` is False for a lock not written yet."""

    fleets: Mapping[str, LockEntry] = field(default_factory=dict)
    gateways: Mapping[str, LockEntry] = field(default_factory=dict)
    file: str = ""
    exists: bool = True
