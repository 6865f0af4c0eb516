"""dstack volume files (`type: volume`): a new volume is one protected, encrypted disk of its
size in its zone; an existing one is only handed over; `export dstack` writes the external
volume file dstack attaches; dstack 0.22.5 agrees with what is refused."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from exportutil import export, write_export
from test_conformance import oracle

from gpufleet.cli import main
from gpufleet.input import validate_texts
from gpufleet.views.plan import render_plan_text

from planutil import TEST_KEY, by_type, plan_files, write

BACKENDS = (f"access:\n  ssh_public_key: {TEST_KEY}\nbackends:\n"
            "  - type: gcp\n    project_id: p1\n    ssh_cidrs: [203.0.113.0/24]\n"
            "  - type: aws\n    ssh_cidrs: [203.0.113.0/24]\n")
A4 = ("type: fleet\nname: a4\nnodes: 2\nplacement: cluster\nspot_policy: auto\n"
      "resources:\n  gpu: B200:8\nbackends: [gcp]\n")
CKPT = ("type: volume\nname: ckpt\nbackend: gcp\nregion: us-west2\n"
        "availability_zone: us-west2-c\nsize: 2TB\n")
DATA = ("type: volume\nname: data\nbackend: aws\nregion: us-east-1\n"
        "availability_zone: us-east-1a\nsize: 500\ntags: {team: ml}\n")
OLD = "type: volume\nname: old\nbackend: aws\nregion: us-east-1\nvolume_id: vol-0abc\n"


def files(tmp: Path, *volumes: str) -> list[str]:
    out = [write(tmp, "backends.yml", BACKENDS), write(tmp, "a4.yml", A4)]
    return out + [write(tmp, f"v{i}.dstack.yml", v) for i, v in enumerate(volumes)]


def test_a_volume_file_creates_one_protected_disk_of_its_size_in_its_zone(
        tmp_path: Path) -> None:
    report = plan_files(files(tmp_path, CKPT, DATA, OLD))
    [disk] = by_type(report, "gcp:compute/disk:Disk")
    assert (disk["name"], disk["inputs"]["zone"], disk["inputs"]["size"],
            disk["inputs"]["type"]) == ("ckpt", "us-west2-c", 2048, "pd-balanced")
    assert disk["protect"] is True
    assert disk["inputs"]["labels"]["gpufleet-volume"] == "ckpt"
    [ebs] = by_type(report, "aws:ebs/volume:Volume")
    assert (ebs["name"], ebs["inputs"]["availabilityZone"], ebs["inputs"]["size"],
            ebs["inputs"]["type"], ebs["inputs"]["encrypted"]) == \
        ("data", "us-east-1a", 500, "gp3", True)
    assert ebs["protect"] is True and ebs["inputs"]["tags"]["team"] == "ml"
    # an existing volume creates nothing
    assert not [r for r in report.resources if r["name"] == "old"]
    text = render_plan_text(report)
    assert "volume ckpt (" in text and "2048 GiB pd-balanced in gcp us-west2-c" in text
    assert "existing: vol-0abc in aws us-east-1; nothing is created" in text
    # priced: 2048 GiB x $0.10 and 500 GiB x $0.08 per GB-month
    assert round(report.bills["volume:ckpt"].total * 730, 2) == 204.80
    assert round(report.bills["volume:data"].total * 730, 2) == 40.00
    # the fleet beside them is byte-identical
    (tmp_path / "alone").mkdir()
    alone = plan_files(files(tmp_path / "alone"))
    assert [r for r in report.resources if r["name"].startswith("a4")] == \
        [r for r in alone.resources if r["name"].startswith("a4")]


@pytest.mark.parametrize(("text", "code", "message"), [
    ("type: volume\nname: az\nbackend: azure\nregion: eastus\nsize: 100GB\n", "V001",
     "dstack 0.22.5 has no azure volumes"),
    ("type: volume\nname: vol\nbackend: gcp\nregion: us-west2\navailability_zone: us-west2-c\n",
     "V002", "a new volume needs `size`"),
    ("type: volume\nbackend: gcp\nregion: us-west2\nvolume_id: d1\n", "V002",
     "volume has no `name`"),
    ("type: volume\nname: vol\nbackend: aws\nvolume_id: vol-1\n", "V002",
     "needs `region` (dstack: Field required)"),
    ("type: volume\nname: vol\nbackend: gcp\nregion: us-west2\navailability_zone: us-west2-c\n"
     "size: 0.5GB\n", "V015", "a volume holds at least 1GB"),
])
def test_volumes_gpufleet_cannot_build_are_refused_where_they_are_written(
        text: str, code: str, message: str) -> None:
    result = validate_texts({"v.dstack.yml": text})
    errors = [d for d in result.diagnostics if d.is_error]
    assert [d.code for d in errors] == [code] and message in errors[0].message


def test_dstack_agrees_on_azure_and_region_and_accepts_the_rest() -> None:
    items = {"azure": "type: volume\nname: az\nbackend: azure\nregion: eastus\nsize: 100GB\n",
             "no-region": "type: volume\nname: vol\nbackend: aws\nvolume_id: vol-1\n",
             "ckpt": CKPT, "data": DATA, "old": OLD, "no-zone": NO_ZONE}
    verdicts = oracle(items)
    assert {n: v["ok"] for n, v in verdicts.items()} == {
        "azure": False, "no-region": False, "ckpt": True, "data": True, "old": True,
        "no-zone": True}


NO_ZONE = "type: volume\nname: ckpt\nbackend: gcp\nregion: us-west2\nsize: 1TB\n"


def test_a_volume_without_a_zone_takes_its_fleets_zone_or_the_regions_first(
        tmp_path: Path) -> None:
    """As dstack's docs write a volume (no `availability_zone`): the zone of the fleets of its
    backend and region when they sit in one, else the region's first zone by name."""
    report = plan_files(files(tmp_path, NO_ZONE.replace("us-west2", "us-central1")))
    [disk] = by_type(report, "gcp:compute/disk:Disk")
    assert disk["inputs"]["zone"] == report.fleets[0].zone == "us-central1-b"
    text = render_plan_text(report)
    assert "zone:     us-central1-b: the zone of fleet(s) a4 in us-central1;" in text
    east = plan_files(files(tmp_path, NO_ZONE.replace("us-west2", "us-east1")))
    [disk] = by_type(east, "gcp:compute/disk:Disk")
    # us-east1 has no zone a: the catalog's zones of the region, first by name
    assert disk["inputs"]["zone"] == "us-east1-b"
    assert "the first zone of us-east1 by name (no gcp fleet of these files is in us-east1)" \
        in render_plan_text(east)


