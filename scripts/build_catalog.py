"""Rebuild the bundled catalog (gpufleet/data/catalog/) from the curated team CSV.

    python scripts/build_catalog.py PATH/TO/gpu-instances.csv

Writes one gpuhunt CSV v2 file per backend (aws.csv, gcp.csv, azure.csv: one row per
instance type x location x spot/on-demand, sorted by price as gpuhunt's collectors write
them), network.csv (RDMA kind and interface counts, which gpuhunt does not carry) and
catalog.json (source and date). Deterministic: the same input gives byte-identical files.
"""

from __future__ import annotations

import csv
import json
import sys
from pathlib import Path

OUT = Path(__file__).resolve().parent.parent / "gpufleet" / "data" / "catalog"
V2_FIELDS = ["instance_name", "location", "price", "cpu", "memory", "gpu_count", "gpu_name",
             "gpu_memory", "spot", "disk_size", "gpu_vendor", "flags", "cpu_arch",
             "provider_data"]
# Where the curated CSV and cloud-recipes.md disagree, the recipe (with its source) wins.
NETWORK_OVERRIDES = {
    # cloud-recipes.md §1.4: ENA primary + 16 efa-only (dstack); the curated CSV says 8.
    "p6-b300.48xlarge": ("efa", 16, 17,
                         "cloud-recipes.md 1.4 (dstack test data); curated CSV says 8, unverified"),
}
# EFA on the single-network-card G types (the curated CSV marks them non-EFA). Which types
# take EFA: dstack's fleet docs (dstackai/dstack docs/docs/concepts/fleets.md, "AWS" note:
# g5/g6 8xlarge..48xlarge) and torchx's AWS named resources (meta-pytorch/torchx
# torchx/specs/named_resources_aws.py: vpc.amazonaws.com/efa = 1 on g5.8xlarge..48xlarge,
# 2 on g6e.24xlarge, 4 on g6e.48xlarge). g6e.8xlarge/12xlarge/16xlarge: AWS's EFA
# supported-types list per the G6e launch, not re-read here (unverified).
_DSTACK_DOCS = "dstack docs concepts/fleets.md (EFA types)"
_TORCHX = "torchx named_resources_aws (EFA device count)"
EFA_FACTS: dict[str, tuple[int, str]] = {
    **{f"g5.{size}": (1, f"{_DSTACK_DOCS}; {_TORCHX}")
       for size in ("8xlarge", "12xlarge", "16xlarge", "24xlarge", "48xlarge")},
    **{f"g6.{size}": (1, f"{_DSTACK_DOCS}; one network card")
       for size in ("8xlarge", "12xlarge", "16xlarge", "24xlarge", "48xlarge")},
    **{f"g6e.{size}": (1, "AWS EFA supported types, unverified")
       for size in ("8xlarge", "12xlarge", "16xlarge")},
    "g6e.24xlarge": (2, _TORCHX),
    "g6e.48xlarge": (4, _TORCHX),
}
# Total NICs per node where it differs from the fabric interface count (cloud-recipes.md).
GCP_NICS = {"gpudirect-tcpx": 1, "gpudirect-tcpxo": 1, "roce": 2}


def _price(v: str | float) -> str:
    return repr(round(float(v), 6))


# CPU families (scripts/cpu/<backend>.txt, extracts of the SkyPilot catalog the GPU rows come
# from). AWS prices these families linearly in size within a region (checked on the source:
# c6i.large 0.085, xlarge 0.17, 8xlarge 1.36, 12xlarge 2.04 in us-east-1), so one size per
# region gives every other size's on-demand price; spot prices are taken only for the sizes the
# extract lists (minimum over the region's AZs, capped at on-demand).
CPU_SIZES = {"large": 1, "xlarge": 2, "2xlarge": 4, "4xlarge": 8, "8xlarge": 16,
             "12xlarge": 24, "16xlarge": 32, "24xlarge": 48, "32xlarge": 64, "48xlarge": 96}
CPU_FAMILIES = {  # family: (GiB of memory per vCPU, sizes sold)
    "c6i": (2, ("large", "xlarge", "2xlarge", "4xlarge", "8xlarge", "12xlarge", "16xlarge",
                "24xlarge", "32xlarge")),
    "m7i": (4, ("large", "xlarge", "2xlarge", "4xlarge", "8xlarge", "12xlarge", "16xlarge",
                "24xlarge", "48xlarge")),
    # Burstable: only the sizes whose vCPUs double with the price (medium and below keep 2
    # vCPUs); t3.large 0.0832 = t3.xlarge / 2, t3a.2xlarge 0.3008 = 4 x t3a.large.
    "t3": (4, ("large", "xlarge", "2xlarge")),
    "t3a": (4, ("large", "xlarge", "2xlarge")),
}
CPU_DIR = Path(__file__).resolve().parent / "cpu"


