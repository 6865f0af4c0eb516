"""Quotas as code (issue 58): `gpufleet quota` lists every quota a stack needs at its peak,
on-demand and spot apart, with each cloud's identifier and the page it comes from; `--live`
reads the limits through the probes `preflight` uses (one reader). Identifier sources:
AWS docs.aws.amazon.com/ec2/latest/instancetypes/ec2-instance-quotas.html (L-417A185B
Running On-Demand P instances, L-7212CCBC All P Spot Instance Requests, ...); GCP
cloud.google.com/compute/resource-usage and cloud.google.com/docs/quotas/configure-dimensions
(GPUS-PER-GPU-FAMILY-per-project-region with gpu_family, its PREEMPTIBLE- twin,
GPUS-ALL-REGIONS-per-project); Azure learn.microsoft.com/azure/virtual-machines/quotas
(family vCPUs, `cores`, `lowPriorityCores`)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import test_preflight
from click.testing import CliRunner
from test_preflight import BACKENDS, FLEETS, getter, recorded, stack

from gpufleet.backends.aws.quotas import quota_code
from gpufleet.backends.azure.live import AzureProbe
from gpufleet.backends.azure.quotas import family as azure_family
from gpufleet.backends.gcp.live import GcpProbe
from gpufleet.backends.gcp.quotas import compute_quotas as gcp_quotas
from gpufleet.cli import cli
from gpufleet.compile import QuotaRow
from gpufleet.live import read_limits
from gpufleet.live.preflight import Probe
from gpufleet.traits import QuotaAsk

from planutil import write

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"
aws = test_preflight.aws  # the moto + Stubber fixture


def rows_of(args: list[str]) -> tuple[int, list[dict[str, Any]]]:
    r = CliRunner().invoke(cli, ["quota", *args, "--format", "json"])
    return r.exit_code, json.loads(r.stdout)["rows"] if r.stdout.startswith("{") else []


def test_the_examples_quotas_per_cloud_region_and_market() -> None:
    code, rows = rows_of([str(EXAMPLES)])
    assert code == 0
    by = {(r["backend"], r["region"], r["ident"], r["market"]): r for r in rows}
    # h100-train: 4 p5.48xlarge (192 vCPUs) and one rolling replacement, on demand
    p5 = by[("aws", "us-east-1", "L-417A185B", "on-demand")]
    assert (p5["amount"], p5["unit"], p5["title"]) == (960, "vCPUs",
                                                       "Running On-Demand P instances")
    assert p5["source"] == "docs.aws.amazon.com/ec2/latest/instancetypes/ec2-instance-quotas.html"
    # dev-l4 is spot: the spot G quota, apart from any on-demand one
    assert by[("aws", "eu-south-2", "L-3819A6DF", "spot")]["amount"] == 8
    # GCP counts GPUs per family and region, preemptible apart; all regions for both
    mega = by[("gcp", "us-central1", "GPUS-PER-GPU-FAMILY-per-project-region", "on-demand")]
    assert mega["dimensions"] == {"gpu_family": "NVIDIA_H100_MEGA"} and mega["amount"] == 24
    assert mega["scope_kind"] == "project" and mega["scope"] == "my-ml-project"
    b200 = by[("gcp", "us-west2", "PREEMPTIBLE-GPUS-PER-GPU-FAMILY-per-project-region", "spot")]
    assert b200["dimensions"] == {"gpu_family": "NVIDIA_B200"}
    assert by[("gcp", "global", "GPUS-ALL-REGIONS-per-project", "all")]["amount"] == 48
    # Azure: the VM family's vCPUs and the region's on demand; lowPriorityCores for spot
    assert by[("azure", "eastus", "standardNDSH100v5Family", "on-demand")]["amount"] == 480
    assert by[("azure", "eastus", "cores", "on-demand")]["amount"] == 480
    assert by[("azure", "eastus", "lowPriorityCores", "spot")]["amount"] == 3 * 96
    # the network quotas the plan already counted, by their quota ids
    nets = {(r["backend"], r["region"], r["ident"]): r["amount"] for r in rows
            if r["kind"] == "network"}
    assert nets[("aws", "us-east-1", "vpc:L-F678F1CE")] == 2
    assert nets[("gcp", "global", "NETWORKS")] == 13


def test_quota_never_runs_the_policy_pack(monkeypatch: pytest.MonkeyPatch) -> None:
    """A quota answer shows no policy violations, so the pack is not loaded for it (a plan of
    the same inputs still is)."""
    from gpufleet.cli import runs

    def refuse() -> None:
        raise AssertionError("the policy pack was loaded")

    monkeypatch.setattr(runs, "_rules", refuse)
    code, rows = rows_of([str(EXAMPLES)])
    assert code == 0 and rows
    r = CliRunner().invoke(cli, ["plan", str(EXAMPLES)])
    assert r.exit_code != 0 and "the policy pack was loaded" in str(r.exception)


def test_text_and_markdown_name_sources_and_approval_lags() -> None:
    r = CliRunner().invoke(cli, ["quota", str(EXAMPLES)])
    assert r.exit_code == 0
    assert "h100-train (4+1)" in r.stdout and "cloud.google.com/docs/quotas/configure-" \
        "dimensions" in r.stdout
    assert "approval (gcp): hours to days" in r.stdout
    # every example fleet is there: Lambda's with why it has no quota
    assert "no quota: lambda-h100 (lambda: Lambda Cloud has no quota to ask for" in r.stdout
    r = CliRunner().invoke(cli, ["quota", str(EXAMPLES), "--format", "markdown"])
    assert r.stdout.startswith("### Quotas of stack `dev`") and "| aws | account default |" \
        in r.stdout


def test_the_identifier_tables() -> None:
    assert quota_code("p5.48xlarge", True) == ("L-7212CCBC", "All P Instances Spot Instance "
                                               "Requests".replace("Instances", "instances",
                                                                  1))
    assert quota_code("g6e.12xlarge", False)[0] == "L-DB2E81BA"
    assert quota_code("x1e.xlarge", False) is None
    mega = gcp_quotas(QuotaAsk("a3-megagpu-8g", False, "H100", 80, 8, 208))
    assert [(q.ident, q.dimensions, q.per_node) for q in mega] == [
        ("GPUS-PER-GPU-FAMILY-per-project-region", (("gpu_family", "NVIDIA_H100_MEGA"),), 8),
        ("GPUS-ALL-REGIONS-per-project", (), 8)]
    a100 = gcp_quotas(QuotaAsk("a2-ultragpu-8g", True, "A100", 80, 8, 96))[0]
    assert a100.dimensions == (("gpu_family", "NVIDIA_A100_80GB"),) and a100.live == \
        "PREEMPTIBLE_NVIDIA_A100_80GB_GPUS"
    assert azure_family("Standard_ND96isr_H100_v5") == "standardNDSH100v5Family"
    assert azure_family("Standard_NC40ads_H100_v5") == "StandardNCadsH100v5Family"
    assert azure_family("Standard_NC24ads_A100_v4") == "StandardNCADSA100v4Family"
    assert azure_family("Standard_ND96asr_v4") == "Standard NDASv4_A100 Family"


def test_a_health_policy_raises_the_peak_it_may_replace_at_once(tmp_path: Path) -> None:
    files = [write(tmp_path, "b.yml", BACKENDS + "fleets:\n  p5:\n    health:\n"
                   "      on_failure: replace\n      max_replacements_per_day: 3\n"),
             write(tmp_path, "p5.yml", "type: fleet\nname: p5\n" + FLEETS["p5"])]
    _, rows = rows_of(files)
    [p5] = [r for r in rows if r["ident"] == "L-417A185B"]
    assert p5["amount"] == (2 + 2) * 192 and p5["fleets"] == ["p5 (2+2)"]


def _files(tmp: Path, *names: str) -> list[str]:
    stack(tmp, *names)  # writes and locks them
    return [str(tmp / "backends.yml"), *(str(tmp / f"{n}.yml") for n in names)]


def test_live_reads_the_limits_with_preflights_reader_and_exits_1_on_a_shortfall(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    files = _files(tmp_path, "nd")

    def probes(_backends: Any) -> dict[str, Probe]:
        return {"azure": AzureProbe(getter(recorded("azure")))}
    monkeypatch.setattr("gpufleet.live.default_probes", probes)
    r = CliRunner().invoke(cli, ["quota", *files, "--live", "--format", "json"])
    rows = {x["ident"]: x for x in json.loads(r.stdout)["rows"]}
    # 2 nodes + 1 rolling x 96 vCPUs = 288 against the family's 192: 96 short
    fam = rows["standardNDSH100v5Family"]
    assert (fam["limit"], fam["used"], fam["shortfall"]) == (192.0, 0.0, 96.0)
    assert r.exit_code == 1
    assert rows["cores"]["shortfall"] == 0.0
    r = CliRunner().invoke(cli, ["quota", *files, "--live"])
    assert "limit" in r.stdout.splitlines()[1] and "96" in r.stdout


def test_live_hostile_or_missing_answers_are_no_verdict(tmp_path: Path,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    files = _files(tmp_path, "h100")
    answers = recorded("gcp")

    def probes(_backends: Any) -> dict[str, Probe]:
        return {"gcp": GcpProbe(getter(answers))}
    monkeypatch.setattr("gpufleet.live.default_probes", probes)
    # Cloud Quotas lists no H100 family limit: that row is unread, with the reason, and
    # gives no shortfall (exit 0 on the rows that were read)
    r = CliRunner().invoke(cli, ["quota", *files, "--live", "--format", "json"])
    rows = {(x["ident"], x["region"]): x for x in json.loads(r.stdout)["rows"]}
    fam = rows[("GPUS-PER-GPU-FAMILY-per-project-region", "us-central1")]
    assert fam["limit"] is None and fam["shortfall"] is None
    assert "lists no NVIDIA_H100 limit" in fam["note"]
    assert r.exit_code == 0, r.output
    # an answer of the wrong shape gives no figure and says so, never a traceback
    for url, (status, body) in list(answers.items()):
        if url.endswith("/projects/p1") and isinstance(body, dict):
            answers[url] = (status, {**body, "quotas": "not a list"})
    r = CliRunner().invoke(cli, ["quota", *files, "--live", "--format", "json"])
    assert r.exception is None or isinstance(r.exception, SystemExit), r.exception
    glob = next(x for x in json.loads(r.stdout)["rows"]
                if x["ident"] == "GPUS-ALL-REGIONS-per-project")
    assert glob["limit"] is None and "is not a list" in glob["note"]


def test_aws_live_limit_through_service_quotas(tmp_path: Path,
                                               aws: dict[str, Any]) -> None:
    row = QuotaRow("aws", "account", "default", "us-east-1", "Running On-Demand P instances",
                   "L-417A185B", "vCPUs", "on-demand", 576, fleets=["p5 (2+1)"],
                   live="L-417A185B")
    needs = stack(tmp_path, "p5")
    aws["quotas"].add_response("get_service_quota", {"Quota": {
        "ServiceCode": "ec2", "QuotaCode": "L-417A185B", "Value": 384.0,
        "QuotaName": "Running On-Demand P instances", "Unit": "None"}},
        {"ServiceCode": "ec2", "QuotaCode": "L-417A185B"})
    read_limits([row], needs, {"aws": aws["probe"]})
    assert (row.limit, row.used, row.shortfall) == (384.0, 0.0, 192.0)


# --- requests as code -----------------------------------------------------------------------

SUBSCRIPTION = "11111111-2222-3333-4444-555555555555"
REQUEST_FLEETS = {"p5": ("aws", "regions: [us-east-1]\n"), "mega": ("gcp", "regions: "
                  "[us-central1]\ninstance_types: [a3-megagpu-8g]\n"), "nd": ("azure", "")}


def _limits(tmp: Path, short: bool = True) -> Path:
    path = tmp / "limits.json"
    entries = [("aws", "default", "us-east-1", "L-417A185B", {}, 384 if short else 2000),
               ("gcp", "p1", "us-central1", "GPUS-PER-GPU-FAMILY-per-project-region",
                {"gpu_family": "NVIDIA_H100_MEGA"}, 8 if short else 64),
               ("azure", SUBSCRIPTION, "eastus", "standardNDSH100v5Family", {},
                96 if short else 1000)]
    path.write_text(json.dumps({"version": 1, "limits": [
        {"backend": b, "scope": s, "region": r, "ident": i, "dimensions": d,
         "market": "on-demand", "limit": limit, "used": 0} for b, s, r, i, d, limit in
        entries]}))
    return path


def _request_files(tmp: Path, quotas: str) -> list[str]:
    tmp.mkdir(parents=True, exist_ok=True)
    backends = BACKENDS.split("reservations:")[0] + quotas
    return [write(tmp, "b.yml", backends),
            *(write(tmp, f"{n}.yml", f"type: fleet\nname: {n}\nnodes: 2\nplacement: cluster\n"
                    f"backends: [{b}]\nresources:\n  gpu: H100:8\n{extra}")
              for n, (b, extra) in REQUEST_FLEETS.items())]


QUOTAS = "quotas:\n  request: true\n  headroom: 10\n  contact_email: ops@example.com\n" \
         "  limits: limits.json\n"


def test_a_known_shortfall_plans_one_protected_request_per_cloud(tmp_path: Path) -> None:
    from planutil import by_type, plan_files

    _limits(tmp_path)
    report = plan_files(_request_files(tmp_path, QUOTAS))
    [aws_q] = by_type(report, "aws:servicequotas/serviceQuota:ServiceQuota")
    # 2 nodes + 1 rolling x 192 vCPUs = 576, +10% = 634 (used 0), above the limit 384
    assert aws_q["inputs"] == {"serviceCode": "ec2", "quotaCode": "L-417A185B",
                               "value": 634.0, "region": "us-east-1"} and aws_q["protect"]
    [gcp_q] = by_type(report, "gcp:cloudquota/sQuotaPreference:SQuotaPreference")
    g = gcp_q["inputs"]
    assert (g["quotaId"], g["dimensions"], g["quotaConfig"], g["parent"], g["contactEmail"]) \
        == ("GPUS-PER-GPU-FAMILY-per-project-region",
            {"gpu_family": "NVIDIA_H100_MEGA", "region": "us-central1"},
            {"preferredValue": "27"}, "projects/p1", "ops@example.com")
    assert len(g["name"]) <= 63 and gcp_q["protect"]
    [azure_q] = [r for r in report.resources if r["type"] == "pulumi-python:dynamic:Resource"
                 and r["name"].startswith("quota-azure-")]
    assert {k: azure_q["inputs"][k] for k in ("subscription", "region", "quota", "value")} \
        == {"subscription": SUBSCRIPTION, "region": "eastus",
            "quota": "standardNDSH100v5Family", "value": 317} and azure_q["protect"]
    # the same YAML plans the same names
    (tmp_path / "again").mkdir()
    _limits(tmp_path / "again")
    again = plan_files(_request_files(tmp_path / "again", QUOTAS))
    assert {r["name"] for r in report.resources if "quota-" in r["name"]} == \
        {r["name"] for r in again.resources if "quota-" in r["name"]}
    assert len(report.quota_requests) == 3


def test_no_shortfall_no_request_and_the_plan_says_what_it_files(tmp_path: Path) -> None:
    _limits(tmp_path, short=False)
    files = _request_files(tmp_path, QUOTAS)
    r = CliRunner().invoke(cli, ["plan", *files])
    assert r.exit_code == 0 and "quota requests:" not in r.stdout
    _limits(tmp_path)
    r = CliRunner().invoke(cli, ["plan", *files])
    assert "quota requests: 3 (`pulumi up` files them; each is protected)" in r.stdout
    assert "limit 384, used 0, the stack needs 576 vCPUs -> asks 634" in r.stdout
    assert "approval (gcp): hours to days" in r.stdout


def test_a_missing_or_broken_limits_file_is_named_where_it_is_set(tmp_path: Path) -> None:
    files = _request_files(tmp_path, QUOTAS)
    r = CliRunner().invoke(cli, ["validate", *files])
    assert r.exit_code == 1 and "B021" in r.stdout and "b.yml:" in r.stdout
    (tmp_path / "limits.json").write_text('{"version": 1, "limits": [{"limit": NaN}]}')
    r = CliRunner().invoke(cli, ["validate", *files])
    assert "NaN is not a number" in r.stdout or "not JSON" in r.stdout
    (tmp_path / "limits.json").write_text('{"version": 1, "limits": [{"backend": "aws"}]}')
    r = CliRunner().invoke(cli, ["validate", *files])
    assert "entry 0 is not" in r.stdout
    files = _request_files(tmp_path / "w", QUOTAS.replace("  limits: limits.json\n", ""))
    r = CliRunner().invoke(cli, ["validate", *files])
    assert r.exit_code == 0 and "warning[B021]" in r.stdout


def test_quota_live_save_writes_the_limits_the_plan_requests_with(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    files = _files(tmp_path, "nd")

    def probes(_backends: Any) -> dict[str, Probe]:
        return {"azure": AzureProbe(getter(recorded("azure")))}
    monkeypatch.setattr("gpufleet.live.default_probes", probes)
    saved = tmp_path / "limits.json"
    r = CliRunner().invoke(cli, ["quota", *files, "--live", "--save", str(saved)])
    assert r.exit_code == 1 and saved.exists()  # 96 vCPUs short, and the file written
    data = json.loads(saved.read_text())
    assert data["version"] == 1 and {e["ident"] for e in data["limits"]} >= {
        "standardNDSH100v5Family", "cores"}
    # a file gpufleet did not write is not replaced; --save needs --live
    other = tmp_path / "mine.json"
    other.write_text("{}")
    r = CliRunner().invoke(cli, ["quota", *files, "--live", "--save", str(other)])
    assert r.exit_code == 2 and other.read_text() == "{}"
    r = CliRunner().invoke(cli, ["quota", *files, "--save", str(saved)])
    assert r.exit_code == 2 and "add --live" in r.output
    # the plan with that file: one request for the family, at (used + 288 x 1.1), >= limit
    Path(files[0]).write_text(Path(files[0]).read_text() + "quotas:\n  request: true\n"
                              "  limits: limits.json\n")
    from planutil import plan_files

    report = plan_files(files)
    assert [(q.ident, q.value) for q in report.quota_requests] == [
        ("standardNDSH100v5Family", 317)]


def test_up_launches_no_node_short_of_quota_unless_asked(tmp_path: Path) -> None:
    from gpufleet.compile import compile_files
    from gpufleet.live import UpError, UpOptions
    from gpufleet.live.up import _no_nodes_short_of_quota

    _limits(tmp_path)
    files = _request_files(tmp_path, QUOTAS)
    _, compiled = compile_files(files)
    assert compiled is not None and len(compiled.quota_requests) == 3
    with pytest.raises(UpError, match="quota short for fleets p5, mega, nd "):
        _no_nodes_short_of_quota(compiled)
    assert UpOptions().allow_pending_quota is False
    # `nodes: 0..2` while the request is pending: the requests stay, no node launches
    for name in REQUEST_FLEETS:
        path = tmp_path / f"{name}.yml"
        path.write_text(path.read_text().replace("nodes: 2", "nodes: 0..2"))
    _, held = compile_files(files)
    assert held is not None and len(held.quota_requests) == 3
    _no_nodes_short_of_quota(held)


def test_the_azure_request_resource_files_through_the_default_credentials(
        monkeypatch: pytest.MonkeyPatch) -> None:
    from types import SimpleNamespace

    from gpufleet.components.azure.quota import QuotaRequestProvider

    puts: list[tuple[str, Any]] = []

    class Session:
        def put(self, url: str, body: Any) -> Any:
            puts.append((url, body))
            return SimpleNamespace(status_code=202, json=lambda: {
                "properties": {"provisioningState": "Accepted"}})
    monkeypatch.setattr("gpufleet.backends.azure.live.azure_session", Session)
    props = {"subscription": SUBSCRIPTION, "region": "eastus", "quota": "cores", "value": 500}
    made = QuotaRequestProvider().create(props)
    assert made.id == f"{SUBSCRIPTION}/eastus/cores" and made.outs["state"] == "Accepted"
    assert puts[0][1]["properties"]["limit"]["value"] == 500
    provider = QuotaRequestProvider()
    assert provider.diff("x", props, {**props, "value": 600}).changes
    assert provider.diff("x", props, {**props, "region": "westus"}).replaces == ["region"]
    assert provider.delete("x", props) is None  # a granted limit is never withdrawn


def test_nodes_on_a_reservation_add_no_need(tmp_path: Path) -> None:
    """As preflight counts them: a reservation's capacity was counted when it was made."""
    files = _files(tmp_path, "a4-res")
    r = CliRunner().invoke(cli, ["quota", *files, "--format", "json"])
    data = json.loads(r.stdout)
    assert data["reserved"] == ["a4-res"]
    assert [x for x in data["rows"] if x["kind"] == "compute"] == []
