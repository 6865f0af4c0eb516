"""Gateways as dstack 0.22.5 runs them: dstack creates the instances, addresses and load
balancer at `dstack apply`; gpufleet builds the network they land in and the `*.<domain>`
record, which points at what `gpufleet gateway sync` read from dstack (pending until then)."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpufleet.compile.compiler import compile_inputs
from gpufleet.input import SyncedGateway
from gpufleet.input.validate import validate_paths
from gpufleet.offers.catalog import load_catalog
from gpufleet.review import PlanReport
from gpufleet.views.plan import render_plan_text

from planutil import EXAMPLES, SHARED, TEST_KEY, by_type, named, plan_files, write

ARN = "arn:aws:acm:us-east-1:123456789012:certificate/x"
CM = "projects/p1/locations/us-east1/certificates/wild"
RECORDS = ("gcp:dns/recordSet:RecordSet", "aws:route53/record:Record",
           "azure-native:dns:RecordSet")
# what a gateway made with its own VM had, and must no longer have
VM_TYPES = ("aws:ec2/instance:Instance", "gcp:compute/instance:Instance",
            "azure-native:compute:VirtualMachine", "aws:lb/loadBalancer:LoadBalancer",
            "gcp:compute/forwardingRule:ForwardingRule")
ADDRESS_TYPES = ("aws:ec2/eip:Eip", "gcp:compute/address:Address",
                 "azure-native:network:PublicIPAddress",
                 "aws:ec2/networkInterface:NetworkInterface")
AZURE = ("backends:\n  - type: azure\n    subscription_id: s1\n    tenant_id: t1\n"
         f"    dns_resource_group: dns\n    ssh_public_key: {TEST_KEY}\n")
GCP = "backends:\n  - type: gcp\n    project_id: p1\n    ssh_cidrs: [203.0.113.0/24]\n"
AWS = "backends:\n  - type: aws\n    ssh_cidrs: [203.0.113.0/24]\n"


def synced(name: str, project: str, backend: str, region: str,
           *targets: str) -> dict[str, SyncedGateway]:
    return {name: SyncedGateway(project, backend, region, tuple(targets), "running", "t")}


@pytest.fixture(scope="module")
def gws() -> PlanReport:
    return plan_files([*sorted((EXAMPLES / "gateways").glob("*.yml")), *SHARED])


def _gw(tmp: Path, body: str, backends: str = "", **kw: object) -> PlanReport:
    files = [write(tmp, "g.yml", "type: gateway\nname: gw1\n" + body)]
    if backends:
        files.append(write(tmp, "b.yml", backends))
    return plan_files(files, **kw)  # type: ignore[arg-type]


def test_the_examples_gateways_build_no_vm_and_no_address(gws: PlanReport) -> None:
    """dstack makes its own gateway instances and addresses: gpufleet builds neither."""
    assert not [r["name"] for r in gws.resources if r["type"] in (*VM_TYPES, *ADDRESS_TYPES)]
    assert not [r for r in gws.resources if r["type"] in RECORDS]  # pending: not synced
    assert gws.violations == ()


def test_each_gateway_gets_the_network_dstack_puts_it_in(gws: PlanReport) -> None:
    # aws: public subnets in two AZs (dstack's ALB refuses fewer), routed to an IGW
    subnets = {r["name"]: r["inputs"]["availabilityZone"] for r in
               by_type(gws, "aws:ec2/subnet:Subnet") if r["name"].startswith("gw-aws")}
    assert subnets == {"gw-aws-subnet-0": "mock-region-1a", "gw-aws-subnet-1": "mock-region-1b"}
    assert named(gws, "gw-aws-net-public-rt")["inputs"]["routes"][0]["cidrBlock"] == \
        "0.0.0.0/0"
    assert not [s for s in by_type(gws, "aws:ec2/securityGroup:SecurityGroup")
                if s["name"].startswith("gw-")]  # dstack makes the gateway's own group
    # gcp: a VPC and subnet, no firewall (dstack opens its own rules)
    assert named(gws, "gw-gcp-subnet", "gcp:compute/subnetwork:Subnetwork")
    assert not [f for f in by_type(gws, "gcp:compute/firewall:Firewall")
                if f["name"].startswith("gw-")]
    # azure: a VNet and subnet, no NSG (dstack puts its own on the VM's NIC)
    assert named(gws, "gw-azure-subnet", "azure-native:network:Subnet")
    assert not [n for n in by_type(gws, "azure-native:network:NetworkSecurityGroup")
                if n["name"].startswith("gw-")]


def test_the_plan_says_the_record_is_pending_and_the_next_steps(gws: PlanReport) -> None:
    text = render_plan_text(gws)
    assert ("dns:      A *.aws.gpu.example.com. -> pending: dstack has not created the gateway "
            "yet; after `pulumi up`: `gpufleet export dstack --stack dev` (the server config "
            "names this network for project gateway-gw-aws), `dstack apply --project "
            "gateway-gw-aws -f gateway-gw-aws.dstack.yml`, `gpufleet gateway sync --stack dev`, "
            "then `pulumi up` again") in text
    assert "dstack:   creates the gateway at `dstack apply`: gcp us-west2  e2-medium x1, " \
        "public" in text


@pytest.mark.parametrize("backend,region,extra,rtype", [
    ("aws", "us-east-1", AWS, "aws:route53/record:Record"),
    ("gcp", "us-east1", GCP, "gcp:dns/recordSet:RecordSet"),
    ("azure", "eastus", AZURE, "azure-native:dns:RecordSet")])
def test_two_replica_addresses_make_two_a_records(tmp_path: Path, backend: str, region: str,
                                                  extra: str, rtype: str) -> None:
    report = _gw(tmp_path, f"backend: {backend}\nregion: {region}\ndomain: gpu.example.com\n"
                 "replicas: 2\ncertificate: null\n", extra,
                 synced=synced("gw1", "gateway-gw1", backend, region, "203.0.113.10",
                               "203.0.113.11"))
    rec = named(report, "gw1-dns", rtype)["inputs"]
    values = rec.get("records") or rec.get("rrdatas") or [
        a["ipv4Address"] for a in rec["aRecords"]]
    assert values == ["203.0.113.10", "203.0.113.11"]
    assert (rec.get("type") or rec.get("recordType")) == "A"
    assert named(report, "gw1-dns", rtype)["delete_before_replace"] is True
    assert "-> 203.0.113.10, 203.0.113.11 (dstack's gateway, synced)" in \
        render_plan_text(report)


def test_an_alb_host_name_becomes_an_alias_on_route_53(tmp_path: Path) -> None:
    host = "abcd1234-lb-1234567890.us-east-1.elb.amazonaws.com"
    report = _gw(tmp_path, "backend: aws\nregion: us-east-1\ndomain: gpu.example.com\n"
                 f"certificate: {{type: acm, arn: '{ARN}'}}\n", AWS,
                 synced=synced("gw1", "gateway-gw1", "aws", "us-east-1", host))
    rec = named(report, "gw1-dns", "aws:route53/record:Record")["inputs"]
    assert rec["type"] == "A" and "records" not in rec
    assert rec["aliases"] == [{"name": host, "zoneId": "Z-MOCK-ELB",
                               "evaluateTargetHealth": True}]
    lookup = [dict(a) for t, a in report.lookups if t == "aws:lb/getHostedZoneId:getHostedZoneId"]
    assert lookup == [{"loadBalancerType": "application", "region": "us-east-1"}]
    assert not [r for r in report.resources if r["type"] in VM_TYPES]


@pytest.mark.parametrize("backend,region,extra,rtype", [
    ("gcp", "us-east1", GCP, "gcp:dns/recordSet:RecordSet"),
    ("azure", "eastus", AZURE, "azure-native:dns:RecordSet"),
    ("aws", "us-east-1", AWS, "aws:route53/record:Record")])
def test_another_host_name_becomes_a_cname(tmp_path: Path, backend: str, region: str,
                                           extra: str, rtype: str) -> None:
    report = _gw(tmp_path, f"backend: {backend}\nregion: {region}\ndomain: gpu.example.com\n",
                 extra, synced=synced("gw1", "gateway-gw1", backend, region,
                                      "gw.internal.example.net"))
    rec = named(report, "gw1-dns", rtype)["inputs"]
    assert (rec.get("type") or rec.get("recordType")) == "CNAME"
    value = rec.get("records") or rec.get("rrdatas") or [rec["cnameRecord"]["cname"]]
    assert value[0].rstrip(".") == "gw.internal.example.net"


def test_a_sync_of_another_place_leaves_the_record_pending(tmp_path: Path) -> None:
    files = [write(tmp_path, "g.yml", "type: gateway\nname: gw1\nbackend: gcp\nregion: "
                   "us-east1\ndomain: gpu.example.com\n"), write(tmp_path, "b.yml", GCP)]
    compiled = compile_inputs(validate_paths(files).inputs, load_catalog(), synced=synced(
        "gw1", "gateway-gw1", "gcp", "europe-west4", "198.51.100.7"))
    assert [d.code for d in compiled.diagnostics] == ["G022"]
    assert compiled.gateways[0].record is not None and compiled.gateways[0].record.pending


def test_a_private_gateway_gets_private_subnets_with_nat(tmp_path: Path) -> None:
    report = _gw(tmp_path, "backend: aws\nregion: us-east-1\ndomain: gpu.example.com\n"
                 "public_ip: false\ncertificate: null\n", AWS)
    assert named(report, "gw1-net-nat", "aws:ec2/natGateway:NatGateway")
    rt = named(report, "gw1-net-private-rt", "aws:ec2/routeTable:RouteTable")["inputs"]
    assert rt["routes"][0]["natGatewayId"] == "gw1-net-nat-id"
    assoc = {r["name"]: r["inputs"]["routeTableId"]
             for r in by_type(report, "aws:ec2/routeTableAssociation:RouteTableAssociation")}
    assert assoc == {"gw1-subnet-0-rt": "gw1-net-private-rt-id",
                     "gw1-subnet-1-rt": "gw1-net-private-rt-id",
                     "gw1-public-rt": "gw1-net-public-rt-id"}
    gcp = _gw(tmp_path, "backend: gcp\nregion: us-east1\ndomain: gpu.example.com\n"
              "public_ip: false\ncertificate: null\n", GCP)
    assert named(gcp, "gw1-net-nat", "gcp:compute/routerNat:RouterNat")
    assert report.violations == gcp.violations == ()


def test_a_gcp_load_balancer_gets_its_proxy_only_subnet(tmp_path: Path) -> None:
    report = _gw(tmp_path, "backend: gcp\nregion: us-east1\ndomain: gpu.example.com\n"
                 f"replicas: 2\nload_balancer: {{type: alb}}\ncertificate:\n  type: gcp-cm\n"
                 f"  name: {CM}\n", GCP)
    proxy = named(report, "gw1-proxy", "gcp:compute/subnetwork:Subnetwork")["inputs"]
    assert (proxy["purpose"], proxy["role"]) == ("REGIONAL_MANAGED_PROXY", "ACTIVE")
    assert not [r for r in report.resources if r["type"] in VM_TYPES]
    text = render_plan_text(report)
    assert f"tls:      gcp-cm {CM} on dstack's regional external Application Load Balancer " \
        "load balancer" in text


def test_a_gateway_shares_a_fleets_network_when_the_backends_file_says(tmp_path: Path
                                                                       ) -> None:
    fleet = write(tmp_path, "f.yml", "type: fleet\nname: train\nnodes: 1\nbackends: [aws]\n"
                  "regions: [us-east-1]\nresources: {gpu: L4}\n")
    gw = write(tmp_path, "g.yml", "type: gateway\nname: gw1\nbackend: aws\nregion: us-east-1\n"
               "domain: gpu.example.com\n")
    backends = write(tmp_path, "b.yml", AWS + "gateways:\n  gw1: {fleet: train}\n")
    report = plan_files([fleet, gw, backends])
    assert not [v for v in by_type(report, "aws:ec2/vpc:Vpc") if v["name"].startswith("gw1")]
    block = named(report, "gw1-net-cidr",
                  "aws:ec2/vpcIpv4CidrBlockAssociation:VpcIpv4CidrBlockAssociation")["inputs"]
    assert block["vpcId"] == "train-vpc-id"
    gw_plan = report.gateways[0]
    assert block["cidrBlock"] == gw_plan.network.cidr and gw_plan.project == "train"
    subnet = named(report, "gw1-subnet-0", "aws:ec2/subnet:Subnet")
    assert subnet["inputs"]["vpcId"] == "train-vpc-id"
    assert named(report, "gw1-subnet-0-rt")["inputs"]["routeTableId"] == \
        "train-vpc-public-rt-id"
    text = render_plan_text(report)
    assert "network:  fleet train's network (project train): adds gw1-subnet-0" in text


def test_sharing_a_fleet_is_checked(tmp_path: Path) -> None:
    fleet = write(tmp_path, "f.yml", "type: fleet\nname: train\nnodes: 1\nbackends: [aws]\n"
                  "regions: [us-east-1]\nresources: {gpu: L4}\n")

    def codes(gw_body: str, settings: str, backends: str = AWS) -> list[str]:
        gw = write(tmp_path, "g.yml", "type: gateway\nname: gw1\n" + gw_body)
        b = write(tmp_path, "b.yml", backends + "gateways:\n  gw1: " + settings + "\n")
        return [d.code for d in compile_inputs(validate_paths([fleet, gw, b]).inputs,
                                               load_catalog()).diagnostics if d.is_error]
    aws = "backend: aws\nregion: us-east-1\n"
    assert codes(aws, "{fleet: nope}") == ["G018"]
    assert codes("backend: aws\nregion: eu-west-1\n", "{fleet: train}") == ["G019"]
    assert codes(aws, "{fleet: train}", AWS + "    vpc_name: shared\n") == ["G020"]
    public = AWS + "    public_ips: true\n"
    assert codes(aws + "public_ip: false\ncertificate: null\n", "{fleet: train}",
                 public) == ["G021"]
    assert codes(aws, "{fleet: train}", public) == []


def test_a_kept_address_of_the_old_gateway_vm_keeps_its_name_and_protection(
        tmp_path: Path) -> None:
    """Migration: the static address gpufleet's own gateway VM had stays (same URN, same
    inputs, protected) until the user releases it."""
    for backend, region, extra, typ in (
            ("aws", "us-east-1", AWS, "aws:ec2/eip:Eip"),
            ("gcp", "us-east1", GCP, "gcp:compute/address:Address"),
            ("azure", "eastus", AZURE, "azure-native:network:PublicIPAddress")):
        report = _gw(tmp_path, f"backend: {backend}\nregion: {region}\n"
                     "domain: gpu.example.com\n",
                     extra + "gateways:\n  gw1: {old_address: keep}\n")
        kept = named(report, "gw1-ip", typ)
        assert kept["protect"] is True
        assert kept["urn"].endswith(f"gpufleet:{backend}:Gateway${typ}::gw1-ip")
        assert "kept:     gw1-ip" in render_plan_text(report)
    # An ALB gateway on AWS had no address of its own: nothing to keep
    alb = _gw(tmp_path, "backend: aws\nregion: us-east-1\ndomain: gpu.example.com\n"
              "load_balancer: {type: alb}\ncertificate: null\n",
              AWS + "gateways:\n  gw1: {old_address: keep}\n")
    assert not by_type(alb, "aws:ec2/eip:Eip")


def test_a_created_zone_is_made_at_once_and_protected(tmp_path: Path) -> None:
    report = _gw(tmp_path, "backend: aws\nregion: us-east-1\ndomain: gpu.example.com\n",
                 "backends:\n  - type: aws\ngateways:\n  gw1: {create_dns_zone: true, "
                 "dns_zone: example.com}\n")
    zone = named(report, "gw1-zone", "aws:route53/zone:Zone")
    assert zone["protect"] is True and zone["inputs"]["name"] == "example.com"
    assert not [t for t, _ in report.lookups if t == "aws:route53/getZone:getZone"]
    synced_report = _gw(tmp_path, "backend: aws\nregion: us-east-1\ndomain: gpu.example.com\n",
                        "backends:\n  - type: aws\ngateways:\n  gw1: {create_dns_zone: true, "
                        "dns_zone: example.com}\n",
                        synced=synced("gw1", "gateway-gw1", "aws", "us-east-1", "192.0.2.1"))
    rec = named(synced_report, "gw1-dns", "aws:route53/record:Record")
    assert rec["deleted_with"] == named(synced_report, "gw1-zone")["urn"]


def test_zone_is_the_domains_parent_unless_dns_zone_is_set(tmp_path: Path) -> None:
    report = _gw(tmp_path, "backend: gcp\nregion: us-east1\ndomain: a.gpu.example.com\n", GCP,
                 synced=synced("gw1", "gateway-gw1", "gcp", "us-east1", "192.0.2.1"))
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
    assert _codes(tmp_path, azure, "backends:\n  - type: azure\n") == ["G010"]
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
    extra = {"gcp": GCP, "aws": AWS, "azure": AZURE}
    report = _gw(tmp_path, f"backend: {backend}\nregion: {region}\ndomain: {domain}\n",
                 extra[backend], synced=synced("gw1", "gateway-gw1", backend, region,
                                               "192.0.2.1"))
    records = [r for r in report.resources if r["type"] in RECORDS]
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
