"""`gpufleet preflight` (and `up`, which runs it first): reservations, zones and quotas read
from the clouds before anything is deployed.

AWS runs against moto (the EC2 API emulated in-process: instance type offerings, instance
types, running instances). moto 5.2.5 does not emulate DescribeCapacityReservations
(NotImplementedError) nor EC2's Service Quotas, so those two calls go through botocore's
Stubber, which checks each request's parameters and each answer's shape against the services'
own API models. GCP and Azure answer from the REST bodies in tests/cases/preflight (see its
README)."""

from __future__ import annotations

import copy
import dataclasses
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3
import pytest
from botocore.stub import Stubber
from click.testing import CliRunner
from moto import mock_aws

from gpufleet.backends.aws.live import AwsProbe, quota_code
from gpufleet.backends.azure.live import AzureProbe
from gpufleet.backends.gcp.live import GcpProbe, gpu_family, gpu_metric
from gpufleet.cli import cli
from gpufleet.live import UpError, UpOptions, deploy
from gpufleet.live.preflight import (
    MissingAccess,
    Need,
    PreflightReport,
    Probe,
    run_preflight,
    stack_needs,
)
from gpufleet.live.probes import default_probes

from planutil import TEST_KEY, write

CASES = Path(__file__).parent / "cases" / "preflight"
SUB = "11111111-2222-3333-4444-555555555555"
GROUP = (f"/subscriptions/{SUB}/resourceGroups/rg/providers/Microsoft.Compute/"
         "capacityReservationGroups/nd-group")
BACKENDS = f"""backends:
  - type: gcp
    project_id: p1
    ssh_cidrs: [203.0.113.0/24]
  - type: aws
    ssh_cidrs: [203.0.113.0/24]
  - type: azure
    subscription_id: {SUB}
    tenant_id: 00000000-0000-0000-0000-000000000000
    regions: [eastus]
    ssh_cidrs: [203.0.113.0/24]
access:
  ssh_public_key: {TEST_KEY}
reservations:
  - name: nd-group
    backend: azure
    zone: eastus
    instance_type: Standard_ND96isr_H100_v5
    count: 4
    kind: capacity-reservation-group
    id: {GROUP}
"""
FLEETS = {
    "a4-res": "nodes: 2\nplacement: cluster\nreservation: my-a4-res\n"
              "availability_zones: [us-west2-c]\nresources:\n  gpu: B200:8\nbackends: [gcp]\n",
    "h100": "nodes: 2\nresources:\n  gpu: H100:8\nbackends: [gcp]\n",
    "h100b": "nodes: 2\nresources:\n  gpu: H100:8\nbackends: [gcp]\n",
    "p5-res": "nodes: 2\nplacement: cluster\nreservation: cr-0123456789abcdef0\n"
              "resources:\n  gpu: H100:8\nbackends: [aws]\nregions: [us-east-1]\n",
    "p5": "nodes: 2\nplacement: cluster\nresources:\n  gpu: H100:8\nbackends: [aws]\n"
          "regions: [us-east-1]\n",
    "nd-res": "nodes: 2\nplacement: cluster\nreservation: nd-group\nresources:\n"
              "  gpu: H100:8\nbackends: [azure]\n",
    "nd": "nodes: 2\nplacement: cluster\nresources:\n  gpu: H100:8\nbackends: [azure]\n",
}


def stack(tmp: Path, *names: str, running: dict[str, int] | None = None,
          edit: dict[str, str] | None = None) -> list[Need]:
    """The Needs of a stack of the named fleets, locked and compiled like `pulumi up`."""
    files = [write(tmp, "backends.yml", BACKENDS)]
    for name in names:
        body = (edit or {}).get(name, FLEETS[name])
        files.append(write(tmp, f"{name}.yml", f"type: fleet\nname: {name}\n{body}"))
    r = CliRunner().invoke(cli, ["lock", *files])
    assert r.exit_code == 0, r.output
    return stack_needs(files, None, None, str(tmp / "gpufleet.lock"), running or {})


