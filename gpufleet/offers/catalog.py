"""The offer catalog: gpuhunt CSV v2 files per backend plus gpufleet's network facts.

Where the catalog comes from, in order: ``--catalog DIR``, ``$GPUFLEET_CATALOG_DIR``, the
user cache written by ``gpufleet catalog update``, the copy bundled with the package.
Reading is the only I/O here; the update path lives in :mod:`gpufleet.offers.update`.
"""

from __future__ import annotations

import csv
import json
import math
import os
from collections.abc import Iterable
from dataclasses import dataclass, field, fields
from functools import cache, lru_cache
from operator import attrgetter, itemgetter
from pathlib import Path
from typing import Any

from gpufleet.backends import backend_names, is_backend, traits_of
from gpufleet.fileio import package_data
from gpufleet.offers.rowcache import cached_rows

ENV_CATALOG_DIR = "GPUFLEET_CATALOG_DIR"
V2_FIELDS = ("instance_name", "location", "price", "cpu", "memory", "gpu_count", "gpu_name",
             "gpu_memory", "spot", "disk_size", "gpu_vendor", "flags", "cpu_arch",
             "provider_data")


class CatalogError(Exception):
    """A catalog that cannot be read; the message says which file and why."""


@dataclass(frozen=True, slots=True)
class NetworkFacts:
    rdma: str = "none"
    rdma_interfaces: int = 0
    nics: int = 1


@dataclass(frozen=True, slots=True)
class Row:
    """One catalog row (gpuhunt's CatalogItem fields) with its backend."""

    backend: str
    instance_type: str
    location: str
    price: float
    vcpus: int
    memory_gib: float
    gpu_count: int
    gpu_name: str | None
    gpu_memory_gib: float | None
    spot: bool
    disk_size: float | None
    gpu_vendor: str | None
    flags: tuple[str, ...]
    cpu_arch: str

    @property
    def family(self) -> str:
        """The instance family as the cloud names it: m7i (AWS), e2-standard (GCP), Dsv5
        (Azure); an unrecognised name is its own family."""
        return instance_family(self.backend, self.instance_type)


def on_demand_price(cat: Catalog | None, backend: str, region: str, itype: str
                    ) -> float | None:
    """The lowest on-demand price of a type in a region (or any of its zones)."""
    if cat is None:
        return None
    prices = [r.price for r in _on_demand_rows(cat).get((backend, itype), ())
              if r.location == region or r.location.startswith(region + "-")]
    return min(prices) if prices else None


@lru_cache(maxsize=4)
def _on_demand_rows(cat: Catalog) -> dict[tuple[str, str], list[Row]]:
    """A catalog's on-demand rows by backend and type (a catalog is keyed by identity)."""
    index: dict[tuple[str, str], list[Row]] = {}
    for r in cat.rows:
        if not r.spot:
            index.setdefault((r.backend, r.instance_type), []).append(r)
    return index


def instance_family(backend: str, instance_type: str) -> str:
    return traits_of(backend).family(instance_type) if is_backend(backend) \
        else instance_type


# eq=False: a catalog is identified by the object (hashing 10k rows for every cached lookup
# cost ~4 ms per call); _load_dir hands out one object per folder and stamp.
@dataclass(frozen=True, slots=True, eq=False)
class Catalog:
    rows: tuple[Row, ...]
    network: dict[tuple[str, str], NetworkFacts] = field(hash=False)
    source: str = "bundled"
    version: str = ""
    date: str = ""
    path: str = ""
    skipped: int = 0
    chosen_by: str = "bundled"
    # Sizes users expect whose price no source gives: shown by `offers`, never selected.
    unpriced: tuple[Row, ...] = ()

    def facts(self, backend: str, instance_type: str) -> NetworkFacts:
        return self.network.get((backend, instance_type), NetworkFacts())

    def describe(self) -> str:
        when = f", {self.date}" if self.date else ""
        ver = f" {self.version}" if self.version else ""
        where = "" if self.chosen_by in ("bundled", "cache") else \
            f" (from {self.chosen_by} {self.path})"
        return f"{self.source} catalog{ver}{when}{where}"


