"""Offer selection, table-driven over a small synthetic catalog in gpuhunt's CSV v2 layout:
every filter, each spot policy, zones, max_price, profiles, ordering and the explanations."""

from __future__ import annotations

import json
import re
import textwrap
from pathlib import Path

import pytest

from gpufleet.input.loader import LoadResult, load_text
from gpufleet.input.spec import Inputs
from gpufleet.input.validate import validate_loaded
from gpufleet.offers.catalog import Catalog, load_catalog
from gpufleet.offers.select import UnknownProfile, select, select_all

HEADER = ("instance_name,location,price,cpu,memory,gpu_count,gpu_name,gpu_memory,spot,"
          "disk_size,gpu_vendor,flags,cpu_arch,provider_data\n")
ROWS = {
    "aws": [
        "p5.48xlarge,us-east-1,55.04,192,2048,8,H100,80,False,,nvidia,,x86,{}",
        "p5.48xlarge,us-east-1,30.0,192,2048,8,H100,80,True,,nvidia,,x86,{}",
        "p5.48xlarge,us-west-2,55.04,192,2048,8,H100,80,False,,nvidia,,x86,{}",
        "p4d.24xlarge,us-east-1,21.96,96,1152,8,A100,40,False,,nvidia,,x86,{}",
        "p4d.24xlarge,us-east-1,2.47,96,1152,8,A100,40,True,,nvidia,,x86,{}",
        "g6.xlarge,us-east-1,0.80,4,16,1,L4,24,False,,nvidia,,x86,{}",
        "g6.xlarge,us-east-1,0.30,4,16,1,L4,24,True,,nvidia,,x86,{}",
        "t3.2xlarge,us-east-1,0.33,8,32,0,,,False,,,,x86,{}",
        "m7i.2xlarge,us-east-1,0.40,8,32,0,,,False,,,,x86,{}",
        "broken-row,us-east-1,notaprice,8,32,0,,,False,,,,x86,{}",
    ],
    "gcp": [
        "a4-highgpu-8g,us-west2-c,32.61,224,3968,8,B200,180,True,,nvidia,gcp-a4,x86,{}",
        "a4-highgpu-8g,us-central1-b,32.61,224,3968,8,B200,180,True,,nvidia,gcp-a4,x86,{}",
        "a3-highgpu-8g,us-central1-a,87.83,208,1872,8,H100,80,False,,nvidia,,x86,{}",
        "a3-highgpu-8g,us-central1-a,30.0,208,1872,8,H100,80,True,,nvidia,,x86,{}",
        "g2-standard-4,us-central1-a,0.70,4,16,1,L4,24,False,,nvidia,,x86,{}",
    ],
    "azure": [
        "Standard_ND96isr_H100_v5,eastus,98.32,96,1900,8,H100,80,False,,nvidia,,x86,{}",
        "Standard_NC24ads_A100_v4,eastus,3.67,24,220,1,A100,80,False,,nvidia,,x86,{}",
    ],
}
NETWORK = ("backend,instance_type,rdma,rdma_interfaces,nics,source\n"
           "aws,p5.48xlarge,efa,32,32,test\ngcp,a4-highgpu-8g,roce,8,10,test\n")


@pytest.fixture(scope="module")
def catalog(tmp_path_factory: pytest.TempPathFactory) -> Catalog:
    d = tmp_path_factory.mktemp("catalog")
    for backend, rows in ROWS.items():
        (d / f"{backend}.csv").write_text(HEADER + "\n".join(rows) + "\n")
    (d / "network.csv").write_text(NETWORK)
    (d / "catalog.json").write_text(json.dumps({"source": "test", "version": "t1",
                                                "date": "2026-01-01"}))
    return load_catalog(str(d))


def inputs(text: str) -> Inputs:
    """Each YAML document in a file of its own (dstack reads one configuration per file)."""
    result = LoadResult()
    for i, doc in enumerate(re.split(r"(?m)^---\n", textwrap.dedent(text))):
        if doc.strip():
            load_text(f"doc-{i}.yml", doc, result)
    validated = validate_loaded(result)
    assert validated.ok, validated.diagnostics
    return validated.inputs


