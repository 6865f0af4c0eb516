"""Extract on-demand prices of the small types gpufleet runs itself (bastions, gateway VMs)
from Apache Libcloud's bundled price list.

    pip download --no-deps apache-libcloud==3.9.1
    python scripts/cpu/libcloud_small.py apache_libcloud-3.9.1-py3-none-any.whl

writes scripts/cpu/aws-small.txt, gcp-small.txt and azure-small.txt in the format of the other
extracts (on-demand only: the bastions and gateways run on-demand). The wheel is read as a zip;
nothing is installed or imported from it.

- AWS (`ec2_linux`): t3.nano .. t3.medium. The scrape has the faults libcloud_aws.py
  describes: 0.0 means "not scraped", and some prices are 6-10 % high (us-east-1 t3.small
  0.022 against 2 x t3.micro 0.0104). AWS prices these sizes linearly in memory, so only the
  sizes at the region's lowest per-GiB rate are kept; build_catalog.py derives the others.
- GCP: derived from scripts/cpu/gcp.txt (the SkyPilot snapshot; Libcloud's e2 SKUs lack
  us-east1 and other regions): shared-core E2 bills a fraction of a vCPU (micro 0.25, small
  0.5, medium 1) plus its memory (1, 2, 4 GB) at the E2 rates, i.e. 1/16, 1/8 and 1/4 of
  e2-standard-4 (checked with Libcloud's us-central1 SKUs: 0.25 x 0.02181159 + 1 x
  0.00292353 = 0.00838 = 0.13402 / 16). The zones are those gcp.txt lists for e2-standard.
- Azure (`azure_linux`): Standard_B1ls, B1s, B1ms per region, as listed.
"""

from __future__ import annotations

import json
import re
import sys
import zipfile
from datetime import UTC, datetime
from pathlib import Path

HERE = Path(__file__).resolve().parent
AWS_SIZES = {"nano": 0.5, "micro": 1.0, "small": 2.0, "medium": 4.0}  # GiB
GCP_SHARES = {"micro": 1 / 16, "small": 1 / 8, "medium": 1 / 4}  # of e2-standard-4
AZURE_SIZES = {"ls": "standardb1ls", "s": "standardb1s", "ms": "standardb1ms"}
AZURE_GIB = {"ls": 0.5, "s": 1.0, "ms": 2.0}
TOLERANCE = 1.003  # the source rounds to 4 decimals
AWS_REGION = re.compile(r"^[a-z]{2}-[a-z]+-\d$")


def _aws(ec2: dict[str, dict[str, float]]) -> list[str]:
    by_region: dict[str, dict[str, float]] = {}
    for size in AWS_SIZES:
        for region, price in ec2.get(f"t3.{size}", {}).items():
            if price and AWS_REGION.match(region) and not region.startswith("us-gov-"):
                by_region.setdefault(region, {})[size] = float(price)
    out = []
    for region, prices in sorted(by_region.items()):
        rate = min(p / AWS_SIZES[s] for s, p in prices.items())
        out += [f"t3.{s} {region} {p} |" for s, p in prices.items()
                if p / AWS_SIZES[s] <= rate * TOLERANCE]
    return out


def _gcp() -> list[str]:
    """From the SkyPilot extract (gcp.txt): shared-core E2 bills a fraction of a vCPU and its
    memory at the E2 rates, so e2-micro (0.25 vCPU, 1 GB) is exactly 1/16 of e2-standard-4
    (4 vCPU, 16 GB), e2-small 1/8 and e2-medium 1/4, in every region (us-central1:
    0.13402 / 16 = 0.00838, Google's list price; Libcloud's e2 SKUs give the same there)."""
    out = []
    for line in (HERE / "gcp.txt").read_text().splitlines():
        if not line.startswith("e2-standard-4 "):
            continue
        head, _, rest = line.partition("|")
        _, region, price = head.split()
        zones = rest.partition("@")[2].strip()
        out += [f"e2-{size} {region} {round(float(price) * share, 6)} | @ {zones}"
                for size, share in GCP_SHARES.items()]
    return out


def _azure(linux: dict[str, dict[str, float]]) -> list[str]:
    """Public regions only (usgov*/usdod* are another cloud); a size above the region's
    lowest per-GiB rate by more than 2 % (B1s usgovtexas 0.015 beside B1ls 0.0065) is left
    for build_catalog.py to derive."""
    out = []
    regions = sorted(set().union(*(linux.get(k, {}) for k in AZURE_SIZES.values())))
    for region in regions:
        if region.startswith(("usgov", "usdod")):
            continue
        prices = {s: float(linux[k][region]) for s, k in AZURE_SIZES.items()
                  if linux.get(k, {}).get(region)}
        if not prices:
            continue
        rate = min(p / AZURE_GIB[s] for s, p in prices.items())
        out += [f"Standard_B1{s} {region} {p} |" for s, p in prices.items()
                if p / AZURE_GIB[s] <= rate * 1.02]
    return out


def main(wheel: Path) -> None:
    with zipfile.ZipFile(wheel) as z:
        pricing = json.loads(z.read("libcloud/data/pricing.json"))
    compute = pricing["compute"]
    updated = datetime.fromtimestamp(pricing["updated"], UTC).date().isoformat()
    parts = {"aws": ("ec2_linux", _aws(compute["ec2_linux"])),
             "gcp": ("", _gcp()),
             "azure": ("azure_linux", _azure(compute["azure_linux"]))}
    for backend, (key, lines) in parts.items():
        source = (f"Apache Libcloud {wheel.name},\n# libcloud/data/pricing.json ({key}, updated "
                  f"{updated})" if backend != "gcp" else
                  "scripts/cpu/gcp.txt (the SkyPilot\n# snapshot): 1/16, 1/8 and 1/4 of "
                  "e2-standard-4")
        head = [f"# {backend.upper()} small types (bastions, gateway VMs): {source}; "
                "on-demand only.",
                "# Written by scripts/cpu/libcloud_small.py (see there); read by "
                "scripts/build_catalog.py."]
        (HERE / f"{backend}-small.txt").write_text("\n".join(head + lines) + "\n")
        print(f"{backend}-small.txt: {len(lines)} prices")


if __name__ == "__main__":
    main(Path(sys.argv[1]))
