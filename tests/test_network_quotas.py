"""The stack's network quotas (issue 39): the plan counts what the stack creates of each
network resource per region or project, warns past a documented default, and preflight reads
each cloud's live limit and use (Service Quotas and EC2 on AWS, project and region quotas on
GCP, network usages on Azure), counting what the stack holds already only once."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import boto3
import pytest
from botocore.stub import Stubber
from moto import mock_aws
from test_preflight import CASES, GCP, getter, recorded

from gpufleet.backends import traits_of
from gpufleet.backends.aws.live import AwsProbe
from gpufleet.backends.gcp.live import GcpProbe
from gpufleet.live import NetworkNeed, network_needs
from gpufleet.live.preflight import PreflightReport, check_network
from gpufleet.review import network_counts

from planutil import TEST_KEY, examples_report, plan_files, write

AWS_FLEET = ("type: fleet\nname: {name}\nnodes: 1\nbackends: [aws]\nregions: [us-east-1]\n"
             "resources:\n  gpu: L4\n")
BACKENDS = (f"access:\n  ssh_public_key: {TEST_KEY}\nbackends:\n  - type: aws\n"
            "    ssh_cidrs: [203.0.113.0/24]\n  - type: gcp\n    project_id: p1\n"
            "    ssh_cidrs: [203.0.113.0/24]\n")


def _quota(backend: str, name: str) -> Any:
    return next(q for q in traits_of(backend).network_quotas if q.name == name)


def test_the_plan_counts_every_quota_per_region_and_project() -> None:
    report = examples_report()
    counts = {(c.backend, c.quota.name, c.scope, c.region): c.count
              for c in network_counts(report.resources)}
    # aws: h100-train and dev-l4 each make a VPC; gateway gw-aws one more (us-east-1)
    assert counts[("aws", "VPCs per Region", None, "us-east-1")] == 2
    assert counts[("aws", "VPCs per Region", None, "eu-south-2")] == 1
    # gcp networks are counted across the project (a4: main, gVNIC, RoCE; a3mega: main and
    # 8 GPU networks; the gateway's)
    assert counts[("gcp", "Networks", "my-ml-project", "global")] == 13
    # internal addresses are free of the external addresses' quota
    assert ("gcp", "Static external IP addresses", "my-ml-project", "us-west2") in counts
    assert counts[("azure", "Virtual networks", "00000000-0000-0000-0000-000000000000",
                   "eastus")] == 3


class OneQuota:
    """A probe answering one network quota (and listing no other)."""

    backend = "gcp"

    def __init__(self, name: str, limit: float, used: float) -> None:
        from gpufleet.live.preflight import QuotaFacts
        self.answer = (name, QuotaFacts(limit, used))

    def network_quota(self, scope: Any, region: str, quota: Any) -> Any:
        return self.answer[1] if quota.name == self.answer[0] else None


def _needs(tmp: Path, fleets: int) -> list[NetworkNeed]:
    files = [write(tmp, f"f{i}.yml", AWS_FLEET.format(name=f"f{i}")) for i in range(fleets)]
    report = plan_files([*files, write(tmp, "b.yml", BACKENDS)])
    return [n for n in network_needs(report.resources, []) if n.planned.backend == "aws"]


def test_a_quota_the_stack_would_pass_fails_preflight_and_says_how_to_stay_under(
        tmp_path: Path) -> None:
    needs = _needs(tmp_path, 3)  # 3 private fleets: 3 VPCs, 6 Elastic IPs
    report = PreflightReport("dev")
    probe = OneQuota("EC2-VPC Elastic IPs", 5, 1)
    probe.backend = "aws"
    check_network(report, needs, {"aws": probe})  # type: ignore[dict-item]
    eips = [c for c in report.checks if "Elastic IPs" in c.detail]
    assert [(c.fleet, c.verdict) for c in eips] == [("f0, f1, f2", "fail")]
    assert "limit 5, used 1, 6 more (6 in the plan, 0 held already); 2 short" in eips[0].detail
    assert "fleets: {NAME: {network: FLEET}}" in eips[0].detail
    # a quota the cloud does not list is never assumed: it fails, naming it
    assert any(c.verdict == "fail" and "'VPCs per Region' in us-east-1 is not listed" in
               c.detail for c in report.checks)


def test_what_the_stack_holds_already_counts_once(tmp_path: Path) -> None:
    from exportutil import export

    files = [write(tmp_path, f"f{i}.yml", AWS_FLEET.format(name=f"f{i}")) for i in range(2)]
    files.append(write(tmp_path, "b.yml", BACKENDS))
    planned = plan_files(files).resources
    deployed = export(files)["deployment"]["resources"]
    needs = {n.planned.quota.name: n for n in network_needs(planned, deployed)
             if n.planned.backend == "aws"}
    vpcs = needs["VPCs per Region"]
    assert (vpcs.planned.count, vpcs.existing, vpcs.new) == (2, 2, 0)
    report = PreflightReport("dev")
    check_network(report, list(needs.values()), {})
    assert report.checks == []  # nothing new: nothing to ask


def test_gcp_reads_project_and_region_quotas(tmp_path: Path) -> None:
    answers = recorded("gcp")
    project = answers[GCP][1]
    next(q for q in project["quotas"] if q["metric"] == "NETWORKS")["usage"] = 14
    probe = GcpProbe(getter(answers))
    facts = probe.network_quota("p1", "global", _quota("gcp", "Networks"))
    assert facts is not None and (facts.limit, facts.used) == (15, 14)
    facts = probe.network_quota("p1", "us-west2", _quota("gcp", "Static external IP "
                                                                "addresses"))
    assert facts is not None and (facts.limit, facts.used) == (8, 1)
    assert probe.network_quota("p1", "europe-west4", _quota("gcp", "Networks")) is not None
    gone = copy.deepcopy(answers)
    gone[GCP][1]["quotas"] = []
    assert GcpProbe(getter(gone)).network_quota("p1", "global",
                                                 _quota("gcp", "Networks")) is None


def test_aws_reads_service_quotas_and_counts_the_regions_use() -> None:
    """Service Quotas through botocore's Stubber (requests and answers checked against the
    service model); the region's VPCs and Elastic IPs as moto's EC2 lists them."""
    with mock_aws():
        ec2 = boto3.client("ec2", region_name="us-east-1")
        ec2.create_vpc(CidrBlock="10.1.0.0/16")
        for _ in range(3):
            ec2.allocate_address(Domain="vpc")
        quotas = boto3.client("service-quotas", region_name="us-east-1")
        stub = Stubber(quotas)
        for code, value in (("L-F678F1CE", 5.0), ("L-0263D0A3", 5.0)):
            service = "vpc" if code == "L-F678F1CE" else "ec2"
            stub.add_response("get_service_quota", {"Quota": {
                "ServiceCode": service, "QuotaCode": code, "Value": value}},
                {"ServiceCode": service, "QuotaCode": code})
        stub.add_client_error("get_service_quota", "NoSuchResourceException",
                              expected_params={"ServiceCode": "vpc",
                                               "QuotaCode": "L-FE5A380F"})
        probe = AwsProbe(lambda service, region: ec2 if service == "ec2" else quotas)
        with stub:
            vpcs = probe.network_quota(None, "us-east-1", _quota("aws", "VPCs per Region"))
            eips = probe.network_quota(None, "us-east-1", _quota("aws", "EC2-VPC Elastic IPs"))
            nat = probe.network_quota(None, "us-east-1",
                                      _quota("aws", "NAT gateways per Availability Zone"))
        assert vpcs is not None and (vpcs.limit, vpcs.used) == (5, 2)  # moto's default + 1
        assert eips is not None and (eips.limit, eips.used) == (5, 3)
        assert nat is None  # not listed: preflight fails it rather than assume


def test_azure_reads_the_regions_network_usages() -> None:
    from gpufleet.backends.azure.live import AzureProbe

    probe = AzureProbe(getter(recorded("azure")))
    sub = "11111111-2222-3333-4444-555555555555"
    facts = probe.network_quota(sub, "eastus", _quota("azure", "Public IP addresses"))
    assert facts is not None and (facts.limit, facts.used) == (1000, 10)
    assert probe.network_quota(sub, "westus", _quota("azure", "Virtual networks")) is None
    assert (CASES / "azure.json").exists()


def test_the_bucket_quotas_are_read_where_each_cloud_keeps_them() -> None:
    """S3's general purpose bucket quota and use from US East (N. Virginia), whatever the
    fleet's region; Azure's storage accounts from the Storage usages API."""
    from gpufleet.backends.azure.live import AzureProbe

    with mock_aws():
        s3 = boto3.client("s3", region_name="us-east-1")
        for name in ("acme-a", "acme-b"):
            s3.create_bucket(Bucket=name)
        quotas = boto3.client("service-quotas", region_name="us-east-1")
        stub = Stubber(quotas)
        stub.add_response("get_service_quota", {"Quota": {
            "ServiceCode": "s3", "QuotaCode": "L-DC2B2D3D", "Value": 10000.0}},
            {"ServiceCode": "s3", "QuotaCode": "L-DC2B2D3D"})
        asked: list[tuple[str, str]] = []

        def client(service: str, region: str) -> Any:
            asked.append((service, region))
            return s3 if service == "s3" else quotas
        with stub:
            facts = AwsProbe(client).network_quota(None, "eu-west-1",
                                                   _quota("aws", "General purpose buckets"))
    assert facts is not None and (facts.limit, facts.used) == (10000, 2)
    assert {region for _, region in asked} == {"us-east-1"}
    probe = AzureProbe(getter(recorded("azure")))
    sub = "11111111-2222-3333-4444-555555555555"
    accounts = probe.network_quota(sub, "eastus", _quota("azure", "Storage accounts per region"))
    assert accounts is not None and (accounts.limit, accounts.used) == (250, 12)
    # the network usages are still read from the Network provider
    assert probe.network_quota(sub, "eastus", _quota("azure", "Public IP addresses"))


@pytest.mark.parametrize("backend", ["aws", "gcp", "azure"])
def test_every_quota_names_its_source_and_how_preflight_reads_it(backend: str) -> None:
    for q in traits_of(backend).network_quotas:
        assert "." in q.source and q.live and q.scope in ("region", "global")
