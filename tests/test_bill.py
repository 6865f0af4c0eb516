"""The whole bill: every resource that bills by the hour or month has a priced line in its
owner's bill (checked against what the stack program creates), gateways and 0-node fleets
cost what their parts cost, warnings are said once in every format, long node lists fold,
and a plan on a terminal shows progress."""

from __future__ import annotations

import io
import json
import os
import pty
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest
from click.testing import CliRunner

from gpufleet.cli import cli
from gpufleet.cli.progress import progress_line
from gpufleet.input import validate_paths
from gpufleet.offers import load_catalog, load_prices
from gpufleet.review import PlanReport, billed_as, owner_map
from gpufleet.views.plan import render_plan_text
from gpufleet.views.tree import tree

from planutil import EXAMPLES, TEST_KEY, examples_plan_json, examples_report, plan_files, write

ROOT = Path(__file__).resolve().parent.parent
ARN = "arn:aws:acm:eu-west-1:123456789012:certificate/abc"
AWS = ("backends:\n  - type: aws\n    ssh_cidrs: [203.0.113.0/24]\n"
       f"access:\n  ssh_public_key: {TEST_KEY}\n")
# Resource types that bill nothing by themselves (the network's plumbing, the components).
FREE_PREFIXES = ("gpufleet:", "pulumi:providers:")


def _billed_resources(report: PlanReport) -> Counter[tuple[str, str]]:
    """(owner, kind) -> how many billable resources the program created for it."""
    owners = owner_map([(r["urn"], r["type"], r["parent"]) for r in report.resources])
    out: Counter[tuple[str, str]] = Counter()
    for r in report.resources:
        kind = billed_as(r["type"])
        if kind is None:
            continue
        inputs = r["inputs"]
        if kind == "address" and inputs.get("addressType") == "INTERNAL":
            continue  # internal static addresses are free
        count = 1
        if r["type"] == "azure-native:compute:VirtualMachineScaleSet":
            count = int(inputs["sku"]["capacity"])
        # a dstack volume's disk is a top-level resource, billed as `volume:NAME`
        owner = f"volume:{r['name']}" if kind == "volume" else owners[r["urn"]]
        out[(owner, kind)] += count
    return out


def _billed_lines(report: PlanReport) -> Counter[tuple[str, str]]:
    out: Counter[tuple[str, str]] = Counter()
    for name, bill in report.bills.items():
        for item in bill.items:  # what dstack creates at `dstack apply` is no resource here
            if item.kind in ("instance", "address", "nat", "load_balancer", "dns_zone",
                             "volume", "filesystem") and not item.by_dstack:
                out[(name, item.kind)] += item.count
        # a filesystem of a service the price table lacks is listed, NOT PRICED
        out[(name, "filesystem")] += sum("(filesystem " in u for u in bill.unpriced)
    return +out


def _check_every_billable_resource_is_priced(report: PlanReport) -> None:
    assert _billed_lines(report) == _billed_resources(report)
    for bill in report.bills.values():
        # only shared filesystems of services without a price may go unpriced, and say so
        assert all("(filesystem " in u and "has no" in u for u in bill.unpriced), bill
        # (or free because the instance's price includes it: Lambda's disk and address)
        assert all((i.per_hour > 0 or "included in the instance" in i.source) and i.source
                   for i in bill.items if i.count), bill


