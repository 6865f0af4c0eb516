"""Rebuild the bundled catalog (gpufleet/data/catalog/) from the curated team CSV.

    python scripts/build_catalog.py PATH/TO/gpu-instances.csv

Writes one gpuhunt CSV v2 file per backend (aws.csv, gcp.csv, azure.csv, and lambda.csv
from scripts/lambda/: one row per
instance type x location x spot/on-demand, sorted by price as gpuhunt's collectors write
them), network.csv (RDMA kind and interface counts, which gpuhunt does not carry) and
catalog.json (source and date). Deterministic: the same input gives byte-identical files.
"""

from __future__ import annotations

import csv
import json
import sys
from dataclasses import dataclass
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
# 2 on g6e.24xlarge, 4 on g6e.48xlarge). g6e.8xlarge and 12xlarge: `aws ec2
# describe-instance-types` output quoted in gnosia93/training-on-eks
# chapter/c11-deepspeed.md (g6e.12xlarge EfaSupported True, MaximumEfaInterfaces 1; an
# earlier version of the page shows g6e.8xlarge EfaSupported True). g6e.16xlarge: AWS's EFA
# supported-types list per the G6e launch, not re-read here (unverified).
_DSTACK_DOCS = "dstack docs concepts/fleets.md (EFA types)"
_TORCHX = "torchx named_resources_aws (EFA device count)"
_EC2_API = "EC2 DescribeInstanceTypes output quoted in gnosia93/training-on-eks"
EFA_FACTS: dict[str, tuple[int, str]] = {
    **{f"g5.{size}": (1, f"{_DSTACK_DOCS}; {_TORCHX}")
       for size in ("8xlarge", "12xlarge", "16xlarge", "24xlarge", "48xlarge")},
    **{f"g6.{size}": (1, f"{_DSTACK_DOCS}; one network card")
       for size in ("8xlarge", "12xlarge", "16xlarge", "24xlarge", "48xlarge")},
    "g6e.8xlarge": (1, f"{_EC2_API} (EfaSupported True); one network card"),
    "g6e.12xlarge": (1, f"{_EC2_API} (MaximumEfaInterfaces 1)"),
    "g6e.16xlarge": (1, "AWS EFA supported types, unverified"),
    "g6e.24xlarge": (2, _TORCHX),
    "g6e.48xlarge": (4, _TORCHX),
}
# Total NICs per node where it differs from the fabric interface count (cloud-recipes.md).
GCP_NICS = {"gpudirect-tcpx": 1, "gpudirect-tcpxo": 1, "roce": 2}


def _price(v: str | float) -> str:
    return repr(round(float(v), 6))


# CPU families (scripts/cpu/<backend>*.txt: extracts of the SkyPilot catalog the GPU rows come
# from, and of Apache Libcloud's price list; each file's header names its source). Each
# family is priced linearly in vCPUs within a region (checked on the sources: c6i.large 0.085,
# xlarge 0.17, 8xlarge 1.36, 12xlarge 2.04 in us-east-1; Standard_D2s_v5 0.096, D16s_v5 0.768,
# D64s_v5 3.072 in eastus; GCP bills per vCPU and GB), so one size per region gives every
# other size's on-demand price. AWS spot is a market price per type, so it is taken only for
# the sizes an extract lists (minimum over the region's AZs, capped at on-demand); GCP and
# Azure spot prices are linear in the source too (e2-standard-32 = 8 x e2-standard-4;
# D32s_v5 westus 0.198554 = 4 x D8s_v5 0.049638), so there spot is derived like on-demand.
@dataclass(frozen=True)
class CpuFamily:
    """Instance names are `template.format(size)`; each size sold with its (vCPUs, GiB)."""

    template: str
    sizes: dict[str, tuple[int, float]]
    spot_linear: bool = False
    # what the price is linear in: "vcpus", or "memory" for burstable shapes whose vCPUs stay
    # the same while the price doubles with the memory (t3.nano .. t3.medium)
    derive_by: str = "vcpus"

    def scale(self, size: str) -> float:
        vcpus, gib = self.sizes[size]
        return gib if self.derive_by == "memory" else float(vcpus)


CPU_SIZES = {"large": 1, "xlarge": 2, "2xlarge": 4, "4xlarge": 8, "8xlarge": 16,
             "12xlarge": 24, "16xlarge": 32, "24xlarge": 48, "32xlarge": 64, "48xlarge": 96}
_ICE_LAKE = ("large", "xlarge", "2xlarge", "4xlarge", "8xlarge", "12xlarge", "16xlarge",
             "24xlarge", "32xlarge")
_SAPPHIRE_RAPIDS = ("large", "xlarge", "2xlarge", "4xlarge", "8xlarge", "12xlarge", "16xlarge",
                    "24xlarge", "48xlarge")