def cpu_rows(path: Path) -> list[dict[str, str]]:
    """gpuhunt v2 rows for the CPU families of one backend's extract: a listed size keeps its
    source price; the others are derived from the smallest listed size of the region."""
    listed: dict[tuple[str, str], dict[str, float]] = {}  # (family, region) -> size: price
    spot: dict[tuple[str, str], float] = {}  # (type, region) -> cheapest AZ
    for line in path.read_text().splitlines():
        if not line.strip() or line.startswith("#"):
            continue
        head, _, spots = line.partition("|")
        itype, region, price = head.split()
        family, size = itype.split(".")
        listed.setdefault((family, region), {})[size] = float(price)
        if spots.split():
            spot[(itype, region)] = min(float(price), *map(float, spots.split()))
    out = []
    for (family, region), known in sorted(listed.items()):
        smallest = min(known, key=CPU_SIZES.__getitem__)
        unit = known[smallest] / CPU_SIZES[smallest]
        per_cpu_gib, sizes = CPU_FAMILIES[family]
        for size in sizes:
            itype, vcpus = f"{family}.{size}", 2 * CPU_SIZES[size]
            prices = [("False", known.get(size, unit * CPU_SIZES[size]))]
            if (itype, region) in spot:
                prices.append(("True", spot[(itype, region)]))
            for is_spot, price in prices:
                out.append({"instance_name": itype, "location": region, "price": _price(price),
                            "cpu": str(vcpus), "memory": str(float(vcpus * per_cpu_gib)),
                            "gpu_count": "0", "gpu_name": "", "gpu_memory": "",
                            "spot": is_spot, "disk_size": "", "gpu_vendor": "", "flags": "",
                            "cpu_arch": "x86", "provider_data": "{}"})
    return out


def main(src: Path) -> None:
    rows: dict[str, list[dict[str, str]]] = {"aws": [], "gcp": [], "azure": []}
    network: dict[tuple[str, str], tuple[str, int, int, str]] = {}
    with src.open(newline="") as f:
        for r in csv.DictReader(f):
            backend, itype = r["cloud"], r["instance_type"]
            location = r["zone"] or r["region"]
            flags = "gcp-a4" if itype.startswith("a4-") else ""
            for spot, price in (("False", r["price_on_demand_usd_hr"]),
                                ("True", r["price_spot_usd_hr"])):
                if not price:
                    continue
                rows[backend].append({
                    "instance_name": itype, "location": location, "price": _price(price),
                    "cpu": r["vcpus"], "memory": str(float(r["memory_gib"])),
                    "gpu_count": r["gpu_count"], "gpu_name": r["gpu_name"],
                    "gpu_memory": str(float(r["gpu_memory_gib"])), "spot": spot,
                    "disk_size": "", "gpu_vendor": "nvidia", "flags": flags, "cpu_arch": "x86",
                    "provider_data": "{}",
                })
            rdma, count = r["rdma"], int(r["rdma_interfaces"])
            nics = count + GCP_NICS.get(rdma, 0) if backend == "gcp" else max(count, 1)
            if backend == "azure":
                nics = 1  # InfiniBand is a separate fabric; one Ethernet NIC (cloud-recipes 3.3)
            network[(backend, itype)] = NETWORK_OVERRIDES.get(
                itype, (rdma, count, nics, "curated CSV"))
            if backend == "aws" and itype in EFA_FACTS:
                efa, note = EFA_FACTS[itype]
                network[(backend, itype)] = ("efa", efa, efa, note)
    for backend in rows:
        extract = CPU_DIR / f"{backend}.txt"
        if extract.is_file():
            rows[backend] += cpu_rows(extract)
    OUT.mkdir(parents=True, exist_ok=True)
    for backend, items in rows.items():
        items.sort(key=lambda x: (float(x["price"]), x["instance_name"], x["location"],
                                  x["spot"]))
        with (OUT / f"{backend}.csv").open("w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=V2_FIELDS, lineterminator="\n")
            w.writeheader()
            w.writerows(items)
    with (OUT / "network.csv").open("w", newline="") as f:
        w = csv.writer(f, lineterminator="\n")
        w.writerow(["backend", "instance_type", "rdma", "rdma_interfaces", "nics", "source"])
        for (backend, itype), (rdma, count, nics, note) in sorted(network.items()):
            w.writerow([backend, itype, rdma, count, nics, note])
    meta = {"source": "bundled", "version": "2026-08-bundled",
            "date": "2026-08-21",
            "derived_from": "curated gpu-instances.csv (SkyPilot catalog snapshot + corrections)"
                            "; CPU families from scripts/cpu/ (same SkyPilot snapshot)",
            "rows": {b: len(v) for b, v in rows.items()}}
    (OUT / "catalog.json").write_text(json.dumps(meta, indent=2) + "\n")
    print(meta["rows"])


if __name__ == "__main__":
    main(Path(sys.argv[1]))