FLEET = "type: fleet\nname: fl\nnodes: 2\n"


def offers_of(catalog: Catalog, body: str, profile: str | None = None) -> list[str]:
    sels = select_all(inputs(FLEET + textwrap.dedent(body)), catalog, profile)
    assert sels[0].error is None, sels[0].error
    return [f"{o.backend}/{o.location}/{o.instance_type}/{'spot' if o.spot else 'od'}"
            for o in sels[0].offers]


def test_catalog_skips_malformed_rows_and_reads_metadata(catalog: Catalog) -> None:
    assert catalog.skipped == 1
    assert catalog.describe().startswith("test catalog t1, 2026-01-01 (from --catalog ")
    assert catalog.facts("gcp", "a4-highgpu-8g").nics == 10


@pytest.mark.parametrize(("body", "expected"), [
    # resources -> gpuhunt QueryFilter; default spot_policy is on-demand
    ("resources: {gpu: H100:8}",
     ["aws/us-east-1/p5.48xlarge/od", "aws/us-west-2/p5.48xlarge/od",
      "gcp/us-central1-a/a3-highgpu-8g/od", "azure/eastus/Standard_ND96isr_H100_v5/od"]),
    ("resources: {gpu: A100:80GB}", ["azure/eastus/Standard_NC24ads_A100_v4/od"]),
    ("resources: {gpu: 24GB..:1}",
     ["gcp/us-central1-a/g2-standard-4/od", "aws/us-east-1/g6.xlarge/od",
      "azure/eastus/Standard_NC24ads_A100_v4/od"]),
    ("resources: {gpu: {total_memory: 600GB..}}",
     ["aws/us-east-1/p5.48xlarge/od", "aws/us-west-2/p5.48xlarge/od",
      "gcp/us-central1-a/a3-highgpu-8g/od", "azure/eastus/Standard_ND96isr_H100_v5/od"]),
    ("resources: {gpu: {name: A100, compute_capability: 8.0}, cpu: 90..}",
     ["aws/us-east-1/p4d.24xlarge/od"]),
    ("resources: {cpu: 8, memory: 32GB}",
     ["aws/us-east-1/t3.2xlarge/od", "aws/us-east-1/m7i.2xlarge/od"]),
    ("resources: {gpu: L4, memory: 16GB..}\nbackends: [gcp]",
     ["gcp/us-central1-a/g2-standard-4/od"]),
    ("resources: {gpu: H100:8}\nregions: [US-WEST-2]", ["aws/us-west-2/p5.48xlarge/od"]),
    ("resources: {gpu: H100:8}\ninstance_types: [A3-HIGHGPU-8G]",
     ["gcp/us-central1-a/a3-highgpu-8g/od"]),
    # spot policies
    ("resources: {gpu: H100:8}\nspot_policy: spot",
     ["aws/us-east-1/p5.48xlarge/spot", "gcp/us-central1-a/a3-highgpu-8g/spot"]),
    ("resources: {gpu: L4}\nspot_policy: auto",
     ["aws/us-east-1/g6.xlarge/spot", "gcp/us-central1-a/g2-standard-4/od",
      "aws/us-east-1/g6.xlarge/od"]),
    # zones: GCP rows are per zone; AWS rows are per region and get the AZ pinned
    ("resources: {gpu: B200:8}\nspot_policy: auto\navailability_zones: [us-west2-c]",
     ["gcp/us-west2-c/a4-highgpu-8g/spot"]),
    ("resources: {gpu: H100:8}\navailability_zones: [us-east-1b, us-east-1a]",
     ["aws/us-east-1a/p5.48xlarge/od"]),
    # max_price is per node-hour and inclusive
    ("resources: {gpu: H100:8}\nspot_policy: auto\nmax_price: 30",
     ["aws/us-east-1/p5.48xlarge/spot", "gcp/us-central1-a/a3-highgpu-8g/spot"]),
    # reservation keeps backends with reservations only (aws, gcp)
    ("resources: {gpu: H100:8}\nreservation: cr-1",
     ["aws/us-east-1/p5.48xlarge/od", "aws/us-west-2/p5.48xlarge/od",
      "gcp/us-central1-a/a3-highgpu-8g/od"]),
    # cluster placement drops t2/t3
    ("resources: {cpu: 8, memory: 32GB}\nplacement: cluster", ["aws/us-east-1/m7i.2xlarge/od"]),
])
def test_filters(catalog: Catalog, body: str, expected: list[str]) -> None:
    assert offers_of(catalog, body) == expected