def _aws(family: str, per_cpu_gib: int, sizes: tuple[str, ...]) -> CpuFamily:
    return CpuFamily(family + ".{}", {s: (2 * CPU_SIZES[s], float(2 * CPU_SIZES[s] * per_cpu_gib))
                                      for s in sizes})


def _by_vcpus(template: str, per_cpu_gib: int, vcpus: tuple[int, ...],
              memory: dict[int, float] | None = None) -> CpuFamily:
    """A GCP or Azure family: sizes named by vCPU count, spot priced per vCPU."""
    memory = memory or {}
    return CpuFamily(template, {str(n): (n, memory.get(n, float(n * per_cpu_gib)))
                                for n in vcpus}, spot_linear=True)


_N2 = (2, 4, 8, 16, 32, 48, 64, 80, 96, 128)
CPU_FAMILIES = {
    "c6i": _aws("c6i", 2, _ICE_LAKE),
    "m6i": _aws("m6i", 4, _ICE_LAKE),
    "r6i": _aws("r6i", 8, _ICE_LAKE),
    "c7i": _aws("c7i", 2, _SAPPHIRE_RAPIDS),
    "m7i": _aws("m7i", 4, _SAPPHIRE_RAPIDS),
    # Burstable: only the sizes whose vCPUs double with the price (medium and below keep 2
    # vCPUs); t3.large 0.0832 = t3.xlarge / 2, t3a.2xlarge 0.3008 = 4 x t3a.large.
    "t3": _aws("t3", 4, ("large", "xlarge", "2xlarge")),
    "t3a": _aws("t3a", 4, ("large", "xlarge", "2xlarge")),
    # GCP standard shapes: 4 GB per vCPU (cloud.google.com/compute/docs general-purpose).
    "e2-standard": _by_vcpus("e2-standard-{}", 4, (2, 4, 8, 16, 32)),
    "n2-standard": _by_vcpus("n2-standard-{}", 4, _N2),
    "n2d-standard": _by_vcpus("n2d-standard-{}", 4, (*_N2, 224)),
    "c3-standard": _by_vcpus("c3-standard-{}", 4, (4, 8, 22, 44, 88, 176)),
    # Azure (learn.microsoft.com size series): E96s_v5 has 672 GiB, not 8 per vCPU, at the
    # linear price (eastus 6.048 = 48 x E2s_v5 0.126).
    "Dsv5": _by_vcpus("Standard_D{}s_v5", 4, (2, 4, 8, 16, 32, 48, 64, 96)),
    "Esv5": _by_vcpus("Standard_E{}s_v5", 8, (2, 4, 8, 16, 20, 32, 48, 64, 96), {96: 672.0}),
    "Fsv2": _by_vcpus("Standard_F{}s_v2", 2, (2, 4, 8, 16, 32, 48, 64, 72)),
    # The small types gpufleet itself runs (bastions, gateway VMs) and their neighbours, from
    # scripts/cpu/<backend>-small.txt (scripts/cpu/libcloud_small.py). AWS t3 below large keeps
    # 2 vCPUs while the price halves with the memory (us-east-1: nano 0.0052, micro 0.0104).
    "t3-burst": CpuFamily("t3.{}", {"nano": (2, 0.5), "micro": (2, 1.0), "small": (2, 2.0),
                                    "medium": (2, 4.0)}, derive_by="memory"),
    # GCP shared-core E2: 2 vCPUs sharing 0.25 / 0.5 / 1 of a core (cloud.google.com/compute/
    # docs/general-purpose-machines#sharedcore); every size is read, none derived.
    "e2-shared": CpuFamily("e2-{}", {"micro": (2, 1.0), "small": (2, 2.0), "medium": (2, 4.0)},
                           derive_by="memory"),
    # Azure B-series v1 (learn.microsoft.com, B-series sizes): every size is read.
    "B1": CpuFamily("Standard_B1{}", {"ls": (1, 0.5), "s": (1, 1.0), "ms": (1, 2.0)},
                    derive_by="memory"),
}
CPU_TYPES = {fam.template.format(size): (name, size)
             for name, fam in CPU_FAMILIES.items() for size in fam.sizes}
CPU_DIR = Path(__file__).resolve().parent / "cpu"


def _per_size(fam: CpuFamily, known: dict[str, float], derive: bool) -> dict[str, float]:
    """The listed sizes' prices, and with `derive` every other size's, per vCPU from the
    smallest listed size."""
    if not known or not derive:
        return dict(known)
    smallest = min(known, key=fam.scale)
    per_unit = known[smallest] / fam.scale(smallest)
    return {size: known.get(size, per_unit * fam.scale(size)) for size in fam.sizes}


