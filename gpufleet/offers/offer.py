"""An offer (one instance type in one place at one price) and a fleet's selection of them.
Pure."""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Any

from gpufleet.diagnostics import Diagnostic
from gpufleet.input import FleetSpec

HOURS_PER_MONTH = 730


@dataclass(frozen=True, slots=True)
class Offer:
    backend: str
    region: str
    zone: str | None
    instance_type: str
    gpu_name: str | None
    gpu_count: int
    gpu_memory_gib: float | None
    vcpus: int
    memory_gib: float
    spot: bool
    price: float
    rdma: str = "none"
    rdma_interfaces: int = 0
    nics: int = 1
    # Offered through the fleet's reservation only: the catalog sells this type here as spot
    # alone (A4, A3 Ultra), so the price is the reservation's (NaN: not declared).
    reserved: bool = False

    @property
    def location(self) -> str:
        return self.zone or self.region

    @property
    def price_known(self) -> bool:
        return not math.isnan(self.price)

    def price_text(self) -> str:
        return f"${self.price:.2f}" if self.price_known else "reserved, price not declared"

    def sort_key(self) -> tuple[Any, ...]:
        return (self.price if self.price_known else math.inf, self.backend, self.region,
                self.zone or "", self.instance_type, self.spot)

    def resources_text(self) -> str:
        text = f"{self.vcpus}xCPU, {self.memory_gib:g}GB"
        if self.gpu_count:
            mem = f" ({self.gpu_memory_gib:g}GB)" if self.gpu_memory_gib else ""
            text += f", {self.gpu_count}x{self.gpu_name}{mem}"
        return text

    def short(self) -> str:
        return (f"{self.backend} {self.location} {self.instance_type} "
                f"{'spot' if self.spot else 'on-demand'} {self.price_text()}")

    def to_json(self) -> dict[str, Any]:
        data = dataclasses.asdict(self)
        if math.isnan(self.price):
            data["price"] = None  # a size with no known price
        return data


@dataclass(frozen=True, slots=True)
class Selection:
    fleet: FleetSpec
    offers: tuple[Offer, ...]
    error: Diagnostic | None = None
    profile: str | None = None
    unpriced: tuple[Offer, ...] = ()
    # offers that match but that gpufleet cannot build as this fleet asks (a cluster on a
    # fabric whose software it does not set up), with the code `plan` would refuse them with
    refused: tuple[Offer, ...] = ()
    refused_code: str | None = None

    @property
    def best(self) -> Offer | None:
        return self.offers[0] if self.offers else None