def recorded(cloud: str) -> dict[str, Any]:
    return dict(json.loads((CASES / f"{cloud}.json").read_text()))


def getter(answers: dict[str, Any], seen: list[str] | None = None) -> Any:
    def get(url: str) -> tuple[int, Any]:
        if seen is not None:
            seen.append(url)
        if url not in answers:
            return 404, {"error": {"code": 404, "message": f"not found: {url}"}}
        status, body = answers[url]
        return int(status), copy.deepcopy(body)
    return get


def verdicts(report: PreflightReport) -> dict[tuple[str, str], str]:
    return {(c.fleet, c.what): c.verdict for c in report.checks}


def detail(report: PreflightReport, fleet: str, what: str) -> str:
    return next(c.detail for c in report.checks if (c.fleet, c.what) == (fleet, what))


# --- GCP -------------------------------------------------------------------------------

GCP = "https://compute.googleapis.com/compute/v1/projects/p1"
A4_RES = f"{GCP}/zones/us-west2-c/reservations/my-a4-res"


def gcp_check(needs: list[Need], answers: dict[str, Any]) -> PreflightReport:
    return run_preflight("dev", needs, {"gcp": GcpProbe(getter(answers))})


def test_gcp_a4_reservation_with_room_passes_and_its_quota_is_not_counted_again(
        tmp_path: Path) -> None:
    seen: list[str] = []
    needs = stack(tmp_path, "a4-res")
    report = run_preflight("dev", needs, {"gcp": GcpProbe(getter(recorded("gcp"), seen))})
    assert verdicts(report) == {("a4-res", "offered"): "ok", ("a4-res", "reservation"): "ok",
                                ("a4-res", "topology"): "ok", ("a4-res", "quota"): "skip"}
    assert report.ok and report.exit_code == 0
    # its two blocks, before anything launches (reservationBlocks.list)
    assert detail(report, "a4-res", "topology") == (
        "my-a4-res sits under europe-cl-1/3d3e0b7a52d9; europe-cl-1/9a51c0f2e6b4: spread "
        "1 spine(s), 2 block(s)")
    assert "projects/p1/reservations/my-a4-res: 2/4 free, 2 to start" in \
        detail(report, "a4-res", "reservation")
    # the region's B200 quota is 0 in the answers: with a reservation it is not asked
    assert not any("/regions/" in u for u in seen)


@pytest.mark.parametrize(("change", "running", "expect"), [
    (lambda r: r["specificReservation"].update(inUseCount="3"), 0,
     "1 of its 4 instances are free, 2 more are needed"),
    (lambda r: r["specificReservation"].update(inUseCount="3"), 1, None),  # 1 runs already
    (lambda r: r.update(zone=f"{GCP}/zones/us-west2-b"), 0,
     "it is in us-west2-b, the plan is in us-west2-c"),
    (lambda r: r.update(status="CREATING"), 0, "it is CREATING, not active"),
    (lambda r: r["specificReservation"]["instanceProperties"].update(
        machineType="a3-ultragpu-8g"), 0, "it holds a3-ultragpu-8g, the plan wants a4"),
])
def test_gcp_reservation_problems_fail_the_check(tmp_path: Path, change: Any, running: int,
                                                  expect: str | None) -> None:
    answers = recorded("gcp")
    change(answers[A4_RES][1])
    report = gcp_check(stack(tmp_path, "a4-res", running={"a4-res": running}), answers)
    if expect is None:
        assert report.ok, report.lines()
        assert "1/4 free, 1 to start (1 running already)" in \
            detail(report, "a4-res", "reservation")
    else:
        assert verdicts(report)[("a4-res", "reservation")] == "fail"
        assert expect in detail(report, "a4-res", "reservation")
        assert report.exit_code == 1


