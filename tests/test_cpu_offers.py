"""CPU offers: fleets that allow no GPU (dstack's defaults) get the cheapest CPU machine of the
bundled catalog, compile without RDMA or placement, and `gpufleet catalog` lists the families."""

from __future__ import annotations

import importlib.util
import sys
from collections import defaultdict
from pathlib import Path
from types import ModuleType

import pytest

from gpufleet.input.validate import validate_paths
from gpufleet.offers.catalog import Catalog, Row, bundled_dir, load_catalog
from gpufleet.offers.select import select
from gpufleet.views.offers import catalog_summary, render_catalog_text

from planutil import ROOT, by_type, named, plan_files, write

BUILD = ROOT / "scripts" / "build_catalog.py"


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
    assert {("aws", "m7i"), ("aws", "c6i"), ("gcp", "e2-standard"), ("azure", "Dsv5")} <= cpu
    assert all(s["gpu"] for s in catalog_summary(catalog, "H100", None))
    text = render_catalog_text(catalog, summary)
    assert "CPU-only instances" in text and "m7i" in text


def test_bundled_cpu_rows_are_linear_in_size_and_spot_below_on_demand(
        catalog: Catalog) -> None:
    build = _build_script()
    # The small shapes (t3.nano, e2-micro, Standard_B1ls, ...) keep their vCPUs while the
    # price follows the memory: linear in memory, not in vCPUs.
    by_memory = {fam.template.format(size): name for name, fam in build.CPU_FAMILIES.items()
                 if fam.derive_by == "memory" for size in fam.sizes}
    by_family: dict[tuple[str, str, str], list[Row]] = defaultdict(list)
    for r in catalog.rows:
        if not r.gpu_count:
            family = by_memory.get(r.instance_type, r.family)
            by_family[(r.backend, family, r.location)].append(r)
    assert {b for b, _, _ in by_family} == {"aws", "gcp", "azure"}
    small = 0
    for (_, family, _), rows in by_family.items():
        od = [r for r in rows if not r.spot]
        assert len({r.instance_type for r in od}) > 1 or family in build.CPU_FAMILIES, rows
        if family in by_memory.values():
            small += 1
            per_unit = [r.price / r.memory_gib for r in od]
        else:
            per_unit = [r.price / r.vcpus for r in od]
        # Every family is priced per vCPU (the small shapes per GiB) within a location; the
        # sources round to 4-5 decimals, so a listed size may sit a hair off the line (t3a
        # ap-south-1: large 0.0493, 2xlarge 0.1971; Standard_B1ms 0.0207 vs B1s 0.0104)
        assert max(per_unit) <= min(per_unit) * 1.006 + 1e-9 or (
            family in by_memory.values() and max(per_unit) <= min(per_unit) * 1.02), od
        for r in rows:
            if r.spot:
                match = next(o for o in od if o.instance_type == r.instance_type)
                assert r.price <= match.price
    assert small > 100  # t3 nano..medium, e2-micro..medium, B1ls..B1ms in many locations


def _build_script() -> ModuleType:
    spec = importlib.util.spec_from_file_location("build_catalog", BUILD)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["build_catalog"] = module
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("backend", ["aws", "gcp", "azure"])
def test_bundled_cpu_rows_are_exactly_what_the_extracts_build(catalog: Catalog,
                                                              backend: str) -> None:
    """The CPU rows in the package come from scripts/cpu/ and nothing else: rebuilding them
    from the extracts gives the same rows, price for price."""
    build = _build_script()
    extracts = sorted(BUILD.parent.joinpath("cpu").glob(f"{backend}*.txt"),
                      key=lambda p: (p.stem != backend, p))
    assert extracts
    built = {(r["instance_name"], r["location"], r["spot"] == "True"): float(r["price"])
             for r in build.cpu_rows(extracts)}
    bundled = {(r.instance_type, r.location, r.spot): r.price
               for r in catalog.rows if r.backend == backend and not r.gpu_count}
    assert built == bundled


@pytest.mark.parametrize(("backend", "family"), [
    ("gcp", "e2-standard"), ("gcp", "n2-standard"), ("gcp", "n2d-standard"),
    ("gcp", "c3-standard"), ("azure", "Dsv5"), ("azure", "Esv5"), ("azure", "Fsv2"),
    ("aws", "m6i"), ("aws", "c7i"), ("aws", "r6i"), ("aws", "t3"),
])
def test_every_backend_has_its_common_cpu_families(catalog: Catalog, backend: str,
                                                   family: str) -> None:
    rows = [r for r in catalog.rows if r.backend == backend and r.family == family]
    assert rows and all(r.gpu_count == 0 for r in rows)
    assert any(not r.spot for r in rows)


@pytest.mark.parametrize("backend", ["gcp", "azure"])
def test_a_cpu_fleet_on_gcp_or_azure_gets_a_cpu_machine_there(
        tmp_path: Path, catalog: Catalog, backend: str) -> None:
    f = write(tmp_path, "f.yml", f"type: fleet\nname: cpu\nnodes: 1\nbackends: [{backend}]\n"
              "resources:\n  gpu: 0\n")
    inputs = validate_paths([f]).inputs
    best = select(inputs.fleets[0], catalog, inputs, None).best
    assert best is not None and best.backend == backend and best.gpu_count == 0
    assert best.price == min(r.price for r in catalog.rows
                             if r.backend == backend and not r.gpu_count and not r.spot
                             and r.vcpus >= 2 and r.memory_gib >= 8)


def test_gcp_cpu_node_boots_plain_ubuntu_and_live_migrates(tmp_path: Path) -> None:
    report = plan_files([write(tmp_path, "f.yml", "type: fleet\nname: cpu\nnodes: 1\n"
                               "backends: [gcp]\nresources:\n  gpu: 0\n")])
    node = named(report, "cpu-node-0", "gcp:compute/instance:Instance")["inputs"]
    image = node["bootDisk"]["initializeParams"]["image"]
    assert image == "projects/ubuntu-os-cloud/global/images/family/ubuntu-2204-lts"
    assert "guestAccelerators" not in node
    assert node["scheduling"]["onHostMaintenance"] == "MIGRATE"


def test_gcp_cpu_cluster_takes_no_e2_and_keeps_terminate_under_compact_placement(
        tmp_path: Path, catalog: Catalog) -> None:
    f = write(tmp_path, "f.yml", "type: fleet\nname: cpuc\nnodes: 2\nplacement: cluster\n"
              "backends: [gcp]\nresources:\n  gpu: 0\n")
    inputs = validate_paths([f]).inputs
    offers = select(inputs.fleets[0], catalog, inputs, None).offers
    assert offers and not any(o.instance_type.startswith("e2-") for o in offers)
    report = plan_files([f])
    node = named(report, "cpuc-node-0", "gcp:compute/instance:Instance")["inputs"]
    assert node["scheduling"]["onHostMaintenance"] == "TERMINATE"
    assert node["resourcePolicies"]


def test_azure_cpu_node_boots_canonical_ubuntu(tmp_path: Path) -> None:
    report = plan_files([write(tmp_path, "f.yml", "type: fleet\nname: cpu\nnodes: 1\n"
                               "backends: [azure]\nresources:\n  gpu: 0\n")])
    vm = named(report, "cpu-node-0", "azure-native:compute:VirtualMachine")["inputs"]
    ref = vm["storageProfile"]["imageReference"]
    assert (ref["publisher"], ref["offer"]) == ("Canonical", "0001-com-ubuntu-server-jammy")
    assert not by_type(report, "azure-native:compute:VirtualMachineScaleSet")