def test_ties_break_on_backend_region_zone_type(catalog: Catalog) -> None:
    # aws p5 spot and gcp a3 spot both cost 30.0: backend name decides, every run.
    got = offers_of(catalog, "resources: {gpu: H100:8}\nspot_policy: spot")
    assert got == offers_of(catalog, "resources: {gpu: H100:8}\nspot_policy: spot")
    assert got[0].startswith("aws/") and got[1].startswith("gcp/")


def test_backends_file_sets_default_backends_and_regions(catalog: Catalog) -> None:
    text = (FLEET + "resources: {gpu: H100:8}\n---\n"
            "backends:\n  - type: aws\n    regions: [us-west-2]\n")
    sel = select_all(inputs(text), catalog)[0]
    assert [(o.backend, o.region) for o in sel.offers] == [("aws", "us-west-2")]


PROFILES = """
---
profiles:
  - name: cheap
    spot_policy: spot
    max_price: 31
  - name: base
    default: true
    spot_policy: auto
"""


def test_default_profile_fills_unset_fields(catalog: Catalog) -> None:
    got = offers_of(catalog, "resources: {gpu: L4}" + PROFILES)
    assert got[0] == "aws/us-east-1/g6.xlarge/spot"  # spot_policy auto from `base`


def test_named_profile_and_fleet_value_wins(catalog: Catalog) -> None:
    got = offers_of(catalog, "resources: {gpu: H100:8}" + PROFILES, profile="cheap")
    assert got == ["aws/us-east-1/p5.48xlarge/spot", "gcp/us-central1-a/a3-highgpu-8g/spot"]
    got = offers_of(catalog, "resources: {gpu: H100:8}\nspot_policy: on-demand\nmax_price: 60"
                    + PROFILES, profile="cheap")
    assert got == ["aws/us-east-1/p5.48xlarge/od", "aws/us-west-2/p5.48xlarge/od"]


def test_unknown_profile_is_a_key_error(catalog: Catalog) -> None:
    with pytest.raises(UnknownProfile, match="did you mean 'cheap'"):
        select_all(inputs(FLEET + PROFILES), catalog, "chep")


def _error(catalog: Catalog, body: str) -> tuple[str, str | None, int]:
    sel = select_all(inputs(FLEET + textwrap.dedent(body)), catalog)[0]
    assert sel.offers == () and sel.error is not None
    return sel.error.message, sel.error.hint, sel.error.line