def test_gcp_unknown_reservation_and_shared_reservation_path(tmp_path: Path) -> None:
    answers = recorded("gcp")
    del answers[A4_RES]
    report = gcp_check(stack(tmp_path, "a4-res"), answers)
    assert "gcp has no reservation 'my-a4-res'" in detail(report, "a4-res", "reservation")
    # dstack accepts projects/P/reservations/N: a shared reservation of another project
    shared = FLEETS["a4-res"].replace("my-a4-res", "projects/host/reservations/big")
    answers = recorded("gcp")
    body = answers.pop(A4_RES)
    answers["https://compute.googleapis.com/compute/v1/projects/host/zones/us-west2-c/"
            "reservations/big"] = body
    report = gcp_check(stack(tmp_path, "a4-res", edit={"a4-res": shared}), answers)
    assert verdicts(report)[("a4-res", "reservation")] == "ok", report.lines()
    assert detail(report, "a4-res", "reservation").startswith(
        "projects/host/reservations/big:")


QUOTA_INFO = ("https://cloudquotas.googleapis.com/v1/projects/p1/locations/global/services/"
              "compute.googleapis.com/quotaInfos/GPUS-PER-GPU-FAMILY-per-project-region")


def quota_info(limit: str, family: str = "NVIDIA_H100") -> tuple[int, Any]:
    """QuotaInfo as the Cloud Quotas API v1 answers it: one entry per dimension set."""
    return 200, {"name": "projects/p1/locations/global/services/compute.googleapis.com/"
                         "quotaInfos/GPUS-PER-GPU-FAMILY-per-project-region",
                 "quotaId": "GPUS-PER-GPU-FAMILY-per-project-region",
                 "service": "compute.googleapis.com", "dimensions": ["region", "gpu_family"],
                 "dimensionsInfos": [
                     {"dimensions": {"region": "us-central1", "gpu_family": family},
                      "details": {"value": limit}},
                     {"dimensions": {"region": "us-central1", "gpu_family": "NVIDIA_L4"},
                      "details": {"value": "999"}}]}


def test_gcp_h100_quota_comes_from_cloud_quotas_for_regions_get_has_none(
        tmp_path: Path) -> None:
    """regions.get lists no on-demand H100/H200/B200 quota (dstack 0.22.5 skips them for
    that reason, core/backends/gcp/compute.py `_has_gpu_quota`): the limit is read from Cloud
    Quotas' GPUS-PER-GPU-FAMILY-per-project-region for the fleet's gpu_family, fleets of a
    region counted together; it gives no usage, so only a limit under the ask fails."""
    needs = stack(tmp_path, "h100", "h100b")
    assert {(n.region, n.instance_type) for n in needs} == {("us-central1", "a3-edgegpu-8g")}
    assert gpu_family(needs[0]) == "NVIDIA_H100"
    answers = recorded("gcp")
    answers[QUOTA_INFO] = quota_info("24")  # 2 fleets x 2 nodes x 8 GPUs = 32 wanted
    report = gcp_check(needs, answers)
    [regional] = [c for c in report.checks if c.detail.startswith(
        "NVIDIA_H100_GPUS in us-central1")]
    assert (regional.fleet, regional.verdict) == ("h100, h100b", "fail")
    assert "limit 24, 32 GPUs more: 8 GPUs short even with none in use" in regional.detail
    # a limit that covers the ask is no verdict: the GPUs already running count too
    answers[QUOTA_INFO] = quota_info("64")
    report = gcp_check(needs, answers)
    [regional] = [c for c in report.checks if c.detail.startswith(
        "NVIDIA_H100_GPUS in us-central1")]
    assert regional.verdict == "skip" and "limit 64 covers the 32 GPUs asked" in \
        regional.detail and "gives no usage" in regional.detail
    # the project-wide GPU quota is still read from projects.get (64 - 8 = 56 >= 32)
    glob = [c for c in report.checks if c.detail.startswith("GPUS_ALL_REGIONS")]
    assert [c.verdict for c in glob] == ["ok"]