def user_cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "gpufleet" / "catalog"


def bundled_dir() -> Path:
    return package_data("catalog")


def load_bundled() -> Catalog | None:
    """The bundled catalog, or None when it cannot be read: the small types gpufleet runs
    (bastions, gateway VMs) are priced from it when the catalog in use lacks them."""
    try:
        return _load_path(bundled_dir(), "bundled")
    except CatalogError:
        return None


def choose_dir(explicit: str | None = None) -> tuple[Path, str]:
    """The catalog folder to use and why it was chosen."""
    if explicit:
        return Path(explicit), "--catalog"
    env = os.environ.get(ENV_CATALOG_DIR)
    if env:
        return Path(env), ENV_CATALOG_DIR
    cached = user_cache_dir()
    if (cached / "catalog.json").is_file():
        return cached, "cache"
    return bundled_dir(), "bundled"


def load_catalog(explicit: str | None = None) -> Catalog:
    return _load_path(*choose_dir(explicit))


def _load_path(path: Path, why: str) -> Catalog:
    """One folder's catalog, read once per content (the cache key is the resolved folder,
    why it was chosen and catalog.json's mtime)."""
    meta = path / "catalog.json"
    stamp = meta.stat().st_mtime_ns if meta.is_file() else 0
    return _load_dir(str(path.resolve()) if path.exists() else str(path), why, stamp)


@cache
def _load_dir(path: str, why: str, stamp: int = 0) -> Catalog:
    folder = Path(path)
    if not folder.is_dir():
        raise CatalogError(f"catalog folder {path} does not exist ({why})")
    meta: dict[str, Any] = {}
    if (folder / "catalog.json").is_file():
        try:
            meta = json.loads((folder / "catalog.json").read_text("utf-8"))
        except (OSError, ValueError) as e:
            raise CatalogError(f"{folder / 'catalog.json'}: {e}") from None
    rows: list[Row] = []
    skipped = 0
    found = False
    for backend in backend_names():
        f = folder / f"{backend}.csv"
        own = traits_of(backend).catalog_csv
        if not f.is_file() and own is not None:
            f = Path(own)  # a plugin's own catalog
        if not f.is_file():
            continue
        found = True
        parsed, bad = _rows(backend, f)
        rows.extend(parsed)
        skipped += bad
    if not found:
        raise CatalogError(f"catalog folder {path} holds none of "
                           f"{', '.join(b + '.csv' for b in backend_names())}")
    network = read_network(folder / "network.csv" if (folder / "network.csv").is_file()
                           else bundled_dir() / "network.csv")
    return Catalog(tuple(rows), network, str(meta.get("source", "local")),
                   str(meta.get("version", "")), str(meta.get("date", "")), path, skipped, why,
                   read_unpriced(bundled_dir() / "unpriced.csv"))


_ROW_FIELDS = tuple(f.name for f in fields(Row))


def _rows(backend: str, path: Path) -> tuple[list[Row], int]:
    """A catalog file's rows, parsed by parse_rows or read back from the cache of what an
    earlier run parsed (gpufleet/offers/rowcache.py)."""
    def parse() -> tuple[list[Row], int]:
        with path.open(newline="", encoding="utf-8") as fh:
            return parse_rows(backend, fh)
    return cached_rows(backend, path, Path(__file__), _ROW_FIELDS, parse,
                       attrgetter(*_ROW_FIELDS), Row)