def test_every_billable_resource_of_the_examples_has_a_priced_line() -> None:
    report = examples_report()
    _check_every_billable_resource_is_priced(report)
    # every type the examples create is either billed or known to be free
    unknown = {r["type"] for r in report.resources
               if billed_as(r["type"]) is None and not r["type"].startswith(FREE_PREFIXES)}
    free = {"aws:ec2/vpc:Vpc", "aws:ec2/subnet:Subnet", "aws:ec2/securityGroup:SecurityGroup",
            "aws:ec2/routeTable:RouteTable", "aws:ec2/routeTableAssociation:RouteTableAssociation",
            "aws:ec2/internetGateway:InternetGateway", "aws:ec2/keyPair:KeyPair",
            "aws:ec2/launchTemplate:LaunchTemplate", "aws:ec2/placementGroup:PlacementGroup",
            "aws:ec2/eipAssociation:EipAssociation", "aws:route53/record:Record",
            # S3 gateway endpoints: "no additional charge" (aws.amazon.com/privatelink/pricing)
            "aws:ec2/vpcEndpoint:VpcEndpoint",
            "gcp:compute/network:Network", "gcp:compute/subnetwork:Subnetwork",
            "gcp:compute/firewall:Firewall", "gcp:compute/router:Router",
            "gcp:compute/resourcePolicy:ResourcePolicy", "gcp:dns/recordSet:RecordSet",
            "azure-native:resources:ResourceGroup", "azure-native:network:VirtualNetwork",
            "azure-native:network:Subnet", "azure-native:network:NetworkSecurityGroup",
            "azure-native:network:ApplicationSecurityGroup",
            # a private services access range and its peering (Managed Lustre): no charge
            "gcp:compute/globalAddress:GlobalAddress",
            "gcp:servicenetworking/connection:Connection",
            "azure-native:network:NetworkInterface", "azure-native:dns:RecordSet",
            # Lambda bills instances, 1-Click Clusters and filesystems only
            # (docs.lambda.ai/public-cloud/billing)
            "pulumi-python:dynamic/lambda:SshKey",
            "pulumi-python:dynamic/lambda:FirewallRuleset",
            # a node's wait for `active`: no object at Lambda
            "pulumi-python:dynamic/lambda:InstanceReady"}
    assert unknown <= free, unknown - free
    # the totals: the nodes plus everything beside them
    nodes = sum(f.total_per_hour for f in report.fleets)
    assert report.per_hour > nodes
    assert report.nodes_per_hour == pytest.approx(nodes)


def test_load_balancers_private_gateways_and_created_zones_are_priced(tmp_path: Path) -> None:
    gws = [("a.yml", "type: gateway\nname: alb-aws\nbackend: aws\nregion: eu-west-1\n"
            f"domain: gpu.example.com\npublic_ip: false\ncertificate:\n  type: acm\n"
            f"  arn: {ARN}\n"),
           ("b.yml", "type: gateway\nname: alb-gcp\nbackend: gcp\nregion: us-east1\n"
            "domain: svc.example.org\nreplicas: 2\nload_balancer: {type: alb}\n"
            "certificate: null\n"),
           ("c.yml", "type: gateway\nname: priv-gcp\nbackend: gcp\nregion: us-east1\n"
            "domain: in.example.net\npublic_ip: false\ncertificate: null\n")]
    backends = ("backends:\n  - type: aws\n    ssh_cidrs: [203.0.113.0/24]\n"
                "  - type: gcp\n    project_id: p1\n    ssh_cidrs: [203.0.113.0/24]\n"
                f"access:\n  ssh_public_key: {TEST_KEY}\n"
                "gateways:\n  alb-aws: {create_dns_zone: true}\n")
    files = [write(tmp_path, n, body) for n, body in gws]
    report = plan_files([*files, write(tmp_path, "backends.yml", backends)])
    _check_every_billable_resource_is_priced(report)
    lines = {n: {(i.kind, i.by_dstack) for i in b.items} for n, b in report.bills.items()}
    # dstack's load balancer and instances; the stack's NAT and zone
    assert {("load_balancer", True), ("instance", True), ("nat", False),
            ("dns_zone", False)} <= lines["alb-aws"]
    assert {("load_balancer", True), ("address", True)} <= lines["alb-gcp"]
    assert ("address", True) not in lines["priv-gcp"]  # a private gateway has no public one


def test_dstacks_private_aws_gateway_example_plans_and_costs_its_parts(
        tmp_path: Path) -> None:
    # dstack docs, concepts/gateways.md ("private gateway"): acm, public_ip: false
    gw = write(tmp_path, "gw.dstack.yml",
               "type: gateway\nname: example-gateway\nbackend: aws\nregion: eu-west-1\n"
               f"domain: example.com\npublic_ip: false\ncertificate:\n  type: acm\n"
               f"  arn: {ARN}\n")
    report = plan_files([gw, write(tmp_path, "backends.yml", AWS)])
    assert report.violations == ()
    bill = report.bills["example-gateway"]
    text = render_plan_text(report)
    assert "load balancer" in text and f"cost:     ${bill.total:,.2f}/h" in text
    assert bill.total > 0.0225 + 0.045  # an ALB and a NAT gateway at least


def test_a_gateway_alone_costs_its_instance_address_and_disk(tmp_path: Path) -> None:
    gw = write(tmp_path, "gw.yml", "type: gateway\nname: solo\nbackend: aws\n"
               "region: us-east-1\ndomain: gpu.example.com\n")
    r = CliRunner().invoke(cli, ["plan", gw, write(tmp_path, "backends.yml", AWS)])
    assert r.exit_code == 0, r.output
    # what dstack creates: t3.micro $0.0104 + its public IPv4 $0.005 + 10 GiB gp3
    # (10 x $0.08 / 730 h); the stack's own network for it costs nothing
    expected = 0.0104 + 0.005 + 10 * 0.08 / 730
    assert f"cost:     ${expected:,.2f}/h, ${expected * 730:,.2f}/month (instances $0.01, " \
           "network $0.0050, storage $0.0011)" in r.stdout
    assert "$0.00/month" not in r.stdout