def test_gcp_h100_quota_that_cannot_be_read_is_no_verdict_not_a_pass(tmp_path: Path) -> None:
    answers = recorded("gcp")  # no Cloud Quotas answer: 404
    report = gcp_check(stack(tmp_path, "h100"), answers)
    [regional] = [c for c in report.checks if c.detail.startswith(
        "NVIDIA_H100_GPUS in us-central1")]
    assert regional.verdict == "skip" and "Cloud Quotas" in regional.detail
    answers[QUOTA_INFO] = quota_info("64", family="NVIDIA_H100_MEGA")  # not this family
    report = gcp_check(stack(tmp_path, "h100"), answers)
    [regional] = [c for c in report.checks if c.detail.startswith(
        "NVIDIA_H100_GPUS in us-central1")]
    assert regional.verdict == "skip" and "lists no NVIDIA_H100 limit" in regional.detail
    # the machine type missing from the zone fails its own check
    del answers[f"{GCP}/zones/us-central1-a/machineTypes/a3-edgegpu-8g"]
    report = gcp_check(stack(tmp_path, "h100"), answers)
    assert verdicts(report)[("h100", "offered")] == "fail"


def test_a_quota_missing_from_regions_get_fails_unless_google_never_lists_it(
        tmp_path: Path) -> None:
    """A spot H100's PREEMPTIBLE_ quota is asked of regions.get, which is known not to
    list H100 quotas: missing, it is no verdict; an L4's, which regions.get lists, missing
    is a failure - never assumed."""
    h100 = FLEETS["h100"] + "spot_policy: spot\n"
    answers = recorded("gcp")
    answers[f"{GCP}/regions/us-central1"][1]["quotas"] = [
        q for q in answers[f"{GCP}/regions/us-central1"][1]["quotas"]
        if not q["metric"].startswith("PREEMPTIBLE_NVIDIA_H100")]
    needs = stack(tmp_path, "h100", edit={"h100": h100})
    report = gcp_check(needs, answers)
    assert gpu_family(needs[0]) is None
    checks = [c for c in report.checks if c.detail.startswith("PREEMPTIBLE_NVIDIA_H100")]
    assert [c.verdict for c in checks] == ["skip"]  # H100: regions.get is known not to list it
    l4 = Need("l4", "gcp", "p1", "us-central1", "us-central1-a", "g2-standard-4", "L4", 24, 1,
              4, False, 2, 0)
    report = gcp_check([l4], answers)
    assert [c.verdict for c in report.checks if c.detail.startswith("NVIDIA_L4_GPUS")] == \
        ["fail"]


def test_gcp_quota_metrics_follow_the_gpu_and_the_market() -> None:
    base = Need("f", "gcp", "p", "r", "z", "a3-megagpu-8g", "H100", 80, 8, 208, False, 1, 0)
    assert gpu_metric(base) == "NVIDIA_H100_MEGA_GPUS"
    assert gpu_metric(dataclasses.replace(base, spot=True)) == \
        "PREEMPTIBLE_NVIDIA_H100_MEGA_GPUS"
    a100 = dataclasses.replace(base, instance_type="a2-ultragpu-8g", gpu="A100",
                               gpu_memory_gib=80)
    assert gpu_metric(a100) == "NVIDIA_A100_80GB_GPUS"
    assert gpu_metric(dataclasses.replace(a100, gpu_memory_gib=40)) == "NVIDIA_A100_GPUS"
    cpu = dataclasses.replace(base, instance_type="n2-standard-8", gpu=None, gpus_per_node=0)
    assert gpu_metric(cpu) == "N2_CPUS"


# --- Azure -----------------------------------------------------------------------------

ARM = "https://management.azure.com"
CR = f"{ARM}{GROUP}/capacityReservations/nd-h100?api-version=2024-07-01&$expand=instanceView"


def azure_check(needs: list[Need], answers: dict[str, Any]) -> PreflightReport:
    return run_preflight("dev", needs, {"azure": AzureProbe(getter(answers))})


