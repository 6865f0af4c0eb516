"""Benchmark: offer selection time per fleet on the bundled catalog.

Prints the median time to select offers for each example fleet, and for a generated file of
100 fleets (mixed GPUs, backends, spot policies). The catalog is loaded once, as a CLI run
does; its load time is printed separately. Each timed selection starts with no query
answered (``matching.answered_queries``): the first fleet of a run to ask for its resources pays
that, the ones asking the same after it do not. Target (offers issue): <= 20 ms per fleet, median.

    python bench/offers.py [--rounds 20] [--smoke]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

from gpufleet.input.validate import validate_paths
from gpufleet.offers.catalog import _load_dir, load_catalog
from gpufleet.offers.matching import answered_queries
from gpufleet.offers.select import select

ROOT = Path(__file__).resolve().parent.parent
GPUS = ["H100:8", "A100:80GB:8", "B200:8", "L4", "24GB..:2", "A10G,A100", "H200:8", "1..4"]


def hundred_fleets(path: Path) -> None:
    docs = []
    for i in range(100):
        docs.append(
            f"type: fleet\nname: fleet-{i}\nnodes: {1 + i % 4}\n"
            f"placement: {'cluster' if i % 2 else 'any'}\n"
            f"spot_policy: {['auto', 'spot', 'on-demand'][i % 3]}\n"
            + (f"backends: [{['aws', 'gcp', 'azure'][i % 3]}]\n" if i % 5 else "")
            + (f"max_price: {20 + i}\n" if i % 7 == 0 else "")
            + f"resources:\n  gpu: {GPUS[i % len(GPUS)]}\n")
    path.write_text("---\n".join(docs))


def time_fleets(paths: list[str], rounds: int) -> list[tuple[str, float]]:
    inputs = validate_paths(paths).inputs
    catalog = load_catalog()
    out = []
    for fleet in inputs.fleets:
        select(fleet, catalog, inputs)  # warm per-catalog caches once, as a CLI run does
        samples = []
        for _ in range(rounds):
            answered_queries(catalog).clear()
            t = time.perf_counter()
            select(fleet, catalog, inputs)
            samples.append(time.perf_counter() - t)
        out.append((fleet.name, statistics.median(samples)))
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=20)
    ap.add_argument("--smoke", action="store_true",
                    help="one round: proves the benchmark still runs (CI)")
    args = ap.parse_args()
    if args.smoke:
        args.rounds = 1
    _load_dir.cache_clear()
    t = time.perf_counter()
    cat = load_catalog()
    print(f"catalog load: {(time.perf_counter() - t) * 1000:.1f} ms ({len(cat.rows)} rows, "
          f"{cat.describe()})")
    print("\nexample fleets (median of", args.rounds, "runs):")
    for name, sec in time_fleets([str(ROOT / "examples")], args.rounds):
        print(f"  {name:<12} {sec * 1000:7.2f} ms")
    with tempfile.TemporaryDirectory() as tmp:
        f = Path(tmp) / "fleets.yml"
        hundred_fleets(f)
        results = time_fleets([str(f)], max(3, args.rounds // 4))
    per = [s for _, s in results]
    print(f"\n100-fleet file: median {statistics.median(per) * 1000:.2f} ms per fleet, "
          f"p90 {sorted(per)[int(len(per) * 0.9)] * 1000:.2f} ms, "
          f"total {sum(per) * 1000:.0f} ms  (target <= 20 ms median)")


if __name__ == "__main__":
    main()
