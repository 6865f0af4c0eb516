"""Gateways on every backend: a separately managed static address per replica, the instance,
a firewall that opens 80/443 (and 22 only from ssh_cidrs), and the `*.<domain>` record whose
value is the address resource's output."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpufleet.compile.compiler import compile_inputs
from gpufleet.input.validate import validate_paths
from gpufleet.offers.catalog import load_catalog
from gpufleet.review import PlanReport
from gpufleet.views.plan import render_plan_text

from planutil import EXAMPLES, SHARED, TEST_KEY, by_type, named, plan_files, write

ARN = "arn:aws:acm:us-east-1:123456789012:certificate/x"


@pytest.fixture(scope="module")
def gws() -> PlanReport:
    return plan_files([*sorted((EXAMPLES / "gateways").glob("*.yml")), *SHARED])


def test_aws_record_points_at_the_elastic_ip(gws: PlanReport) -> None:
    rec = named(gws, "gw-aws-dns", "aws:route53/record:Record")
    assert rec["inputs"]["name"] == "*.aws.gpu.example.com."
    assert (rec["inputs"]["type"], rec["inputs"]["ttl"]) == ("A", 300)
    assert rec["inputs"]["records"] == ["mock-public-ip-of-gw-aws-ip"]
    assert rec["inputs"]["zoneId"] == "Z-MOCK-gpu.example.com"
    eip = named(gws, "gw-aws-ip", "aws:ec2/eip:Eip")
    assert eip["protect"] is True
    assert rec["delete_before_replace"] is True  # the record's name is its identity


def test_gcp_record_and_static_address(gws: PlanReport) -> None:
    rec = named(gws, "gw-gcp-dns", "gcp:dns/recordSet:RecordSet")["inputs"]
    assert (rec["name"], rec["type"], rec["ttl"]) == ("*.gcp.gpu.example.com.", "A", 300)
    assert rec["rrdatas"] == ["mock-address-of-gw-gcp-ip"]
    assert rec["managedZone"] == "mock-gpu-example-com-public"
    addr = named(gws, "gw-gcp-ip", "gcp:compute/address:Address")
    assert addr["protect"] is True and addr["inputs"]["addressType"] == "EXTERNAL"
    vm = named(gws, "gw-gcp-vm", "gcp:compute/instance:Instance")["inputs"]
    assert vm["machineType"] == "e2-medium"
    assert vm["networkInterfaces"][0]["accessConfigs"] == [
        {"natIp": "mock-address-of-gw-gcp-ip"}]


def test_azure_record_and_public_ip(gws: PlanReport) -> None:
    rec = named(gws, "gw-azure-dns", "azure-native:dns:RecordSet")["inputs"]
    assert (rec["relativeRecordSetName"], rec["zoneName"], rec["recordType"], rec["ttl"]) == (
        "*.azure", "gpu.example.com", "A", 300)
    assert rec["aRecords"] == [{"ipv4Address": "mock-public-ip-of-gw-azure-ip"}]
    pip = named(gws, "gw-azure-ip", "azure-native:network:PublicIPAddress")
    assert pip["protect"] is True
    assert pip["inputs"]["sku"] == {"name": "Standard"}
    vm = named(gws, "gw-azure-vm", "azure-native:compute:VirtualMachine")["inputs"]
    assert vm["hardwareProfile"]["vmSize"] == "Standard_B1ms"


def test_firewalls_open_80_443_and_ssh_only_from_ssh_cidrs(gws: PlanReport) -> None:
    sg = named(gws, "gw-aws-sg", "aws:ec2/securityGroup:SecurityGroup")["inputs"]["ingress"]
    assert sorted((r["fromPort"], tuple(r["cidrBlocks"])) for r in sg) == [
        (22, ("203.0.113.0/24",)), (80, ("0.0.0.0/0",)), (443, ("0.0.0.0/0",))]
    gcp_rules = {r["name"]: r["inputs"] for r in by_type(gws, "gcp:compute/firewall:Firewall")}
    assert gcp_rules["gw-gcp-web"]["allows"] == [{"protocol": "tcp", "ports": ["80", "443"]}]
    assert gcp_rules["gw-gcp-web"]["targetTags"] == ["gpufleet-gw-gcp"]
    assert gcp_rules["gw-gcp-ssh"]["sourceRanges"] == ["203.0.113.0/24"]
    nsg = named(gws, "gw-azure-nsg", "azure-native:network:NetworkSecurityGroup")["inputs"]
    assert [(r["destinationPortRanges"], r["sourceAddressPrefixes"])
            for r in nsg["securityRules"]] == [(["80", "443"], ["0.0.0.0/0"]),
                                               (["22"], ["203.0.113.0/24"])]


def test_plan_text_shows_address_firewall_and_record(gws: PlanReport) -> None:
    text = render_plan_text(gws)
    assert "gateway gw-gcp" in text
    assert "address:  gw-gcp-ip (static external address, protected)" in text
    assert "dns:      A *.gcp.gpu.example.com. -> gw-gcp-ip (zone gpu.example.com, TTL 300)" \
        in text


def _gw(tmp: Path, body: str, backends: str = "") -> PlanReport:
    files = [write(tmp, "g.yml", "type: gateway\nname: gw1\n" + body)]
    if backends:
        files.append(write(tmp, "b.yml", backends))
    return plan_files(files)


def test_replicas_get_one_address_each_and_one_multi_value_record(tmp_path: Path) -> None:
    report = _gw(tmp_path, "backend: gcp\nregion: us-east1\ndomain: gpu.example.com\n"
                 "replicas: 3\ncertificate: null\n")
    assert sorted(r["name"] for r in by_type(report, "gcp:compute/address:Address")) == [
        "gw1-ip-0", "gw1-ip-1", "gw1-ip-2"]
    rec = named(report, "gw1-dns", "gcp:dns/recordSet:RecordSet")["inputs"]
    assert rec["name"] == "*.gpu.example.com." and len(rec["rrdatas"]) == 3
    zones = [r["inputs"]["zone"] for r in by_type(report, "gcp:compute/instance:Instance")]
    assert zones == ["us-east1-a", "us-east1-b", "us-east1-c"]


def test_acm_uses_an_alb_across_two_azs_and_an_alias_record(tmp_path: Path) -> None:
    report = _gw(tmp_path, "backend: aws\nregion: us-east-1\ndomain: gpu.example.com\n"
                 f"certificate: {{type: acm, arn: '{ARN}'}}\n")
    alb = named(report, "gw1-alb", "aws:lb/loadBalancer:LoadBalancer")["inputs"]
    assert alb["subnets"] == ["gw1-subnet-0-id", "gw1-subnet-1-id"]
    subnets = {r["name"]: r["inputs"]["availabilityZone"]
               for r in by_type(report, "aws:ec2/subnet:Subnet")}
    assert subnets == {"gw1-subnet-0": "mock-region-1a", "gw1-subnet-1": "mock-region-1b",
                       "gw1-private-0": "mock-region-1a", "gw1-private-1": "mock-region-1b"}
    # TLS ends at the ALB: the instances have no address and take HTTP from the ALB only.
    assert not by_type(report, "aws:ec2/eip:Eip")[1:]  # only the NAT's
    assert [e["name"] for e in by_type(report, "aws:ec2/eip:Eip")] == ["gw1-net-nat-eip"]
    vm = named(report, "gw1-vm", "aws:ec2/instance:Instance")["inputs"]
    assert vm["subnetId"] == "gw1-private-0-id"
    sg = named(report, "gw1-sg", "aws:ec2/securityGroup:SecurityGroup")["inputs"]
    web = [r for r in sg["ingress"] if r["fromPort"] != 22]
    assert web == [{"protocol": "tcp", "fromPort": 80, "toPort": 80,
                    "securityGroups": ["gw1-alb-web-id"], "description": web[0]["description"]}]
    alb_sg = named(report, "gw1-alb-web", "aws:ec2/securityGroup:SecurityGroup")["inputs"]
    assert sorted((r["fromPort"], tuple(r["cidrBlocks"])) for r in alb_sg["ingress"]) == [
        (80, ("0.0.0.0/0",)), (443, ("0.0.0.0/0",))]
    assert alb["securityGroups"] == ["gw1-alb-web-id"]
    https = named(report, "gw1-https", "aws:lb/listener:Listener")["inputs"]
    assert https["certificateArn"] == ARN
    rec = named(report, "gw1-dns", "aws:route53/record:Record")["inputs"]
    assert rec["type"] == "A" and rec["aliases"] == [{
        "name": "gw1-alb.mock.elb.amazonaws.com", "zoneId": "Z-MOCK-ELB",
        "evaluateTargetHealth": True}]


def test_private_gateway_uses_internal_address_and_private_zone(tmp_path: Path) -> None:
    report = _gw(tmp_path, "backend: gcp\nregion: us-east1\ndomain: gpu.example.com\n"
                 "public_ip: false\ncertificate: null\n")
    addr = named(report, "gw1-ip", "gcp:compute/address:Address")["inputs"]
    assert addr["addressType"] == "INTERNAL"
    rec = named(report, "gw1-dns", "gcp:dns/recordSet:RecordSet")["inputs"]
    assert rec["managedZone"] == "mock-example-com-private"
    web = named(report, "gw1-web", "gcp:compute/firewall:Firewall")["inputs"]
    assert "0.0.0.0/0" not in web["sourceRanges"]
    aws_report = _gw(tmp_path, "backend: aws\nregion: us-east-1\ndomain: gpu.example.com\n"
                     "public_ip: false\ncertificate: null\n")
    eni = named(aws_report, "gw1-ip", "aws:ec2/networkInterface:NetworkInterface")
    assert eni["protect"] is True
    rec = named(aws_report, "gw1-dns", "aws:route53/record:Record")["inputs"]
    assert rec["records"] == ["mock-private-ip-of-gw1-ip"]
    assert ("aws:route53/getZone:getZone", {"name": "example.com", "privateZone": True}) \
        in [(t, dict(a)) for t, a in aws_report.lookups]


def test_protect_can_be_turned_off_and_zone_created_on_request(tmp_path: Path) -> None:
    report = _gw(tmp_path, "backend: aws\nregion: us-east-1\ndomain: gpu.example.com\n",
                 "backends:\n  - type: aws\ngateways:\n  gw1: {protect_address: false, "
                 "create_dns_zone: true, dns_zone: example.com}\n")
    assert named(report, "gw1-ip", "aws:ec2/eip:Eip")["protect"] is False
    zone = named(report, "gw1-zone", "aws:route53/zone:Zone")
    assert zone["protect"] is True and zone["inputs"]["name"] == "example.com"
    rec = named(report, "gw1-dns", "aws:route53/record:Record")
    assert rec["deleted_with"] == zone["urn"]
    assert not [t for t, _ in report.lookups if t == "aws:route53/getZone:getZone"]


def test_zone_is_the_domains_parent_unless_dns_zone_is_set(tmp_path: Path) -> None:
    report = _gw(tmp_path, "backend: gcp\nregion: us-east1\ndomain: a.gpu.example.com\n")
    rec = named(report, "gw1-dns", "gcp:dns/recordSet:RecordSet")
    assert rec["inputs"]["name"] == "*.a.gpu.example.com."
    assert rec["inputs"]["managedZone"] == "mock-gpu-example-com-public"
    from gpufleet.compile.gateway import zone_of
    from gpufleet.input.spec import GatewaySpec, Origin
    spec = GatewaySpec("g1", "gcp", "r", Origin("f", 1, 1), domain="a.b.example.com")
    assert zone_of(spec) == "b.example.com"


def _codes(tmp: Path, body: str, backends: str = "") -> list[str]:
    files = [write(tmp, f"g{i}.yml", doc) for i, doc in enumerate(body.split("---\n"))]
    if backends:
        files.append(write(tmp, "b.yml", backends))
    return [d.code for d in compile_inputs(validate_paths(files).inputs,
                                           load_catalog()).diagnostics]


def test_gateway_rules(tmp_path: Path) -> None:
    azure = "type: gateway\nname: gw1\nbackend: azure\nregion: eastus\ndomain: g.example.com\n"
    assert _codes(tmp_path, azure, "backends:\n  - type: azure\n") == ["C011", "G010"]
    templated = ("type: gateway\nname: gw1\nbackend: gcp\nregion: us-east1\n"
                 "domain: '${{ run.project_name }}.example.com'\n")
    assert _codes(tmp_path, templated) == ["G011"]
    outside = ("type: gateway\nname: gw1\nbackend: gcp\nregion: us-east1\n"
               "domain: gpu.example.com\n")
    assert _codes(tmp_path, outside, "gateways:\n  gw1: {dns_zone: other.org}\n") == ["G012"]
    two = ("type: gateway\nname: gw1\nbackend: gcp\nregion: us-east1\ndomain: a.example.com\n"
           "---\ntype: gateway\nname: gw2\nbackend: gcp\n"
           "region: us-east1\ndomain: b.example.com\n")
    assert _codes(tmp_path, two, "gateways:\n  gw1: {create_dns_zone: true}\n"
                  "  gw2: {create_dns_zone: true}\n") == ["G013"]


@pytest.mark.parametrize("backend,region", [("gcp", "us-east1"), ("aws", "us-east-1"),
                                            ("azure", "eastus")])
@pytest.mark.parametrize("domain", ["ml.acme-corp.io", "a.b.c.d.example.org",
                                    "x1.internal.zone"])
def test_a_gateway_with_any_domain_plans(tmp_path: Path, backend: str, region: str,
                                         domain: str) -> None:
    """Offline answers derive from the input, never from the examples' domains."""
    extra = {"gcp": "    project_id: p1\n", "aws": "",
             "azure": f"    ssh_public_key: {TEST_KEY}\n    dns_resource_group: dns\n"
                      "    subscription_id: s1\n    tenant_id: t1\n"}
    report = _gw(tmp_path, f"backend: {backend}\nregion: {region}\ndomain: {domain}\n",
                 f"backends:\n  - type: {backend}\n" + extra[backend])
    records = [r for r in report.resources
               if r["type"] in ("gcp:dns/recordSet:RecordSet", "aws:route53/record:Record",
                                "azure-native:dns:RecordSet")]
    assert len(records) == 1
    name = records[0]["inputs"].get("name") or records[0]["inputs"].get("relativeRecordSetName")
    assert domain.split(".")[0] in str(name)