def parse_rows(backend: str, lines: Iterable[str]) -> tuple[list[Row], int]:
    """Parse gpuhunt CSV v2 text; malformed rows are counted and skipped, as gpuhunt does: a
    row of more fields than columns, one without a value it needs, a value that does not
    read. Rows are read by column index (a dict per row, as ``csv.DictReader`` makes, was
    a third of a catalog's load; a short row read as None crashed the reader)."""
    reader = csv.reader(lines)
    try:
        header = next(reader, [])
        index = {name: i for i, name in enumerate(header)}
        missing = [f for f in ("instance_name", "location", "price", "spot")
                   if f not in index]
        if missing:
            raise CatalogError(f"{backend}.csv is not a gpuhunt v2 catalog: missing columns "
                               f"{', '.join(missing)}")
        width = len(header)
        # a column the file lacks reads the empty value appended past the row's last
        values = itemgetter(*(index.get(name, width) for name in _COLUMNS))
        rows, bad = [], 0
        for raw in reader:
            if not raw:
                continue  # a blank line
            if len(raw) < width:  # the missing values read as empty: absent, or malformed
                raw += [""] * (width - len(raw))  # where the row needs them
            try:
                if len(raw) > width or max(map(len, raw)) > MAX_FIELD:
                    raise ValueError("more fields than columns, or one longer than gpuhunt "
                                     "writes")
                raw.append("")
                rows.append(_row(backend, values(raw)))
            except ValueError:
                bad += 1
    except csv.Error as e:  # a field past the csv module's own bound, a broken quote
        raise CatalogError(f"{backend}.csv cannot be read as CSV (line {reader.line_num}: "
                           f"{e})") from None
    return rows, bad


def _opt_float(v: str | None) -> float | None:
    return float(v) if v else None


# No gpuhunt field comes near this; a longer one is not catalog data (and would be carried
# into every plan and lock that names the row)
MAX_FIELD = 256
# the columns a row is read from, in _row's order
_COLUMNS = ("instance_name", "location", "price", "spot", "cpu", "memory", "gpu_count",
            "gpu_name", "gpu_vendor", "gpu_memory", "disk_size", "flags", "cpu_arch")


def _row(backend: str, values: tuple[str, ...]) -> Row:
    """One row from its values in _COLUMNS' order; ValueError for a value the row needs that
    is empty or does not read."""
    (instance, location, price_text, spot, cpu, memory, gpu_count_text, gpu_name, gpu_vendor,
     gpu_memory, disk_size, flags, cpu_arch) = values
    spot = spot.lower()
    if spot not in ("true", "false"):
        raise ValueError(spot)
    gpu_count = int(gpu_count_text or 0)
    name = gpu_name or None
    vendor = gpu_vendor or None
    if name and name.startswith("tpu-"):
        name, vendor = name[4:], vendor or "google"
    elif vendor is None and gpu_count:
        vendor = "nvidia"
    if not instance or not location:
        raise ValueError("empty instance or location")
    price = float(price_text)
    if not math.isfinite(price) or price < 0:  # a price is a non-negative amount of money
        raise ValueError(price_text)
    return Row(backend, instance, location, price, int(cpu), float(memory), gpu_count, name,
               _opt_float(gpu_memory), spot == "true", _opt_float(disk_size), vendor,
               tuple(flags.split()), cpu_arch or "x86")


def read_network(path: Path) -> dict[tuple[str, str], NetworkFacts]:
    out: dict[tuple[str, str], NetworkFacts] = {}
    with path.open(newline="", encoding="utf-8") as fh:
        for r in csv.DictReader(fh):
            out[(r["backend"], r["instance_type"])] = NetworkFacts(
                r["rdma"], int(r["rdma_interfaces"]), int(r["nics"]))

    return out


def read_unpriced(path: Path) -> tuple[Row, ...]:
    if not path.is_file():
        return ()
    with path.open(newline="", encoding="utf-8") as fh:
        return tuple(Row(r["backend"], r["instance_type"], r["location"], float("nan"),
                         int(r["cpu"]), float(r["memory"]), int(r["gpu_count"]), r["gpu_name"],
                         float(r["gpu_memory"]), False, None, "nvidia", (), "x86")
                     for r in csv.DictReader(fh))