def test_azure_capacity_reservation_group_counts_allocated_vms(tmp_path: Path) -> None:
    needs = stack(tmp_path, "nd-res")
    assert needs[0].reservation == GROUP and needs[0].reservation_kind == \
        "capacity-reservation-group"
    report = azure_check(needs, recorded("azure"))
    assert report.ok, report.lines()
    assert "3/4 free, 2 to start" in detail(report, "nd-res", "reservation")
    answers = recorded("azure")
    allocated = answers[CR][1]["properties"]["instanceView"]["utilizationInfo"]
    allocated["virtualMachinesAllocated"] *= 3
    report = azure_check(needs, answers)
    assert "1 of its 4 instances are free, 2 more are needed" in \
        detail(report, "nd-res", "reservation")
    # a zonal reservation cannot hold the plan's regional scale set
    answers = recorded("azure")
    answers[CR][1]["zones"] = ["2"]
    report = azure_check(needs, answers)
    assert "it is in zone 2, and the plan does not pin the nodes to it" in \
        detail(report, "nd-res", "reservation")


def test_azure_family_and_regional_vcpu_quotas(tmp_path: Path) -> None:
    needs = stack(tmp_path, "nd")
    report = azure_check(needs, recorded("azure"))
    # 2 x 96 vCPUs: the family's 192 and the region's 350 - 12 both hold them
    assert report.ok, report.lines()
    assert "standardNDSH100v5Family in eastus: limit 192, used 0, 192 vCPUs more" in \
        [c.detail for c in report.checks]
    three = stack(tmp_path, "nd", edit={"nd": FLEETS["nd"].replace("nodes: 2", "nodes: 3")})
    report = azure_check(three, recorded("azure"))
    assert [c.detail for c in report.checks if c.verdict == "fail"] == [
        "standardNDSH100v5Family in eastus: limit 192, used 0, 288 vCPUs more; 96 vCPUs "
        "short: ask the cloud for a quota increase"]


def test_azure_size_restricted_for_the_subscription_is_not_offered(tmp_path: Path) -> None:
    needs = stack(tmp_path, "nd")
    restricted = dataclasses.replace(needs[0], instance_type="Standard_ND96asr_v4")
    report = azure_check([restricted], recorded("azure"))
    assert verdicts(report)[("nd", "offered")] == "fail"


# --- AWS -------------------------------------------------------------------------------

CR_ID = "cr-0123456789abcdef0"


class Routed:
    """One EC2 client as the probe sees it: moto answers what it emulates, the Stubber-backed
    client answers DescribeCapacityReservations."""

    def __init__(self, moto_client: Any, stubbed: Any) -> None:
        self._moto, self._stubbed = moto_client, stubbed

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stubbed if name in ("describe_capacity_reservations",
                                                 "describe_capacity_reservation_topology")
                       else self._moto, name)


@pytest.fixture
def aws(monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, Any]]:
    for key in ("AWS_PROFILE", "AWS_SESSION_TOKEN"):
        monkeypatch.delenv(key, raising=False)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    with mock_aws():
        ec2 = boto3.client("ec2", region_name="us-east-1")
        stubbed = boto3.client("ec2", region_name="us-east-1")
        quotas = boto3.client("service-quotas", region_name="us-east-1")
        parts = {"ec2": ec2, "ec2-stub": Stubber(stubbed), "quotas": Stubber(quotas)}
        routed = Routed(ec2, stubbed)

        def client(service: str, region: str) -> Any:
            assert region == "us-east-1"
            return routed if service == "ec2" else quotas

        parts["probe"] = AwsProbe(client)
        with parts["ec2-stub"], parts["quotas"]:
            yield parts


def reservation_answer(zone: str = "us-east-1a", available: int = 2,
                       state: str = "active") -> dict[str, Any]:
    return {"CapacityReservations": [{
        "CapacityReservationId": CR_ID, "InstanceType": "p5.48xlarge",
        "InstancePlatform": "Linux/UNIX", "AvailabilityZone": zone, "Tenancy": "default",
        "TotalInstanceCount": 4, "AvailableInstanceCount": available, "State": state,
        "InstanceMatchCriteria": "targeted", "EndDateType": "unlimited"}]}