def test_a_volume_without_a_zone_between_fleets_in_two_zones_is_refused(
        tmp_path: Path) -> None:
    import dataclasses

    from gpufleet.codes import V022
    from gpufleet.compile.volumes import pick_zone
    from gpufleet.input import validate_texts as vt
    from gpufleet.offers.catalog import load_catalog

    a4 = plan_files(files(tmp_path)).fleets[0]
    other = dataclasses.replace(a4, name="b4", zone="us-central1-a")
    [vol] = vt({"v.yml": NO_ZONE.replace("us-west2", "us-central1")}).inputs.volumes
    zone, note, refusal = pick_zone(vol, [a4, other], load_catalog())
    assert zone is None and note is None and refusal is not None
    assert refusal.code == V022 and "sit in us-central1-a, us-central1-b" in refusal.message


def test_a_zone_outside_the_region_is_refused(tmp_path: Path,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    bad = CKPT.replace("us-west2-c", "us-east1-b")
    assert main(["plan", *files(tmp_path, bad)]) == 1
    assert "zone us-east1-b is not in region us-west2" in capsys.readouterr().err


def test_export_hands_dstack_the_disks_as_external_volumes(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    state = write_export(tmp_path / "state.json", export(files(tmp_path, CKPT, DATA, OLD)))
    out = tmp_path / "out"
    assert main(["export", "dstack", "--state", state, "--out", str(out)]) == 0
    capsys.readouterr()
    written = {p.name: p.read_text() for p in sorted(out.glob("volume-*"))}
    assert sorted(written) == ["volume-ckpt.dstack.yml", "volume-data.dstack.yml",
                               "volume-old.dstack.yml"]
    ckpt: dict[str, Any] = yaml.safe_load(written["volume-ckpt.dstack.yml"])
    assert ckpt == {"type": "volume", "name": "ckpt", "backend": "gcp", "region": "us-west2",
                    "availability_zone": "us-west2-c", "volume_id": ckpt["volume_id"]}
    assert ckpt["volume_id"]  # the created disk's name
    assert yaml.safe_load(written["volume-old.dstack.yml"])["volume_id"] == "vol-0abc"
    verdicts = oracle(written)
    assert all(v["ok"] for v in verdicts.values()), verdicts
    assert validate_texts(written).ok


def test_data_traffic_to_object_storage_stays_off_the_nat(tmp_path: Path) -> None:
    p5 = ("type: fleet\nname: p5\nnodes: 2\nplacement: cluster\nresources:\n  gpu: H100:8\n"
          "backends: [aws]\n")
    nd = ("type: fleet\nname: nd\nnodes: 2\nplacement: cluster\nresources:\n  gpu: H100:8\n"
          "backends: [azure]\n")
    backends = BACKENDS + ("  - type: azure\n    subscription_id: s1\n    tenant_id: t1\n"
                           "    regions: [eastus]\n    ssh_cidrs: [203.0.113.0/24]\n")
    report = plan_files([write(tmp_path, "backends.yml", backends), write(tmp_path, "a4.yml", A4),
                         write(tmp_path, "p5.yml", p5), write(tmp_path, "nd.yml", nd)])
    [endpoint] = by_type(report, "aws:ec2/vpcEndpoint:VpcEndpoint")
    inputs = endpoint["inputs"]
    assert inputs["vpcEndpointType"] == "Gateway"
    assert inputs["serviceName"] == f"com.amazonaws.{report.fleets[1].region}.s3"
    tables = {r["name"]: r for r in by_type(report, "aws:ec2/routeTable:RouteTable")}
    assert sorted(tables) == ["p5-vpc-private-rt", "p5-vpc-public-rt"]
    assert len(inputs["routeTableIds"]) == 2  # the private nodes' table and the public one
    [subnet] = by_type(report, "azure-native:network:Subnet")
    assert subnet["inputs"]["serviceEndpoints"] == [{"service": "Microsoft.Storage"}]
    # GCP: the main subnet keeps Private Google Access (Cloud Storage without the NAT)
    main = next(s for s in by_type(report, "gcp:compute/subnetwork:Subnetwork")
                if s["name"] == "a4-subnet")
    assert main["inputs"]["privateIpGoogleAccess"] is True


def test_a_volume_twice_and_a_zone_outside_its_region_have_codes_of_their_own() -> None:
    """V016 and V017 (they were V002): each condition names its own code."""
    from gpufleet.compile import compile_inputs
    from gpufleet.offers.catalog import load_catalog

    one = "type: volume\nname: vol\nbackend: gcp\nregion: us-west2\nsize: 100GB\n"
    texts = {"a.dstack.yml": one + "availability_zone: us-west2-c\n",
             "b.dstack.yml": one + "availability_zone: us-west2-c\n",
             "c.dstack.yml": one.replace("name: vol", "name: far")
             + "availability_zone: us-east1-b\n"}
    compiled = compile_inputs(validate_texts(texts).inputs, load_catalog())
    found = {d.code: d.message for d in compiled.diagnostics if d.is_error}
    assert "declared twice" in found["V016"]
    assert "is not in region us-west2" in found["V017"]