def test_a_fleet_with_no_nodes_costs_its_nat_bastion_and_addresses() -> None:
    report = examples_report()
    bill = report.bills["dev-l4"]
    plan = next(f for f in report.fleets if f.name == "dev-l4")
    assert plan.nodes == 0 and bill.part("nodes") == 0
    kinds = Counter(i.kind for i in bill.items)
    assert kinds == {"instance": 1, "disk": 1, "address": 2, "nat": 1}  # bastion, its disk
    # and address, the NAT gateway and its address: eu-south-2's t3.nano is 0.0057
    assert bill.total == pytest.approx(0.0057 + 8 * 0.08 / 730 + 0.005 + 0.045 + 0.005)
    text = render_plan_text(report)
    assert "cost: $0.06/h, $44.95/month (network $0.06, storage $0.0009)" in text


def test_the_lock_keeps_the_overhead_and_the_cost_guard_counts_it(tmp_path: Path) -> None:
    text = (EXAMPLES / "gpufleet.lock").read_text()
    assert text.count("overhead:") == 10  # 7 fleets, 3 gateways
    r = CliRunner().invoke(cli, ["lock", "--check", str(EXAMPLES)])
    assert r.exit_code == 0, r.output
    data = examples_plan_json()
    costs, total = data["costs"], data["summary"]["total_per_hour"]
    assert costs["after_per_hour"] == pytest.approx(total, abs=1e-3)
    assert costs["before_per_hour"] == 0  # a plan starts from an empty stack
    assert {c["name"] for c in costs["fleets"]} >= {"dev-l4", "gw-aws"}  # 0 nodes, gateways


def _no_key_fleets(tmp: Path, n: int) -> list[str]:
    files = [write(tmp, f"f{i}.dstack.yml", f"type: fleet\nname: cpu-{i}\nnodes: 1\n"
                   "resources:\n  gpu: 0\nbackends: [aws]\n") for i in range(n)]
    return [*files, write(tmp, "backends.yml", "backends:\n  - type: aws\n    regions: "
                          "[us-east-1]\n    ssh_cidrs: [203.0.113.0/24]\n")]


def test_five_fleets_without_a_key_give_one_warning_in_every_format(tmp_path: Path) -> None:
    files = _no_key_fleets(tmp_path, 5)
    r = CliRunner().invoke(cli, ["plan", *files])
    assert r.exit_code == 0, r.output
    c011 = [ln for ln in r.stderr.splitlines() if "C011" in ln]
    assert c011 == ["warning[C011]: fleets cpu-0, cpu-1, cpu-2 (+2): no SSH public key in "
                    "the backends file; `pulumi up` reads it from the stack config "
                    "`gpufleet:sshPublicKey` and fails without it. Nodes are reached "
                    "through the bastion <fleet>-bastion"]
    assert "set the SSH public key" in r.stdout.splitlines()[-1]  # the next step says so
    data = json.loads(CliRunner().invoke(cli, ["plan", "--format", "json", *files]).stdout)
    [d] = [d for d in data["diagnostics"] if d["code"] == "C011"]
    assert d["fleets"] == [f"cpu-{i}" for i in range(5)] and len(d["locations"]) == 5
    assert d["severity"] == "warning" and d["line"] == 2
    md = CliRunner().invoke(cli, ["plan", "--format", "markdown", *files]).stdout
    warnings = md.split("**Warnings**")[1].split("**Policy:**")[0]
    assert warnings.count("[C011]") == 1 and "`cpu-4`" in warnings
    assert md.index("**Warnings**") < md.index("Resource tree")


def test_the_offline_lookups_are_listed_once_with_a_count(tmp_path: Path) -> None:
    report = plan_files(_no_key_fleets(tmp_path, 5))
    assert "looked up offline" not in render_plan_text(report)  # only with --expand
    text = render_plan_text(report, expand=True)
    listed = text.split("looked up offline")[1].split("\n\n")[0].splitlines()[1:]
    assert len(listed) == len(set(listed))
    assert any(line.endswith("(5 times)") for line in listed)


