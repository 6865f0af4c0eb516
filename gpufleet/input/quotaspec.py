"""What the backends file's `quotas:` declares (gpufleet/input/checks/quotas.py reads it)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class QuotaLimit:
    """One quota's limit and use as `gpufleet quota --live --save` recorded them."""

    backend: str
    scope: str
    region: str
    ident: str
    dimensions: tuple[tuple[str, str], ...]
    market: str
    limit: float
    used: float

    @property
    def key(self) -> tuple[str, str, str, str, tuple[tuple[str, str], ...], str]:
        return (self.backend, self.scope, self.region, self.ident, self.dimensions, self.market)


@dataclass(frozen=True, slots=True)
class QuotaSettings:
    request: bool  # file an increase for each short quota (through the stack)
    headroom: float  # percent above the need
    contact_email: str | None  # Google asks requests for one
    limits: tuple[QuotaLimit, ...]
    limits_file: str | None
