"""CPU offers: fleets that allow no GPU (dstack's defaults) get the cheapest CPU machine of the
bundled catalog, compile without RDMA or placement, and `gpufleet catalog` lists the families."""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

import pytest

from gpufleet.input.validate import validate_paths
from gpufleet.offers.catalog import Catalog, Row, bundled_dir, load_catalog
from gpufleet.offers.select import select
from gpufleet.views.offers import catalog_summary, render_catalog_text

from planutil import by_type, named, plan_files, write


@pytest.fixture(scope="module")
def catalog() -> Catalog:
    return load_catalog(str(bundled_dir()))


def _cheapest_cpu(catalog: Catalog, cpus: int = 2, memory: float = 8) -> float:
    """What dstack's defaults (cpu 2.., memory 8GB..) buy on demand, from the rows."""
    return min(r.price for r in catalog.rows
               if not r.gpu_count and not r.spot and r.vcpus >= cpus and r.memory_gib >= memory)


@pytest.mark.parametrize("resources", [
    "resources:\n  gpu: 0\n",
    "",  # no resources at all: dstack's ResourcesSpec() defaults
    "resources:\n  gpu: 0..8\n",
])
def test_fleets_that_allow_no_gpu_get_the_cheapest_cpu_offer(
        tmp_path: Path, catalog: Catalog, resources: str) -> None:
    f = write(tmp_path, "f.yml", f"type: fleet\nname: cpu\nnodes: 1\n{resources}")
    validated = validate_paths([f])
    assert validated.ok, validated.diagnostics
    inputs = validated.inputs
    best = select(inputs.fleets[0], catalog, inputs, None).best
    assert best is not None
    assert best.gpu_count == 0 and not best.spot
    assert best.vcpus >= 2 and best.memory_gib >= 8
    assert best.price == _cheapest_cpu(catalog)


def test_cpu_and_memory_requests_and_spot_apply_to_cpu_offers(tmp_path: Path,
                                                              catalog: Catalog) -> None:
    f = write(tmp_path, "f.yml", "type: fleet\nname: cpu\nnodes: 1\nspot_policy: auto\n"
              "resources:\n  cpu: 4..\n  memory: 16GB..\n  gpu: 0\n")
    inputs = validate_paths([f]).inputs
    best = select(inputs.fleets[0], catalog, inputs, None).best
    assert best is not None and best.gpu_count == 0
    assert best.vcpus >= 4 and best.memory_gib >= 16
    assert best.price == min(r.price for r in catalog.rows if not r.gpu_count
                             and r.vcpus >= 4 and r.memory_gib >= 16)


def test_a_gpu_request_never_gets_a_cpu_machine(tmp_path: Path, catalog: Catalog) -> None:
    f = write(tmp_path, "f.yml", "type: fleet\nname: gpu1\nnodes: 1\nresources:\n  gpu: 1\n")
    inputs = validate_paths([f]).inputs
    offers = select(inputs.fleets[0], catalog, inputs, None).offers
    assert offers and all(o.gpu_count >= 1 for o in offers)


def test_cpu_fleet_compiles_without_efa_or_placement_on_a_plain_ubuntu_image(
        tmp_path: Path) -> None:
    report = plan_files([write(tmp_path, "f.yml",
                               "type: fleet\nname: cpu\nnodes: 2\nresources:\n  gpu: 0\n")])
    lt = named(report, "cpu-lt", "aws:ec2/launchTemplate:LaunchTemplate")["inputs"]
    assert [n.get("interfaceType") for n in lt["networkInterfaces"]] == [None]
    assert "groupName" not in lt["placement"]
    assert not by_type(report, "aws:ec2/placementGroup:PlacementGroup")
    ami = [c for c in report.lookups if c[0] == "aws:ec2/getAmi:getAmi"]
    assert any("ubuntu-jammy-22.04-amd64-server" in str(args) for _, args in ami)


def test_catalog_lists_cpu_families_apart_from_gpus(catalog: Catalog) -> None:
    summary = catalog_summary(catalog, None, None)
    cpu = {(s["backend"], s["family"]) for s in summary if s["gpu"] is None}
    assert ("aws", "m7i") in cpu and ("aws", "c6i") in cpu
    assert all(s["gpu"] for s in catalog_summary(catalog, "H100", None))
    text = render_catalog_text(catalog, summary)
    assert "CPU-only instances" in text and "m7i" in text


def test_bundled_cpu_rows_are_linear_in_size_and_spot_below_on_demand(
        catalog: Catalog) -> None:
    by_family: dict[tuple[str, str], list[Row]] = defaultdict(list)
    for r in catalog.rows:
        if not r.gpu_count:
            by_family[(r.instance_type.split(".")[0], r.location)].append(r)
    assert by_family
    for rows in by_family.values():
        od = [r for r in rows if not r.spot]
        per_cpu = [r.price / r.vcpus for r in od]
        # AWS prices these families per size unit; the source rounds to 4 decimals, so a
        # listed size may sit a hair off the line (t3a ap-south-1: large 0.0493, 2xlarge 0.1971)
        assert max(per_cpu) <= min(per_cpu) * 1.005, od
        for r in rows:
            if r.spot:
                match = next(o for o in od if o.instance_type == r.instance_type)
                assert r.price <= match.price
