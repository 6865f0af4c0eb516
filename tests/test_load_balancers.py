"""Gateways behind a load balancer, as dstack 0.22.5 builds them: `load_balancer: {type: alb}`
with no certificate or ACM on AWS, with no certificate or a Certificate Manager certificate
(`gcp-cm`) on GCP; and dstack's own gateway examples plan with no policy violation."""

from __future__ import annotations

from pathlib import Path

from gpufleet.review import PlanReport
from gpufleet.views.plan import render_plan_text

from planutil import by_type, named, plan_files, write

CM = "projects/p1/locations/us-east1/certificates/wild"
GCP = "backends:\n  - type: gcp\n    project_id: p1\n    ssh_cidrs: [203.0.113.0/24]\n"
AWS = "backends:\n  - type: aws\n    ssh_cidrs: [203.0.113.0/24]\n"
ARN = "arn:aws:acm:eu-west-1:123456789012:certificate/abc"


def gateway(tmp: Path, body: str, backends: str) -> PlanReport:
    return plan_files([write(tmp, "g.yml", "type: gateway\nname: gw1\n" + body),
                       write(tmp, "b.yml", backends)])


def test_gcp_cm_certificate_on_a_regional_external_load_balancer(tmp_path: Path) -> None:
    report = gateway(tmp_path, "backend: gcp\nregion: us-east1\ndomain: gpu.example.com\n"
                     f"replicas: 2\nload_balancer: {{type: alb}}\ncertificate:\n  type: gcp-cm\n"
                     f"  name: {CM}\n", GCP)
    assert report.violations == ()
    # One protected static address, the load balancer's; the record points at it.
    addresses = by_type(report, "gcp:compute/address:Address")
    assert [(a["name"], a["protect"], a["inputs"]["addressType"]) for a in addresses] == [
        ("gw1-ip", True, "EXTERNAL")]
    rule = named(report, "gw1-alb-fr", "gcp:compute/forwardingRule:ForwardingRule")["inputs"]
    assert (rule["portRange"], rule["loadBalancingScheme"], rule["ipProtocol"]) == (
        "443", "EXTERNAL_MANAGED", "TCP")
    assert rule["ipAddress"] == "mock-address-of-gw1-ip"
    assert "subnetwork" not in rule
    proxy = named(report, "gw1-alb-https",
                  "gcp:compute/regionTargetHttpsProxy:RegionTargetHttpsProxy")["inputs"]
    assert proxy["certificateManagerCertificates"] == [CM]
    assert not by_type(report, "gcp:compute/regionTargetHttpProxy:RegionTargetHttpProxy")
    service = named(report, "gw1-alb-bs",
                    "gcp:compute/regionBackendService:RegionBackendService")["inputs"]
    assert (service["protocol"], service["portName"], len(service["backends"])) == (
        "HTTP", "http", 2)
    groups = by_type(report, "gcp:compute/instanceGroup:InstanceGroup")
    assert sorted(g["name"] for g in groups) == ["gw1-vm-0-ig", "gw1-vm-1-ig"]
    assert all(g["inputs"]["namedPorts"] == [{"name": "http", "port": 80}] for g in groups)
    check = named(report, "gw1-alb-hc", "gcp:compute/regionHealthCheck:RegionHealthCheck")
    assert check["inputs"]["httpHealthCheck"]["port"] == 80
    # The instances: no address of their own, egress through Cloud NAT; HTTP only from the
    # load balancer's proxy-only subnet and Google's health checkers.
    for vm in by_type(report, "gcp:compute/instance:Instance"):
        assert "accessConfigs" not in vm["inputs"]["networkInterfaces"][0]
    assert by_type(report, "gcp:compute/routerNat:RouterNat")
    proxy_subnet = named(report, "gw1-proxy", "gcp:compute/subnetwork:Subnetwork")["inputs"]
    assert (proxy_subnet["purpose"], proxy_subnet["role"]) == ("REGIONAL_MANAGED_PROXY",
                                                               "ACTIVE")
    web = named(report, "gw1-web", "gcp:compute/firewall:Firewall")["inputs"]
    assert web["sourceRanges"] == [proxy_subnet["ipCidrRange"], "35.191.0.0/16",
                                   "130.211.0.0/22"]
    assert web["allows"] == [{"protocol": "tcp", "ports": ["80"]}]
    rec = named(report, "gw1-dns", "gcp:dns/recordSet:RecordSet")["inputs"]
    assert rec["type"] == "A" and rec["rrdatas"] == ["mock-address-of-gw1-ip"]
    text = render_plan_text(report)
    assert "address:  gw1-ip (static external address of the load balancer, protected)" in text
    assert f"tls:      gcp-cm {CM} on regional external Application Load Balancer gw1-alb" \
        in text


