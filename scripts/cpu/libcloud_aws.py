"""Extract AWS CPU on-demand prices from Apache Libcloud's bundled price list.

    pip download --no-deps apache-libcloud==3.9.1
    python scripts/cpu/libcloud_aws.py apache_libcloud-3.9.1-py3-none-any.whl \
        > scripts/cpu/aws-libcloud.txt

Libcloud ships `libcloud/data/pricing.json` (EC2 Linux on-demand USD/hour per type and region,
scraped from AWS's price list; its `updated` field dates it) and
`libcloud/compute/constants/ec2_instance_types.py` (vCPUs and memory per type). The wheel is
read as a zip; nothing is installed or imported from it. The output has the format of
scripts/cpu/aws.txt without spot prices (Libcloud has none). Each type's vCPUs and memory are
checked against CPU_FAMILIES of scripts/build_catalog.py; a mismatch stops the extract.

Two faults of the scrape are handled here:
- A price of 0.0 means "not scraped" (m6i.large in ap-northeast-2 is 0.0 though the type is
  sold there), so it gives no row.
- About a third of the prices are 6-10 % above the rest of their family in the region
  (m7i.xlarge us-east-1 0.22176 = 1.1 x 0.2016): most likely the dedicated-tenancy price,
  which the scrape does not tell apart. AWS prices these families linearly in size, so the
  lowest per-size rate of a family in a region is the shared-tenancy rate; a size priced
  above it is left out, and scripts/build_catalog.py derives it from the sizes kept. Checked
  against the SkyPilot extract (scripts/cpu/aws.txt) on every type and region both have,
  with Libcloud 3.9.1: the rebuilt price agrees within 0.3 % on 180 of 181; c7i in
  eu-south-2 is 5 % above SkyPilot's on every size. Where aws.txt lists a family and region
  it wins (build_catalog.py reads aws.txt first), so Libcloud only fills the regions the
  SkyPilot extract lacks. With t3's three sizes a region whose every size was scraped high
  would pass unnoticed.

GovCloud regions (another partition, another account) and Local Zones (us-west-2-lax-1) are
left out.
"""

from __future__ import annotations

import ast
import json
import re
import sys
import zipfile
from datetime import UTC, datetime
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from build_catalog import CPU_FAMILIES

FAMILIES = ("m6i", "c7i", "r6i", "t3")
TOLERANCE = 1.003  # the source rounds to 4 decimals
REGION = re.compile(r"^[a-z]{2}-[a-z]+-\d$")


def _instance_types(source: str) -> dict[str, dict[str, object]]:
    for node in ast.parse(source).body:
        if isinstance(node, ast.Assign) and any(
                isinstance(t, ast.Name) and t.id == "INSTANCE_TYPES" for t in node.targets):
            value: dict[str, dict[str, object]] = ast.literal_eval(node.value)
            return value
    raise SystemExit("INSTANCE_TYPES not found in ec2_instance_types.py")


def main(wheel: Path) -> None:
    with zipfile.ZipFile(wheel) as z:
        pricing = json.loads(z.read("libcloud/data/pricing.json"))
        specs = _instance_types(
            z.read("libcloud/compute/constants/ec2_instance_types.py").decode())
    ec2 = pricing["compute"]["ec2_linux"]
    updated = datetime.fromtimestamp(pricing["updated"], UTC).date().isoformat()
    print(f"# AWS CPU extract: Apache Libcloud {wheel.name}, libcloud/data/pricing.json")
    print(f"# (ec2_linux, updated {updated}); on-demand only, no spot. Written by")
    print("# scripts/cpu/libcloud_aws.py; read by scripts/build_catalog.py after aws.txt.")
    kept: list[str] = []
    dropped = 0
    for family in FAMILIES:
        fam = CPU_FAMILIES[family]
        # region -> size -> price, for the sizes and regions with a price
        by_region: dict[str, dict[str, float]] = {}
        for size, shape in fam.sizes.items():
            itype = fam.template.format(size)
            spec = specs[itype]
            extra = spec["extra"]
            assert isinstance(extra, dict)
            vcpus, gib = int(extra["vcpu"]), int(str(spec["ram"])) / 1024
            if (vcpus, gib) != shape:
                raise SystemExit(f"{itype}: Libcloud says {vcpus} vCPU / {gib} GiB, "
                                 "CPU_FAMILIES disagrees")
            for region, price in ec2.get(itype, {}).items():
                if price and REGION.match(region) and not region.startswith("us-gov-"):
                    by_region.setdefault(region, {})[size] = float(price)
        for region, prices in sorted(by_region.items()):
            rate = min(p / fam.sizes[s][0] for s, p in prices.items())
            for size in sorted(prices, key=lambda s: fam.sizes[s][0]):
                if prices[size] / fam.sizes[size][0] <= rate * TOLERANCE:
                    kept.append(f"{family}.{size} {region} {prices[size]} |")
                else:
                    dropped += 1
    print(f"# {len(kept)} prices kept; {dropped} above their family's rate in the region left "
          "out (see the script).")
    print("\n".join(kept))


if __name__ == "__main__":
    main(Path(sys.argv[1]))