@pytest.mark.parametrize(("body", "message", "line"), [
    ("resources: {gpu: B200:8}\nspot_policy: auto\nmax_price: 30",
     "no offer for fleet 'fl': 2 offer(s) match B200:8 but none is under max_price 30 "
     "(cheapest: gcp us-central1-b a4-highgpu-8g spot $32.61)", 6),
    ("resources: {gpu: B200:8}",
     "no offer for fleet 'fl': 2 offer(s) match B200:8 but none is on-demand "
     "(spot_policy: on-demand) (cheapest: gcp us-central1-b a4-highgpu-8g spot $32.61)", 2),
    ("resources: {gpu: B200:8}\nbackends: [aws, azure]",
     # B200 is offered as spot only: no on-demand offer misses only the backends
     "no offer for fleet 'fl': 2 offer(s) match B200:8 but none is on backends aws, azure", 5),
    ("resources: {gpu: H100:8}\nbackends: []",
     "no offer for fleet 'fl': 6 offer(s) match H100:8 but none is on a backend: `backends: "
     "[]` lists none, so dstack finds no offer either (cheapest: aws us-east-1 p5.48xlarge "
     "on-demand $55.04)", 5),
    ("resources: {gpu: H100:8}\nregions: [eu-west-1]",
     # an on-demand fleet is shown the cheapest on-demand offer elsewhere, never a spot one
     "no offer for fleet 'fl': 6 offer(s) match H100:8 but none is in regions eu-west-1 "
     "(cheapest: aws us-east-1 p5.48xlarge on-demand $55.04)", 5),
    ("resources: {gpu: B200:8}\nspot_policy: spot\navailability_zones: [us-east1-b]",
     "no offer for fleet 'fl': 2 offer(s) match B200:8 but none is in availability_zones "
     "us-east1-b (cheapest: gcp us-central1-b a4-highgpu-8g spot $32.61)", 6),
    ("resources: {gpu: H100:8}\nreservation: r1\n---\nbackends:\n  - type: azure\n"
     "    subscription_id: s\n    tenant_id: t",
     "no offer for fleet 'fl': 1 offer(s) match H100:8 but none is on a backend with "
     "reservations (aws, gcp, or one declared in the backends file) (cheapest: azure eastus "
     "Standard_ND96isr_H100_v5 on-demand $98.32)", 5),
    ("resources: {gpu: H100:8}\ninstance_types: [p5e.48xlarge]",
     "no offer for fleet 'fl': 6 offer(s) match H100:8 but none is one of instance_types "
     "p5e.48xlarge (cheapest: aws us-east-1 p5.48xlarge on-demand $55.04)", 5),
    ("resources: {cpu: 8, memory: 32GB}\nplacement: cluster\ninstance_types: [t3.2xlarge]",
     "no offer for fleet 'fl': 1 offer(s) match cpu 8, memory 32GB but none can join a cluster "
     "placement group (not t2/t3/t3a or GCP e2) (cheapest: aws us-east-1 t3.2xlarge on-demand "
         "$0.33)", 5),
])
def test_no_offer_names_the_filter(catalog: Catalog, body: str, message: str,
                                   line: int) -> None:
    got, _, got_line = _error(catalog, body)
    assert got == message
    assert got_line == line  # the YAML key of the filter that removed the last offers


def test_no_match_explains_unknown_gpu_and_shapes(catalog: Catalog) -> None:
    message, hint, line = _error(catalog, "resources: {gpu: B20:8}")
    assert message == "no offer for fleet 'fl': no catalog offer matches B20:8"
    assert hint is not None and "did you mean 'B200'?" in hint and line == 4
    message, hint, _ = _error(catalog, "resources: {gpu: H100:16}")
    assert hint == "the catalog offers 8xH100 (80GB)"


def test_profile_origin_is_named_in_hint(catalog: Catalog) -> None:
    sel = select_all(inputs(FLEET + "resources: {gpu: B200:8}" + PROFILES), catalog, "cheap")[0]
    assert sel.error is not None and sel.error.hint is not None
    assert sel.error.hint.startswith("`max_price` comes from profile 'cheap'")


def test_bundled_catalog_a4_example() -> None:
    root = Path(__file__).resolve().parent.parent
    text = (root / "examples" / "fleets" / "gcp-a4.dstack.yml").read_text()
    sel = select(inputs(text).fleets[0], load_catalog())
    assert sel.best is not None
    assert (sel.best.backend, sel.best.zone, sel.best.instance_type, sel.best.spot) == (
        "gcp", "us-west2-c", "a4-highgpu-8g", True)
    assert (sel.best.rdma, sel.best.rdma_interfaces, sel.best.nics) == ("roce", 8, 10)


def test_bundled_catalog_never_offers_a4_on_demand() -> None:
    cat = load_catalog()
    a4 = [r for r in cat.rows if r.instance_type == "a4-highgpu-8g"]
    assert a4 and not any(not r.spot for r in a4)
    assert {r.backend for r in cat.rows} == {"aws", "gcp", "azure", "lambda"}
