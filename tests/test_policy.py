"""Guardrails: every rule against a passing and a failing resource through pulumi-policy's own
argument types, the offline runner over the examples (0 violations) and over insecure input
(each rule fires), the cost guard, and the README's rule table kept in sync."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from pulumi_policy import (
    EnforcementLevel,
    PolicyCustomTimeouts,
    PolicyResourceOptions,
    ResourceValidationArgs,
    ResourceValidationPolicy,
)

from gpufleet.cli import main
from gpufleet.cli.runs import run_policies
from gpufleet.input.validate import validate_paths
from gpufleet.policy.rules import RULES, resource_policies
from gpufleet.views import rules_table

from planutil import EXAMPLES, TEST_KEY, examples_plan_json, write

URN = "urn:pulumi:dev::gpufleet::gpufleet:aws:Fleet$aws:ec2/securityGroup:SecurityGroup::f-sg"
FLEET_TAGS = {"managed-by": "gpufleet", "gpufleet-fleet": "f"}


def args(typ: str, props: dict[str, Any], name: str = "f-x", urn: str = URN,
         protect: bool = False, config: dict[str, Any] | None = None) -> ResourceValidationArgs:
    opts = PolicyResourceOptions(protect, [], False, [], PolicyCustomTimeouts(0, 0, 0), [])
    return ResourceValidationArgs(typ, props, urn, name, opts, None, config or {})


GW_URN = "urn:pulumi:dev::gpufleet::gpufleet:aws:Gateway${}::{}"


def test_a_nat_address_in_a_gateway_network_is_not_the_gateway_address() -> None:
    """A private or load-balanced gateway's NAT has an unprotected EIP in the gateway's
    network component; no DNS record points at it, so the rule leaves it alone."""
    nat = args("aws:ec2/eip:Eip", {"tags": {"gpufleet-gateway": "gw"}},
               urn="urn:pulumi:dev::gpufleet::gpufleet:aws:Gateway$gpufleet:aws:Network$"
                   "aws:ec2/eip:Eip::gw-nat-ip")
    assert fires("gateway-addresses-protected", nat) == []


def fires(rule: str, a: ResourceValidationArgs) -> list[str]:
    found: list[str] = []
    validate = next(r for r in RULES if r.name == rule).validate
    validate(a, lambda message, urn=None: found.append(message))
    return found


SG = "aws:ec2/securityGroup:SecurityGroup"
LT = "aws:ec2/launchTemplate:LaunchTemplate"
GI = "gcp:compute/instance:Instance"
CASES: dict[str, tuple[ResourceValidationArgs, ResourceValidationArgs]] = {
    "no-world-ingress": (
        args(SG, {"ingress": [{"protocol": "tcp", "fromPort": 22, "toPort": 22,
                               "cidrBlocks": ["203.0.113.0/24"]}]}),
        # a gateway no longer opens web ports: dstack opens its own gateway's
        args("gcp:compute/firewall:Firewall", {"allows": [{"protocol": "tcp",
             "ports": ["80", "443"]}], "sourceRanges": ["0.0.0.0/0"]}, "gw-web",
             GW_URN.format("gcp:compute/firewall:Firewall", "gw-web"))),
    "ssh-only-from-allowed": (
        args(SG, {"ingress": [{"protocol": "tcp", "fromPort": 22, "toPort": 22,
                               "cidrBlocks": ["203.0.113.0/24"]}]},
             config={"ssh_cidrs": ["203.0.113.0/24"]}),
        args(SG, {"ingress": [{"protocol": "tcp", "fromPort": 22, "toPort": 22,
                               "cidrBlocks": ["198.51.100.7/32"]}]},
             config={"ssh_cidrs": ["203.0.113.0/24"]})),
    "no-public-ip-on-nodes": (
        args(GI, {"networkInterfaces": [{"accessConfigs": [{}]}]},
             config={"public_ips": True}),
        args(GI, {"networkInterfaces": [{"network": "n", "accessConfigs": [{}]}]})),
    "k3s-ports-private": (
        # a fleet handed to SkyPilot: k3s's ports from the group itself and its subnet
        args(SG, {"ingress": [{"protocol": "tcp", "fromPort": 6443, "toPort": 6443,
                               "self": True},
                              {"protocol": "udp", "fromPort": 8472, "toPort": 8472,
                               "cidrBlocks": ["10.30.0.0/18"]}]}),
        args("gcp:compute/firewall:Firewall", {"allows": [{"protocol": "tcp",
             "ports": ["2379-2380"]}], "sourceRanges": ["198.51.100.0/24"]})),
    "aws-imdsv2": (
        args(LT, {"metadataOptions": {"httpTokens": "required",
                                      "httpPutResponseHopLimit": 2}}),
        args(LT, {"metadataOptions": {"httpTokens": "optional"}})),
    "aws-ebs-encrypted": (
        args(LT, {"blockDeviceMappings": [{"deviceName": "/dev/sda1",
                                           "ebs": {"encrypted": "true"}}]}),
        args("aws:ec2/instance:Instance", {"rootBlockDevice": {"encrypted": False}})),
    "aws-cluster-sg-self-only": (
        args(SG, {"ingress": [{"protocol": "-1", "fromPort": 0, "toPort": 0, "self": True}]}),
        args(SG, {"ingress": [{"protocol": "-1", "fromPort": 0, "toPort": 0,
                               "cidrBlocks": ["10.0.0.0/8"]}]})),
    "gcp-os-login-or-keys": (
        args(GI, {"metadata": {"enable-oslogin": "TRUE"}}),
        args(GI, {"metadata": {}})),
    "gcp-no-default-sa-full-scope": (
        args(GI, {"serviceAccount": {"email": "ml@p.iam.gserviceaccount.com",
                                     "scopes": ["cloud-platform"]}}),
        args(GI, {"serviceAccount": {"email": "1-compute@developer.gserviceaccount.com",
                                     "scopes": ["cloud-platform"]}})),
    "gcp-serial-port-off": (
        args(GI, {"metadata": {"serial-port-enable": "FALSE"}}),
        args(GI, {"metadata": {"serial-port-enable": "TRUE"}})),
    "azure-password-auth-off": (
        args("azure-native:compute:VirtualMachine", {"osProfile": {"linuxConfiguration": {
            "disablePasswordAuthentication": True}}}),
        args("azure-native:compute:VirtualMachineScaleSet", {"virtualMachineProfile": {
            "osProfile": {"linuxConfiguration": {}}}})),
    "azure-nsg-no-allow-any": (
        args("azure-native:network:NetworkSecurityGroup", {"securityRules": [{
            "direction": "Inbound", "access": "Allow", "destinationPortRanges": ["22"],
            "sourceAddressPrefixes": ["203.0.113.0/24"]}]}),
        args("azure-native:network:NetworkSecurityGroup", {"securityRules": [{
            "direction": "Inbound", "access": "Allow", "destinationPortRange": "*",
            "sourceAddressPrefix": "*"}]})),
    "gateway-addresses-protected": (
        args("gcp:compute/address:Address", {"labels": {"gpufleet-gateway": "gw"}},
             protect=True, urn=GW_URN.format("gcp:compute/address:Address", "gw-ip")),
        args("aws:ec2/eip:Eip", {"tags": {"gpufleet-gateway": "gw"}},
             urn=GW_URN.format("aws:ec2/eip:Eip", "gw-ip"))),
    "gateway-no-instances": (
        args("aws:ec2/subnet:Subnet", {"tags": {"gpufleet-gateway": "gw"}},
             urn=GW_URN.format("aws:ec2/subnet:Subnet", "gw-subnet-0")),
        args("gcp:compute/instance:Instance", {"labels": {"gpufleet-gateway": "gw"}},
             urn=GW_URN.format("gcp:compute/instance:Instance", "gw-vm"))),
    "storage-private-encrypted-protected": (
        args("aws:efs/fileSystem:FileSystem", {"encrypted": True}, "fs-home", protect=True),
        args("azure-native:storage:StorageAccount", {"networkRuleSet": {
            "defaultAction": "Allow"}, "allowBlobPublicAccess": False}, "fs-share",
            protect=True)),
    "lambda-ssh-only": (
        args("pulumi-python:dynamic/lambda:FirewallRuleset", {"rules": [
            {"protocol": "tcp", "port_range": [22, 22], "source_network": "203.0.113.0/24",
             "description": "ssh"}]}),
        args("pulumi-python:dynamic/lambda:FirewallRuleset", {"rules": [
            {"protocol": "all", "source_network": "203.0.113.0/24", "description": "all"}]})),
    "bucket-access-scoped": (
        args("gcp:storage/bucketIAMMember:BucketIAMMember",
             {"member": "serviceAccount:n@p.iam.gserviceaccount.com",
              "role": "roles/storage.objectViewer"}),
        args("gcp:storage/bucketIAMMember:BucketIAMMember",
             {"member": "allUsers", "role": "roles/storage.objectViewer"})),
    "dns-ttl": (
        args("gcp:dns/recordSet:RecordSet", {"ttl": 300}),
        args("aws:route53/record:Record", {"ttl": 86400})),
    "ownership-tags": (
        args(LT, {"tags": {**FLEET_TAGS, "team": "ml"}}, config={"tags": {"team": "ml"}}),
        args(LT, {"tags": {"Name": "x"}})),
}


def test_every_rule_has_a_case() -> None:
    assert sorted(CASES) == sorted(r.name for r in RULES)


@pytest.mark.parametrize("rule", sorted(CASES))
def test_rule_passes_and_fails(rule: str) -> None:
    good, bad = CASES[rule]
    assert fires(rule, good) == []
    assert fires(rule, bad), f"{rule} did not fire"


def test_the_pack_wraps_every_rule_as_a_resource_validation_policy() -> None:
    policies = resource_policies({"dns-ttl": "mandatory"})
    assert all(isinstance(p, ResourceValidationPolicy) for p in policies)
    assert [p.name for p in policies] == [r.name for r in RULES]
    levels = {p.name: p.enforcement_level for p in policies}
    assert levels["dns-ttl"] == EnforcementLevel.MANDATORY
    assert levels["ownership-tags"] == EnforcementLevel.ADVISORY
    assert all(r.remediation and r.how_off and r.description for r in RULES)
    assert all("--policy-config" in r.how_off for r in RULES)


def test_every_example_plans_with_no_violation(tmp_path: Path) -> None:
    assert examples_plan_json()["policy"] == []


def test_insecure_backends_fire_and_are_traced_to_the_yaml(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    fleet = write(tmp_path, "f.yml", "type: fleet\nname: f1\nnodes: 1\nbackends: [aws]\n"
                  "regions: [us-east-1]\nresources:\n  gpu: L4\n")
    b = write(tmp_path, "b.yml", f"access:\n  ssh_public_key: {TEST_KEY}\nbackends:\n"
              "  - type: aws\n    ssh_cidrs: [0.0.0.0/0]\n")
    assert main(["plan", fleet, b]) == 1
    err = capsys.readouterr().err
    assert f"gpufleet plan: policy: {fleet}:2: no-world-ingress: f1-bastion-sg admits 22 " \
           "from 0.0.0.0/0" in err
    assert main(["plan", "--policy", "advisory", fleet, b]) == 0
    capsys.readouterr()
    levels = write(tmp_path, "levels.json", '{"no-world-ingress": "advisory"}')
    assert main(["plan", "--policy-config", levels, fleet, b]) == 0


def test_the_offline_runner_fires_every_rule_on_insecure_resources(tmp_path: Path) -> None:
    validated = validate_paths([write(tmp_path, "b.yml", "backends:\n  - type: aws\n"
                                      "    ssh_cidrs: [203.0.113.0/24]\n")])
    resources = [{"urn": a.urn.replace("f-sg", f"f-{i}"), "type": a.resource_type,
                  "name": f"f-{i}", "inputs": dict(a.props), "parent": "", "protect": False}
                 for i, (_, a) in enumerate(CASES[r] for r in sorted(CASES))]
    violations = run_policies(resources, validated.inputs)
    assert {v.rule for v in violations} == set(CASES)
    assert all(v.remediation and v.where.endswith("b.yml:2") for v in violations)


def test_cost_guards(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["plan", str(EXAMPLES), "--max-cost-per-hour", "100"]) == 1
    err = capsys.readouterr().err
    # the whole bill: nodes, and the bastions, NAT gateways, addresses, disks and gateways
    assert "cost: the fleets cost $920.47/h, over --max-cost-per-hour 100" in err
    assert "nd-h100 $393.45/h" in err
    # a plan starts from an empty stack: everything it creates is new, locked or not
    assert main(["plan", str(EXAMPLES), "--max-cost-increase", "5"]) == 1
    assert "the cost rises from $0" in capsys.readouterr().err
    fleet = write(tmp_path, "f.yml", "type: fleet\nname: f1\nnodes: 0..2\nbackends: [aws]\n"
                  "regions: [us-east-1]\nresources:\n  gpu: L4\n")
    backends = write(tmp_path, "b.yml", "backends:\n  - type: aws\n    public_ips: true\n")
    # nothing billed: $0 -> $0
    assert main(["plan", fleet, backends, "--max-cost-increase", "5"]) == 0


def test_readme_rule_table_matches_the_pack() -> None:
    readme = (Path(__file__).resolve().parent.parent / "README.md").read_text()
    assert rules_table(RULES) in readme, "regenerate with `gpufleet policy list --format markdown`"


def test_the_packs_own_lists_cover_every_builtin_clouds_declared_types() -> None:
    """The pack stands alone with its own lists; what gpufleet's built-in plugins declare
    (addresses, zones, records, stored data, machines, ways in) must already be in them, so
    the pack loses nothing where only its own lists count."""
    from gpufleet.policy import tokens

    declared = tokens.declared()
    assert set(declared) == set(tokens.OWN)
    missing = {k: sorted(v - set(tokens.OWN[k])) for k, v in declared.items()
               if v - set(tokens.OWN[k])}
    assert missing == {}
    assert "35.235.240.0/20" in declared["ssh_sources"]  # read from gcp's IAP way in
    assert "pulumi-python:dynamic/lambda:Filesystem" in declared["stored_data"]