def test_a_thousand_node_fleet_folds_its_tree_and_expand_lists_it(tmp_path: Path) -> None:
    fleet = write(tmp_path, "big.dstack.yml", "type: fleet\nname: big\nnodes: 1000\n"
                  "resources:\n  gpu: 0\nbackends: [aws]\n")
    report = plan_files([fleet, write(tmp_path, "backends.yml", AWS)])
    lines = tree(report.resources)
    nodes = [ln for ln in lines if "big-node-" in ln]
    assert nodes == ["    + aws:ec2/instance:Instance  big-node-0 .. big-node-999: 1,000 x "
                     "(`--expand` lists them)"]
    assert len(lines) < 40
    assert sum("big-node-" in ln for ln in tree(report.resources, expand=True)) == 1000
    text = render_plan_text(report)
    assert text.splitlines()[-2].startswith("plan: + 1,0")  # the summary closes the plan


class _Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_the_progress_line_shows_on_a_terminal_only(monkeypatch: pytest.MonkeyPatch) -> None:
    from gpufleet.cli.runs import build_report

    monkeypatch.setattr("gpufleet.cli.progress.INTERVAL", 0.0)
    validated = validate_paths([str(EXAMPLES)])
    tty = _Tty()
    with progress_line(tty) as show:
        assert show is not None
        report, _ = build_report(validated, load_catalog(), [str(EXAMPLES)], "dev", None,
                                 None, progress=show)
    assert report is not None
    out = tty.getvalue()
    assert "\rgpufleet: compiling 7 fleet(s), 3 gateway(s)" in out
    assert f"running the stack program: {len(report.resources)} resources" in out
    assert out.endswith("\r")  # the line is cleared at the end
    pipe = io.StringIO()
    with progress_line(pipe) as show:
        assert show is None
    monkeypatch.setenv("TERM", "dumb")
    with progress_line(_Tty()) as show:
        assert show is None


@pytest.mark.skipif(sys.platform == "win32", reason="needs a pseudo-terminal")
def test_gpufleet_plan_on_a_terminal_prints_progress_on_stderr(tmp_path: Path) -> None:
    main_fd, tty_fd = pty.openpty()
    env = {**os.environ, "TERM": "xterm"}
    out = subprocess.run([sys.executable, "-m", "gpufleet", "plan", str(EXAMPLES)],
                         stdout=subprocess.PIPE, stderr=tty_fd, env=env, timeout=300,
                         cwd=ROOT)
    os.close(tty_fd)
    err = b""
    while True:
        try:
            chunk = os.read(main_fd, 65536)
        except OSError:
            break
        if not chunk:
            break
        err += chunk
    os.close(main_fd)
    assert out.returncode == 0
    assert b"gpufleet: running the stack program:" in err
    assert b"gpufleet:" not in out.stdout.split(b"\n")[0]  # stdout is the plan only


def test_a_bill_over_the_monthly_threshold_is_a_warning(tmp_path: Path) -> None:
    r = CliRunner().invoke(cli, ["plan", str(EXAMPLES), "--warn-cost-per-month", "100000"])
    assert r.exit_code == 0
    assert "warning[C018]: the plan costs $671,944/month, over the warning threshold " \
           "$100,000/month (most: nd-h100 $287,220" in r.stderr
    assert "C018" not in CliRunner().invoke(cli, ["plan", str(EXAMPLES)]).stderr
    # the default comes from the backends file
    copy = tmp_path / "examples"
    import shutil
    shutil.copytree(EXAMPLES, copy)
    with (copy / "backends.yml").open("a") as f:
        f.write("cost:\n  warn_per_month: 1000\n")
    r = CliRunner().invoke(cli, ["plan", "--format", "json", str(copy)])
    assert r.exit_code == 0, r.output
    assert [d["code"] for d in json.loads(r.stdout)["diagnostics"]].count("C018") == 1


def test_the_price_table_is_dated_and_sourced() -> None:
    prices = load_prices()
    assert prices.date and prices.version and prices.not_priced
    for backend in ("aws", "gcp", "azure"):
        for key in ("nat_gateway", "public_ipv4", "dns_zone"):
            entry = prices.raw(backend, key)
            assert entry and entry["source"], (backend, key)
    # Azure bills a disk at the tier of the next size up: 100 GiB is a P10 (128 GiB)
    p10 = prices.disk("azure", "Premium_LRS", 100)
    assert p10 is not None and p10.per_hour * 730 == pytest.approx(19.71)
    assert prices.disk("azure", "Premium_LRS", 40000) is None  # over the largest tier