def quota_answer(value: float) -> dict[str, Any]:
    return {"Quota": {"ServiceCode": "ec2", "QuotaCode": "L-417A185B", "Value": value,
                      "QuotaName": "Running On-Demand P instances", "Unit": "None"}}


def test_aws_quota_counts_running_p_instances_against_the_vcpu_limit(
        tmp_path: Path, aws: dict[str, Any]) -> None:
    needs = stack(tmp_path, "p5")
    assert quota_code("p5.48xlarge", False) == ("L-417A185B", "Running On-Demand P instances")
    # one p5.48xlarge already runs in the account (not in this stack): 192 vCPUs used
    aws["ec2"].run_instances(ImageId="ami-12c6146b", MinCount=1, MaxCount=1,
                             InstanceType="p5.48xlarge")
    aws["ec2"].run_instances(ImageId="ami-12c6146b", MinCount=1, MaxCount=1,
                             InstanceType="m5.large")  # a Standard instance: not counted
    request = {"ServiceCode": "ec2", "QuotaCode": "L-417A185B"}
    aws["quotas"].add_response("get_service_quota", quota_answer(384), request)
    report = run_preflight("dev", needs, {"aws": aws["probe"]})
    assert verdicts(report) == {("p5", "offered"): "ok", ("p5", "quota"): "fail"}
    assert detail(report, "p5", "quota") == (
        "L-417A185B (Running On-Demand P instances) in us-east-1: limit 384, used 192, 384 "
        "vCPUs more; 192 vCPUs short: ask the cloud for a quota increase")
    aws["quotas"].add_response("get_service_quota", quota_answer(768), request)
    assert run_preflight("dev", needs, {"aws": aws["probe"]}).ok


def test_aws_capacity_reservation_must_be_active_in_the_planned_zone_with_room(
        tmp_path: Path, aws: dict[str, Any]) -> None:
    request = {"CapacityReservationIds": [CR_ID]}
    stub = aws["ec2-stub"]
    # undeclared and no zone pinned: the instances may land outside the reservation's zone
    open_zone = stack(tmp_path, "p5-res")
    stub.add_response("describe_capacity_reservations", reservation_answer(), request)
    # where the reserved capacity sits, before anything launches
    stub.add_response("describe_capacity_reservation_topology", {"CapacityReservations": [{
        "CapacityReservationId": CR_ID, "State": "active", "InstanceType": "p5.48xlarge",
        "NetworkNodes": ["nn-1", "nn-2", "nn-3"], "AvailabilityZone": "us-east-1a"}]},
        request)
    report = run_preflight("dev", open_zone, {"aws": aws["probe"]})
    assert detail(report, "p5-res", "topology") == (
        f"{CR_ID} sits under nn-1/nn-2/nn-3: spread 1 spine(s), 1 block(s), 1 subblock(s)")
    assert "set `availability_zones: [us-east-1a]` on the fleet" in \
        detail(report, "p5-res", "reservation")
    assert verdicts(report)[("p5-res", "quota")] == "skip"
    pinned = stack(tmp_path, "p5-res", edit={"p5-res": FLEETS["p5-res"] +
                                             "availability_zones: [us-east-1a]\n"})
    assert pinned[0].zone == "us-east-1a"
    stub.add_response("describe_capacity_reservations", reservation_answer(), request)
    stub.add_client_error("describe_capacity_reservation_topology", "UnsupportedOperation",
                          expected_params=request)
    report = run_preflight("dev", pinned, {"aws": aws["probe"]})
    assert report.ok, report.lines()  # a topology EC2 cannot give is a note, not a failure
    assert verdicts(report)[("p5-res", "topology")] == "skip"
    assert "UnsupportedOperation" in detail(report, "p5-res", "topology")
    stub.add_response("describe_capacity_reservations",
                      reservation_answer(available=1, state="scheduled"), request)
    stub.add_response("describe_capacity_reservation_topology", {"CapacityReservations": []},
                      request)
    report = run_preflight("dev", pinned, {"aws": aws["probe"]})
    assert detail(report, "p5-res", "reservation").endswith(
        "it is scheduled, not active; 1 of its 4 instances are free, 2 more are needed")
    stub.add_client_error("describe_capacity_reservations",
                          "InvalidCapacityReservationId.NotFound", expected_params=request)
    report = run_preflight("dev", pinned, {"aws": aws["probe"]})
    assert "aws has no reservation 'cr-0123456789abcdef0'" in \
        detail(report, "p5-res", "reservation")
    stub.assert_no_pending_responses()


