"""The offers lock: requirement digests, locked selection and the ``gpufleet.lock`` writer.

A fleet keeps its locked offer while the digest of its requirements is unchanged, whatever
the catalog says now; a new fleet, or one whose requirements changed, gets the cheapest offer
again and is marked so the review shows it. Pure except :func:`write_lock`.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

import yaml

from gpufleet.backends import traits_of
from gpufleet.codes import O010, O011
from gpufleet.diagnostics import Diagnostic, Severity
from gpufleet.fileio import check_file, write_text
from gpufleet.input import (
    LOCK_FILE,
    FleetSpec,
    GatewaySpec,
    Inputs,
    Lock,
    LockEntry,
    Origin,
    ProfileSpec,
    offer_place,
)
from gpufleet.offers.catalog import Catalog, Row, on_demand_price
from gpufleet.offers.offer import Offer, Selection
from gpufleet.offers.select import apply_profile, effective_backends, select

# Statuses of a fleet's or gateway's offer against the lock.
LOCKED = "locked"  # the lock entry is used (requirements unchanged)
NEW = "new"  # no lock entry: picked now
CHANGED = "changed"  # requirements changed since the entry was written: picked again
UPGRADED = "upgraded"  # picked again on request (`gpufleet lock --upgrade`)
UNLOCKED = "unlocked"  # no lock in use at all

LOCK_HEADER = ("# gpufleet.lock - the offer chosen for each fleet and gateway. Written by\n"
               "# `gpufleet lock`; commit it and review its changes like any lock file.\n"
               "# An entry is used while its `requirements` digest matches the YAML.\n")


@dataclass(frozen=True, slots=True)
class LockStatus:
    status: str
    digest: str
    previous: LockEntry | None = None  # the entry before this run (NEW: None)

    @property
    def is_new_offer(self) -> bool:
        return self.status in (NEW, CHANGED, UPGRADED)


def digest(data: Any) -> str:
    text = json.dumps(data, sort_keys=True, separators=(",", ":"), default=str)
    return "sha256:" + hashlib.sha256(text.encode("utf-8")).hexdigest()


def _sorted_lower(values: Iterable[str] | None) -> list[str] | None:
    return None if values is None else sorted({v.lower() for v in values})


def fleet_requirements(fleet: FleetSpec, inputs: Inputs) -> dict[str, Any]:
    """What an offer is chosen for (profile fields already applied): resources, backends and
    the regions the backends file allows, regions, zones, instance types, spot policy, max
    price, reservation and placement. Names, nodes, tags and network settings are not in
    it: changing them never moves a fleet to another offer."""
    backends = sorted(effective_backends(fleet, inputs))
    allowed = {b.type: _sorted_lower(b.regions) for b in inputs.backends
               if b.type in backends and b.regions is not None}
    return {
        "resources": dataclasses.asdict(fleet.resources),
        "backends": backends,
        "backend_regions": allowed,
        "regions": _sorted_lower(fleet.regions),
        "availability_zones": _sorted_lower(fleet.availability_zones),
        "instance_types": _sorted_lower(fleet.instance_types),
        "spot_policy": fleet.spot_policy or "on-demand",
        "max_price": fleet.max_price,
        "reservation": fleet.reservation,
        "placement": fleet.placement,
    }


def gateway_requirements(gw: GatewaySpec) -> dict[str, Any]:
    return {"backend": gw.backend, "region": gw.region.lower(),
            "instance_type": gw.instance_type}


def entry_for(name: str, lock: Lock | None, previous_names: Sequence[str] = (),
              gateways: bool = False) -> LockEntry | None:
    """The lock entry of a fleet (or gateway), following `previous_names` newest first."""
    if lock is None:
        return None
    table = lock.gateways if gateways else lock.fleets
    for n in (name, *reversed(previous_names)):
        if n in table:
            return table[n]
    return None


@lru_cache(maxsize=4)
def _rows_by_place(catalog: Catalog) -> dict[tuple[str, str, str, bool], Row]:
    """The first row of each (backend, type, location, spot): a lookup, not a scan of the
    10,000 rows per locked fleet. Keyed by the catalog object (catalogs compare by identity)."""
    index: dict[tuple[str, str, str, bool], Row] = {}
    for r in catalog.rows:
        index.setdefault((r.backend, r.instance_type, r.location, r.spot), r)
    return index


def _catalog_row_offer(catalog: Catalog, e: LockEntry) -> Offer | None:
    location = e.zone if traits_of(e.backend).zonal_offers and e.zone else e.region
    r = _rows_by_place(catalog).get((e.backend, e.instance_type, location, e.spot))
    if r is None:
        return None
    f = catalog.facts(e.backend, e.instance_type)
    return Offer(e.backend, e.region, e.zone, e.instance_type, r.gpu_name, r.gpu_count,
                 r.gpu_memory_gib, r.vcpus, r.memory_gib, e.spot, r.price, f.rdma,
                 f.rdma_interfaces, f.nics)


def locked_offer(catalog: Catalog, e: LockEntry) -> tuple[Offer, bool]:
    """The offer a lock entry names, priced from the catalog when it still lists it (else at
    the lock's price); the flag says whether the catalog lists it."""
    found = _catalog_row_offer(catalog, e)
    if found is not None:
        return found, True
    f = catalog.facts(e.backend, e.instance_type)
    price = math.nan if e.price is None else e.price
    return Offer(e.backend, e.region, e.zone, e.instance_type, e.gpu_name, e.gpu_count,
                 e.gpu_memory_gib, e.cpus, e.memory_gib, e.spot, price, f.rdma,
                 f.rdma_interfaces, f.nics), False


def select_locked(fleet: FleetSpec, catalog: Catalog, inputs: Inputs,
                  profile: ProfileSpec | None, lock: Lock | None, upgrade: bool = False,
                  alternatives: bool = True
                  ) -> tuple[Selection, LockStatus, list[Diagnostic]]:
    """Offers for ``fleet`` with the lock applied: the locked offer first while the fleet's
    requirements are unchanged; otherwise the catalog's cheapest, marked as a new offer.
    Without ``alternatives`` (compiling: only the first offer is built) a current lock
    entry is the whole selection and the catalog is not searched."""
    applied = apply_profile(fleet, profile)
    want = digest(fleet_requirements(applied, inputs))
    entry = entry_for(fleet.name, lock, fleet.previous_names)
    current = lock is not None and entry is not None and not upgrade \
        and entry.requirements == want
    sel = select(fleet, catalog, inputs, profile) if alternatives or not current else None
    if lock is None:
        assert sel is not None
        return sel, LockStatus(UNLOCKED, want), []
    if entry is None:
        assert sel is not None
        return sel, LockStatus(NEW, want), []
    if upgrade or entry.requirements != want:
        assert sel is not None
        return sel, LockStatus(UPGRADED if upgrade else CHANGED, want, entry), []
    offer, listed = locked_offer(catalog, entry)
    diags = []
    if not listed:
        diags.append(fleet.origin.at(
            "resources", O010, f"fleet '{fleet.name}': the locked offer ({entry.short()}) is "
            f"not in the {catalog.describe()}; keeping it - the cloud decides at `pulumi up`",
            "to move to an offer the catalog lists, run `gpufleet lock --upgrade --fleet "
            f"{fleet.name}`", Severity.WARNING))
    status = LockStatus(LOCKED, want, entry)
    if sel is None:
        return Selection(applied, (offer,), profile=profile.name if profile else None), \
            status, diags
    rest = tuple(o for o in sel.offers if offer_place(o) != offer_place(offer))
    return dataclasses.replace(sel, offers=(offer, *rest), error=None), status, diags


def gateway_status(gw: GatewaySpec, lock: Lock | None, upgrade: bool = False) -> LockStatus:
    want = digest(gateway_requirements(gw))
    if lock is None:
        return LockStatus(UNLOCKED, want)
    entry = entry_for(gw.name, lock, gateways=True)
    if entry is None:
        return LockStatus(NEW, want)
    if upgrade:
        return LockStatus(UPGRADED, want, entry)
    return LockStatus(LOCKED if entry.requirements == want else CHANGED, want, entry)


def stale_diagnostic(kind: str, name: str, origin: Origin, st: LockStatus,
                     lock: Lock | None) -> Diagnostic:
    """The error of `plan --locked` and of the stack program for an unlocked fleet."""
    where = (lock.file if lock else "") or LOCK_FILE
    if lock is None or not lock.exists:
        msg = f"{kind} '{name}' is not locked: there is no lock file {where}"
    elif st.status in (NEW, UNLOCKED):
        msg = f"{kind} '{name}' has no entry in {where}"
    else:
        msg = (f"the requirements of {kind} '{name}' changed since {where} was written "
               f"(locked: {st.previous.short() if st.previous else '?'})")
    return origin.at("name", O011, msg, "run `gpufleet lock` and commit the lock file; "
                     "the plan then shows the new offer for review")


# --- entries and the file -------------------------------------------------------------

def catalog_label(catalog: Catalog) -> str:
    """The catalog an entry came from, with its date (never a local path or a URL)."""
    kind = catalog.source if catalog.source in ("bundled", "local") else "gpuhunt"
    return f"{kind} {catalog.date or catalog.version or 'undated'}"


def entry_from_offer(name: str, want: str, offer: Offer, catalog: Catalog,
                     cidr: str | None = None) -> LockEntry:
    price = None if math.isnan(offer.price) else round(offer.price, 6)
    return LockEntry(name, want, offer.backend, offer.region, offer.zone, offer.instance_type,
                     offer.spot, price, catalog_label(catalog), offer.vcpus, offer.memory_gib,
                     offer.gpu_name, offer.gpu_count if offer.gpu_name else 0,
                     offer.gpu_memory_gib, cidr)


def gateway_entry(name: str, want: str, backend: str, region: str, zone: str | None,
                  instance_type: str, catalog: Catalog, cidr: str | None = None) -> LockEntry:
    """A gateway's entry, priced as the plan's bill prices it (the lowest on-demand price of
    its type in the region or any of its zones)."""
    rows = [r for r in catalog.rows if (r.backend, r.instance_type, r.spot) ==
            (backend, instance_type, False)
            and (r.location == region or r.location.startswith(region + "-"))]
    r = min(rows, key=lambda row: row.price) if rows else None
    price = on_demand_price(catalog, backend, region, instance_type)
    return LockEntry(name, want, backend, region, zone, instance_type, False,
                     round(price, 6) if price is not None else None, catalog_label(catalog),
                     r.vcpus if r else 0, r.memory_gib if r else 0.0, cidr=cidr)


def _entry_data(e: LockEntry) -> dict[str, Any]:
    data: dict[str, Any] = {
        "requirements": e.requirements, "backend": e.backend, "region": e.region,
        "zone": e.zone, "instance_type": e.instance_type, "spot": e.spot, "price": e.price,
        "catalog": e.catalog}
    if e.cidr:
        data["cidr"] = e.cidr
    if e.reservation:
        data["reservation"] = e.reservation
    if e.overhead is not None:
        fixed, per_node, prices = e.overhead
        data["overhead"] = {"fixed": round(fixed, 6), "per_node": round(per_node, 6),
                            "prices": prices}
    if e.cpus:
        data["cpus"] = e.cpus
    if e.memory_gib:
        data["memory_gib"] = _num(e.memory_gib)
    if e.gpu_name:
        data["gpu"] = {"name": e.gpu_name, "count": e.gpu_count,
                       "memory_gib": None if e.gpu_memory_gib is None
                       else _num(e.gpu_memory_gib)}
    return data


def _num(v: float) -> float | int:
    return int(v) if float(v).is_integer() else v


def render_lock(fleets: Mapping[str, LockEntry], gateways: Mapping[str, LockEntry]) -> str:
    """The lock file text: sorted by name, so the same entries always give the same bytes."""
    data: dict[str, Any] = {"lock_version": 1}
    if fleets:
        data["fleets"] = {n: _entry_data(fleets[n]) for n in sorted(fleets)}
    if gateways:
        data["gateways"] = {n: _entry_data(gateways[n]) for n in sorted(gateways)}
    body = yaml.safe_dump(data, sort_keys=False, default_flow_style=False, width=100)
    return LOCK_HEADER + body


LOCK_MARKER = LOCK_HEADER.splitlines()[0]


def write_lock(path: str | os.PathLike[str], fleets: Mapping[str, LockEntry],
               gateways: Mapping[str, LockEntry], force: bool = False,
               rendered: str | None = None) -> bool:
    """Write the lock atomically; False (nothing written) when the bytes would not change.
    A file there that `gpufleet lock` did not write is replaced only with ``force``.
    ``rendered``: ``render_lock(fleets, gateways)``, where the caller has it already."""
    text = render_lock(fleets, gateways) if rendered is None else rendered
    p = Path(path)
    check_file(str(p), LOCK_MARKER, force)
    if p.is_file() and p.read_text("utf-8") == text:
        return False
    write_text(str(p), text, LOCK_MARKER, force)
    return True