def test_gcp_finds_the_closest_zone_that_contains_the_domain() -> None:
    from types import SimpleNamespace as Zone

    from gpufleet.components.gcp.gateway import _zone_named

    zones = [Zone(name="top", dns_name="example.com.", visibility="public"),
             Zone(name="mid", dns_name="b.example.com.", visibility="public"),
             Zone(name="priv", dns_name="a.b.example.com.", visibility="private")]
    record = "*.a.b.example.com."
    assert _zone_named(zones, "b.example.com", False, record) == "mid"
    assert _zone_named(zones[:1], "b.example.com", False, record) == "top"
    assert _zone_named(zones, "a.b.example.com", True, record) == "priv"
    with pytest.raises(ValueError, match="no public Cloud DNS zone contains"):
        _zone_named(zones[2:], "b.example.com", False, record)
    # With an explicit dns_zone there is no walk: only that zone will do.
    with pytest.raises(ValueError, match=r"no public Cloud DNS zone for b\.example\.org\."):
        _zone_named(zones, "b.example.org", False)


def test_the_plan_says_which_zone_is_looked_for(gws: PlanReport) -> None:
    text = render_plan_text(gws)
    assert "zone:     the closest Cloud DNS zone that contains the domain, found at `pulumi " \
        "up` (offline: gpu.example.com)" in text
    assert "if your zone sits elsewhere, set `gateways: {gw-aws: {dns_zone: ...}}` in the " \
        "backends file" in text