def test_aws_type_not_offered_in_the_zone(tmp_path: Path, aws: dict[str, Any]) -> None:
    [need] = stack(tmp_path, "p5")
    # moto's offerings list p6-b200.48xlarge in us-east-1c only
    elsewhere = dataclasses.replace(need, instance_type="p6-b200.48xlarge", zone="us-east-1a")
    aws["quotas"].add_response("get_service_quota", quota_answer(4096),
                               {"ServiceCode": "ec2", "QuotaCode": "L-417A185B"})
    report = run_preflight("dev", [elsewhere], {"aws": aws["probe"]})
    assert detail(report, "p5", "offered").startswith(
        "p6-b200.48xlarge is not offered in us-east-1a")


# --- the commands ----------------------------------------------------------------------

def no_credentials(monkeypatch: pytest.MonkeyPatch, tmp: Path) -> None:
    for key in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN",
                "AWS_PROFILE", "GOOGLE_APPLICATION_CREDENTIALS", "GOOGLE_CLOUD_PROJECT",
                "CLOUDSDK_CONFIG"):
        monkeypatch.delenv(key, raising=False)
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp / "none"))
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp / "none"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    monkeypatch.setenv("CLOUDSDK_CONFIG", str(tmp / "gcloud"))
    monkeypatch.setenv("NO_GCE_CHECK", "True")


def stack_config(tmp: Path, names: tuple[str, ...]) -> Path:
    stack(tmp, *names)
    files = ["backends.yml", *[f"{n}.yml" for n in names]]
    cfg = tmp / "Pulumi.dev.yaml"
    cfg.write_text("config:\n  gpufleet:files: " + json.dumps(files) + "\n")
    return cfg


