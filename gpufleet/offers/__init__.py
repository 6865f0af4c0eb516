"""Offers: specs + catalog -> the cheapest matching offer per fleet, in dstack's order."""

from gpufleet.offers.catalog import Catalog, CatalogError, load_catalog
from gpufleet.offers.select import (
    HOURS_PER_MONTH,
    Offer,
    Selection,
    describe_resources,
    pick_profile,
    select,
    select_all,
)
from gpufleet.offers.update import UpdateError, update_catalog

__all__ = [
    "HOURS_PER_MONTH", "Catalog", "CatalogError", "Offer", "Selection", "UpdateError",
    "describe_resources", "load_catalog", "pick_profile", "select", "select_all",
    "update_catalog",
]
