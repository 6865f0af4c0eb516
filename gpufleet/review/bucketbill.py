"""A bucket's bill: its storage (the `expected_gb` it holds, at its class's price) and the data
its fleets move each month (`transfer:`), priced by the path each GB takes - within one
region nothing, across regions of one cloud that cloud's inter-region price, out of a cloud
its internet egress price (a read pays the bucket's cloud, a write the fleet's), R2 nothing.
From the price table (``gpufleet.offers.prices``), each line with its source. Pure."""

from __future__ import annotations

from gpufleet.compile import BucketDesign, BucketReader
from gpufleet.offers import PriceTable
from gpufleet.review.bill import Bill, Item


def transfer_price(prices: PriceTable, payer: str, same_cloud: bool, same_region: bool
                   ) -> tuple[float | None, str]:
    """USD per GB that ``payer`` charges for a GB on this path, and the source."""
    t = prices.raw(payer, "transfer")
    if not t:
        return None, f"{prices.describe()}: no transfer prices for {payer}"
    key = "same_region_per_gb" if same_cloud and same_region else \
        "inter_region_per_gb" if same_cloud else "internet_per_gb"
    return float(t[key]), str(t["source"])


def _path(b: BucketDesign, r: BucketReader) -> str:
    if r.backend == b.cloud:
        return "in one region" if r.region == b.region else \
            f"{b.region} -> {r.region}"
    return f"{b.cloud} {b.region} <-> {r.backend} {r.region}"


def bucket_bill(b: BucketDesign, prices: PriceTable) -> Bill:
    items: list[Item] = []
    unpriced: list[str] = []
    hours = prices.hours_per_month
    klass = (prices.raw(b.cloud, "buckets") or {}).get(b.klass)
    if b.expected_gb is None:
        unpriced.append(f"storage of bucket {b.name} (declare `expected_gb`)")
    elif not klass:
        unpriced.append(f"storage of bucket {b.name} (no {b.klass} price for {b.cloud})")
    else:
        items.append(Item("storage", "bucket", f"{b.expected_gb:,.0f} GB {b.klass} (bucket "
                          f"{b.name})", 1, b.expected_gb * float(klass["per_gb_month"]) / hours,
                          str(klass["source"])))
    for r in b.readers:
        same_cloud, same_region = r.backend == b.cloud, r.region == b.region
        for gb, payer, verb in ((r.read_gb_per_month, b.cloud, "read by"),
                                (r.write_gb_per_month, r.backend, "written from")):
            if not gb:
                continue
            price, source = transfer_price(prices, payer, same_cloud, same_region)
            what = f"{gb:,.0f} GB/month {verb} {r.fleet} ({_path(b, r)})"
            if price is None:
                unpriced.append(f"{what} ({source})")
                continue
            items.append(Item("network", "transfer", what, 1, gb * price / hours, source))
    return Bill(b.name, "bucket", tuple(items), tuple(unpriced))