def test_preflight_without_credentials_exits_2_naming_each_cloud(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    no_credentials(monkeypatch, tmp_path)
    stack_config(tmp_path, ("a4-res", "p5"))
    state = tmp_path / "state.json"
    state.write_text(json.dumps({"version": 3, "deployment": {"resources": []}}))
    r = CliRunner().invoke(cli, ["preflight", "--stack", "dev", "--cwd", str(tmp_path),
                                 "--state", str(state)])
    assert r.exit_code == 2, r.output
    assert "aws: no credentials found" in r.output and "gcp: no credentials found" in \
        r.output
    with pytest.raises(MissingAccess, match="AWS_ACCESS_KEY_ID"):
        default_probes(["aws"])


def test_preflight_command_reports_in_text_and_json(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    stack_config(tmp_path, ("a4-res", "nd-res"))
    answers = recorded("gcp")
    answers[A4_RES][1]["specificReservation"]["inUseCount"] = "4"

    def probes(_backends: Any) -> dict[str, Probe]:
        return {"gcp": GcpProbe(getter(answers)), "azure": AzureProbe(getter(recorded(
            "azure")))}
    monkeypatch.setattr("gpufleet.live.default_probes", probes)
    r = CliRunner().invoke(cli, ["preflight", "--stack", "dev", "--cwd", str(tmp_path)])
    assert r.exit_code == 1, r.output
    assert "FAIL reservation a4-res: projects/p1/reservations/my-a4-res: 0/4 free" in r.stdout
    assert "ok   reservation nd-res:" in r.stdout
    assert "preflight: 1 check(s) failed (15 checks)" in r.stdout  # the topology note
    # the network quotas the stack draws on, read from each cloud (8 of the 15 checks)
    assert "ok   network     a4-res: 'Networks' of p1 across the project: limit 15, used 3, " \
        "3 more (3 in the plan, 0 held already)" in r.stdout
    assert "ok   network     nd-res: 'Virtual networks' of 11111111-2222-3333-4444-" \
        "555555555555 in eastus: limit 1000, used 4, 1 more" in r.stdout
    # no Pulumi CLI here: the running nodes are not known, and the report says so
    assert "every planned node was counted as one to start" in r.stdout
    r = CliRunner().invoke(cli, ["preflight", "--stack", "dev", "--cwd", str(tmp_path),
                                 "--format", "json"])
    data = json.loads(r.stdout)
    assert data["ok"] is False and len(data["checks"]) == 15
    assert {c["verdict"] for c in data["checks"]} == {"ok", "fail", "skip"}
    r = CliRunner().invoke(cli, ["preflight", "--stack", "prod", "--cwd", str(tmp_path)])
    assert r.exit_code == 2 and "no stack config" in r.output


def test_up_runs_the_preflight_first_and_stops_before_any_preview(tmp_path: Path) -> None:
    from test_up import FakeStack, runner

    cfg = stack_config(tmp_path, ("a4-res",))
    files = [str(tmp_path / f) for f in json.loads(cfg.read_text().split(": ", 1)[1])]
    fake = FakeStack(files, str(tmp_path / "gpufleet.lock"), {})
    answers = recorded("gcp")
    answers[A4_RES][1]["status"] = "DELETING"
    lines: list[str] = []

    def probes(_backends: Any) -> dict[str, Probe]:
        return {"gcp": GcpProbe(getter(answers))}
    with pytest.raises(UpError, match="the preflight failed; nothing was changed"):
        deploy(runner(fake, lines.append), str(tmp_path), UpOptions(preflight=probes),
               lines.append, lambda _p: True)
    assert fake.previews == 0 and fake.seen == []
    assert any("it is DELETING, not active" in line for line in lines)
    answers[A4_RES][1]["status"] = "READY"
    result = deploy(runner(fake, lines.append), str(tmp_path), UpOptions(preflight=probes),
                    lines.append, lambda _p: True)
    assert result.succeeded and fake.previews == 1


def test_up_without_cloud_credentials_exits_2_before_any_preview(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from test_up import FakeStack

    import gpufleet.components.run.automation as automation

    no_credentials(monkeypatch, tmp_path)
    cfg = stack_config(tmp_path, ("p5",))
    files = [str(tmp_path / f) for f in json.loads(cfg.read_text().split(": ", 1)[1])]
    fake = FakeStack(files, str(tmp_path / "gpufleet.lock"), {})
    monkeypatch.setattr("shutil.which", lambda _name: "/usr/bin/pulumi")
    monkeypatch.setattr(automation.auto, "select_stack", lambda **_: fake)
    r = CliRunner().invoke(cli, ["up", "--stack", "dev", "--cwd", str(tmp_path), "--yes"])
    assert r.exit_code == 2, r.output
    assert "the preflight cannot ask the cloud: aws: no credentials found" in r.output
    assert "--skip-preflight" in r.output and fake.previews == 0


def test_gcp_reservation_blocks_are_read_page_by_page(tmp_path: Path) -> None:
    """reservationBlocks.list pages with nextPageToken (compute v1 list convention): every
    page is read; a token the API gave before is an error, not a loop (issue 53, item 14)."""
    needs = stack(tmp_path, "a4-res")
    answers = recorded("gcp")
    url = f"{A4_RES}/reservationBlocks"
    first = copy.deepcopy(answers[url][1])
    second = copy.deepcopy(first)
    first["items"], second["items"] = first["items"][:1], second["items"][1:]
    first["nextPageToken"] = "tok-1"
    answers[url] = (200, first)
    answers[f"{url}?pageToken=tok-1"] = (200, second)
    report = gcp_check(needs, answers)
    assert detail(report, "a4-res", "topology").endswith("spread 1 spine(s), 2 block(s)")
    second["nextPageToken"] = "tok-1"  # the same token again: paging that never ends
    report = gcp_check(needs, answers)
    assert "page token it had given before" in detail(report, "a4-res", "topology")