def cpu_rows(paths: list[Path]) -> list[dict[str, str]]:
    """gpuhunt v2 rows for the CPU families of one backend's extracts.

    A line is `type region on-demand | spot ... [@ zone-suffix ...]`; with zones (GCP) the
    rows are per zone (`us-central1-a`), else per region. A listed size keeps its source
    price; the others are derived from the smallest listed size of the region. A family and
    region that an earlier extract lists is taken from that extract only."""
    # (family, region) -> size -> price, for on-demand and spot; zones per (family, region)
    listed: dict[tuple[str, str], dict[str, float]] = {}
    spot: dict[tuple[str, str], dict[str, float]] = {}
    zones: dict[tuple[str, str], list[str]] = {}
    for path in paths:
        taken = set(listed)
        for line in path.read_text().splitlines():
            if not line.strip() or line.startswith("#"):
                continue
            head, _, rest = line.partition("|")
            spots, _, zone_list = rest.partition("@")
            itype, region, price = head.split()
            family, size = CPU_TYPES[itype]
            if (family, region) in taken:
                continue
            listed.setdefault((family, region), {})[size] = float(price)
            if spots.split():
                spot.setdefault((family, region), {})[size] = min(float(price),
                                                                  *map(float, spots.split()))
            if zone_list.split():
                zones[(family, region)] = sorted(
                    set(zones.get((family, region), [])) | set(zone_list.split()))
    out = []
    for (family, region), known in sorted(listed.items()):
        fam = CPU_FAMILIES[family]
        od = _per_size(fam, known, derive=True)
        sp = _per_size(fam, spot.get((family, region), {}), derive=fam.spot_linear)
        locations = [f"{region}-{z}" for z in zones.get((family, region), [])] or [region]
        for size, (vcpus, gib) in fam.sizes.items():
            itype = fam.template.format(size)
            prices = [("False", od[size])] + ([("True", sp[size])] if size in sp else [])
            for location in locations:
                for is_spot, price in prices:
                    out.append({"instance_name": itype, "location": location,
                                "price": _price(price), "cpu": str(vcpus), "memory": str(gib),
                                "gpu_count": "0", "gpu_name": "", "gpu_memory": "",
                                "spot": is_spot, "disk_size": "", "gpu_vendor": "",
                                "flags": "", "cpu_arch": "x86", "provider_data": "{}"})
    return out


LAMBDA_DIR = Path(__file__).resolve().parent / "lambda"


def _uncommented(path: Path) -> list[str]:
    return [ln for ln in path.read_text().splitlines() if ln and not ln.startswith("#")]


def lambda_rows() -> tuple[list[dict[str, str]], dict[str, tuple[str, int, int, str]]]:
    """Lambda Cloud: every type of scripts/lambda/instance-types.csv in every region of
    scripts/lambda/regions.txt (both name their source), on-demand only (Lambda sells no
    spot); no RDMA between instances through the API, one NIC each."""
    regions = _uncommented(LAMBDA_DIR / "regions.txt")
    rows, network = [], {}
    for r in csv.DictReader(_uncommented(LAMBDA_DIR / "instance-types.csv")):
        arch = r["cpu_arch"]
        for region in regions:
            rows.append({
                "instance_name": r["instance_type"], "location": region,
                "price": _price(r["price"]), "cpu": r["vcpus"],
                "memory": str(float(r["memory_gib"])), "gpu_count": r["gpu_count"],
                "gpu_name": r["gpu_name"], "gpu_memory": str(float(r["gpu_memory_gib"])),
                "spot": "False", "disk_size": "", "gpu_vendor": "nvidia",
                "flags": "lambda-arm" if arch == "arm" else "", "cpu_arch": arch,
                "provider_data": "{}"})
        network[r["instance_type"]] = ("none", 0, 1, "Lambda API: single instances, one "
                                       "public NIC (scripts/lambda/instance-types.csv)")
    return rows, network


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
    for backend in list(rows):
        # The SkyPilot extract (with spot prices) first, then the others by name.
        extracts = sorted(CPU_DIR.glob(f"{backend}*.txt"), key=lambda p: (p.stem != backend, p))
        rows[backend] += cpu_rows(extracts)
    rows["lambda"], lambda_network = lambda_rows()
    network.update({("lambda", itype): facts for itype, facts in lambda_network.items()})
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
                            "; CPU families from scripts/cpu/ (SkyPilot snapshot; Apache Libcloud"
                            " 3.9.1 price list); Lambda from scripts/lambda/ (SkyPilot catalog "
                            "v8 lambda snapshot)",
            "rows": {b: len(v) for b, v in rows.items()}}
    (OUT / "catalog.json").write_text(json.dumps(meta, indent=2) + "\n")
    print(meta["rows"])


if __name__ == "__main__":
    main(Path(sys.argv[1]))