def test_a_private_gcp_gateway_gets_an_internal_http_load_balancer(tmp_path: Path) -> None:
    report = gateway(tmp_path, "backend: gcp\nregion: us-east1\npublic_ip: false\n"
                     "load_balancer: {type: alb}\ncertificate: null\n", GCP)
    assert report.violations == ()
    rule = named(report, "gw1-alb-fr", "gcp:compute/forwardingRule:ForwardingRule")["inputs"]
    assert (rule["portRange"], rule["loadBalancingScheme"]) == ("80", "INTERNAL_MANAGED")
    assert rule["subnetwork"] == "mock://gcp/subnetwork/gw1-subnet"  # the instances' subnet
    address = named(report, "gw1-ip", "gcp:compute/address:Address")["inputs"]
    assert address["addressType"] == "INTERNAL"
    assert by_type(report, "gcp:compute/regionTargetHttpProxy:RegionTargetHttpProxy")
    assert "tls:      none: plain HTTP on regional internal Application Load Balancer gw1-alb" \
        in render_plan_text(report)


def test_an_aws_alb_without_a_certificate_serves_plain_http(tmp_path: Path) -> None:
    report = gateway(tmp_path, "backend: aws\nregion: eu-west-1\ndomain: gpu.example.com\n"
                     "load_balancer: {type: alb}\ncertificate: null\n", AWS)
    assert report.violations == ()
    listeners = by_type(report, "aws:lb/listener:Listener")
    assert [(x["name"], x["inputs"]["port"], x["inputs"]["defaultActions"][0]["type"])
            for x in listeners] == [("gw1-http", 80, "forward")]
    alb_sg = named(report, "gw1-alb-web", "aws:ec2/securityGroup:SecurityGroup")["inputs"]
    assert [(r["fromPort"], r["cidrBlocks"]) for r in alb_sg["ingress"]] == [
        (80, ["0.0.0.0/0"])]
    assert not [e for e in by_type(report, "aws:ec2/eip:Eip") if e["name"] != "gw1-net-nat-eip"]


def test_dstacks_own_gateway_examples_plan_with_no_violation(tmp_path: Path) -> None:
    """The private gateway and the ACM gateway of dstack's gateway docs: their NAT's EIP is
    not the gateway's address, and the plan names every source and address."""
    private = gateway(tmp_path, "backend: aws\nregion: eu-west-1\ndomain: example.com\n"
                      "public_ip: false\ncertificate: null\n", AWS)
    assert private.violations == ()
    nat = named(private, "gw1-net-nat-eip", "aws:ec2/eip:Eip")
    assert nat["protect"] is False  # egress only; nothing points at it
    assert named(private, "gw1-ip", "aws:ec2/networkInterface:NetworkInterface")["protect"]
    acm = gateway(tmp_path, "backend: aws\nregion: eu-west-1\ndomain: example.com\n"
                  f"certificate:\n  type: acm\n  arn: {ARN}\n", AWS)
    assert acm.violations == ()
    text = render_plan_text(acm)
    assert "address:  none of its own: the load balancer's DNS name" in text
    assert "firewall: tcp 80 from the load balancer; tcp 22 from 203.0.113.0/24 (the " \
        "instances)" in text
    assert "tcp 80,443 from 0.0.0.0/0 (the load balancer)" in text
    assert " from ;" not in text and " from \n" not in text
