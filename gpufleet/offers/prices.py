"""The price table of everything gpufleet creates beside the instances (NAT gateways, public
addresses, load balancers, disks, DNS zones): ``gpufleet/data/catalog/prices.json``, dated and
with a source per price. Instances of every role are priced from the catalog rows.
"""

from __future__ import annotations

import bisect
import json
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cache
from typing import Any

from gpufleet.backends import SUPPORTED_BACKENDS
from gpufleet.objectstores import R2_CLOUD as R2
from gpufleet.offers.catalog import bundled_dir


@dataclass(frozen=True, slots=True)
class Price:
    per_hour: float
    source: str


@dataclass(frozen=True, slots=True)
class PriceTable:
    version: str
    date: str
    hours_per_month: int
    not_priced: tuple[str, ...]
    data: Mapping[str, Any]

    def describe(self) -> str:
        return f"price table {self.version} ({self.date})"

    def region(self, backend: str) -> str:
        return str(self.data.get(backend, {}).get("region", ""))

    def item(self, backend: str, key: str) -> Price | None:
        """An hourly item: `per_hour`, or `per_month` over the month's hours."""
        entry = self.data.get(backend, {}).get(key)
        if not isinstance(entry, Mapping):
            return None
        if "per_hour" in entry:
            return Price(float(entry["per_hour"]), str(entry["source"]))
        if "per_month" in entry:
            return Price(float(entry["per_month"]) / self.hours_per_month, str(entry["source"]))
        return None

    def raw(self, backend: str, key: str) -> Mapping[str, Any]:
        entry = self.data.get(backend, {}).get(key)
        return entry if isinstance(entry, Mapping) else {}

    def disk(self, backend: str, disk_type: str, gib: int) -> Price | None:
        """One disk's hourly price: per GB-month, or the tier of the next size up (Azure)."""
        price = self._per_gb_month(backend, "disks", disk_type, gib)
        if price is not None:
            return price
        tiers = self.data.get(backend, {}).get("disk_tiers", {}).get(disk_type)
        if isinstance(tiers, Mapping):
            sizes = [int(t[0]) for t in tiers["tiers"]]
            at = bisect.bisect_left(sizes, gib)
            if at == len(sizes):
                return None
            month = float(tiers["tiers"][at][1])
            return Price(month / self.hours_per_month, str(tiers["source"]))
        return None


    def filesystem(self, backend: str, key: str, gib: int,
                   declared: tuple[float, str] | None = None) -> Price | None:
        """A shared filesystem's hourly price (per GB-month of its capacity): the one the
        backends file declares (USD per GB-month, its source), else the table's, else None."""
        if declared is not None:
            return self._per_gb(declared[0], gib, f"{declared[1]} (the backends file's price)")
        return self._per_gb_month(backend, "filesystems", key, gib)

    def _per_gb_month(self, backend: str, section: str, key: str, gib: int) -> Price | None:
        per_gb = self.data.get(backend, {}).get(section, {}).get(key)
        if not isinstance(per_gb, Mapping):
            return None
        return self._per_gb(float(per_gb["per_gb_month"]), gib, str(per_gb["source"]))

    def _per_gb(self, per_gb_month: float, gib: int, source: str) -> Price:
        return Price(per_gb_month * gib / self.hours_per_month, source)


@cache
def load_prices() -> PriceTable:
    data = json.loads((bundled_dir() / "prices.json").read_text(encoding="utf-8"))
    return PriceTable(str(data["version"]), str(data["date"]), int(data["hours_per_month"]),
                      tuple(data["not_priced"]),
                      {k: v for k, v in data.items() if k in SUPPORTED_BACKENDS or k == R2})
