"""Offers: specs + catalog -> the cheapest matching offer per fleet, in dstack's order.

`catalog update`'s module (downloads, archives, temporary files: tempfile, zipfile and shutil
cost every command's start about 10 ms) is imported when its names are first asked for."""

from typing import TYPE_CHECKING, Any

from gpufleet.offers.catalog import (
    Catalog,
    CatalogError,
    load_bundled,
    load_catalog,
    on_demand_price,
)
from gpufleet.offers.explain import describe_resources
from gpufleet.offers.lock import (
    CHANGED,
    LOCK_MARKER,
    LOCKED,
    NEW,
    UPGRADED,
    LockStatus,
    catalog_label,
    entry_from_offer,
    gateway_entry,
    gateway_status,
    render_lock,
    select_locked,
    stale_diagnostic,
    write_lock,
)
from gpufleet.offers.offer import HOURS_PER_MONTH, Offer, Selection
from gpufleet.offers.prices import Price, PriceTable, load_prices
from gpufleet.offers.reserved import HORIZON, check_reserved
from gpufleet.offers.select import (
    UnknownProfile,
    pick_profile,
    select,
    select_all,
)

if TYPE_CHECKING:
    from gpufleet.offers.update import UpdateError, update_catalog

_UPDATE_NAMES = ("UpdateError", "update_catalog")


def __getattr__(name: str) -> Any:
    if name in _UPDATE_NAMES:
        from gpufleet.offers import update

        return getattr(update, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

__all__ = [
    "CHANGED",
    "HORIZON",
    "HOURS_PER_MONTH",
    "LOCKED",
    "LOCK_MARKER",
    "NEW",
    "UPGRADED",
    "Catalog",
    "CatalogError",
    "LockStatus",
    "Offer",
    "Price",
    "PriceTable",
    "Selection",
    "UnknownProfile",
    "UpdateError",
    "catalog_label",
    "check_reserved",
    "describe_resources",
    "entry_from_offer",
    "gateway_entry",
    "gateway_status",
    "load_bundled",
    "load_catalog",
    "load_prices",
    "on_demand_price",
    "pick_profile",
    "render_lock",
    "select",
    "select_all",
    "select_locked",
    "stale_diagnostic",
    "update_catalog",
    "write_lock",
]
