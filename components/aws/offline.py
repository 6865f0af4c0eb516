"""AWS's offline answers for `gpufleet plan`: its lookups and the computed outputs its
resources' dependents read. Every value is a placeholder that says so (``mock-...``)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from ..registry import Invoke


def _aws_ami(args: dict[str, Any]) -> dict[str, Any]:
    name = next((f["values"][0] for f in args.get("filters", []) if f.get("name") == "name"),
                "mock")
    return {"id": "ami-0mock0000000000000", "imageId": "ami-0mock0000000000000",
            "name": name.replace("*", "mock"), "architecture": "x86_64",
            "ownerId": (args.get("owners") or ["amazon"])[0]}


def _aws_azs(args: dict[str, Any]) -> dict[str, Any]:
    region = "mock-region"
    return {"id": region, "names": [f"{region}-1a", f"{region}-1b", f"{region}-1c"],
            "zoneIds": ["mock-az1", "mock-az2", "mock-az3"]}


def _aws_offerings(args: dict[str, Any]) -> dict[str, Any]:
    # Offline every AZ offers every type; `pulumi preview` reads the real offerings.
    types = next((f["values"] for f in args.get("filters") or []
                  if f.get("name") == "instance-type"), ["mock"])
    zones = _aws_azs({})["names"]
    return {"id": "mock-offerings", "locations": zones, "locationTypes":
            ["availability-zone"] * len(zones), "instanceTypes": [types[0]] * len(zones)}


def _aws_vpc(args: dict[str, Any]) -> dict[str, Any]:
    key = args.get("id") or (args.get("tags") or {}).get("Name") or "default"
    return {"id": key if str(key).startswith("vpc-") else f"vpc-mock-{key}",
            "cidrBlock": "mock-existing-range", "default": bool(args.get("default"))}


def _aws_subnets(args: dict[str, Any]) -> dict[str, Any]:
    return {"id": "mock-subnets", "ids": ["subnet-mock-a", "subnet-mock-b"]}


def _aws_route53_zone(args: dict[str, Any]) -> dict[str, Any]:
    name = str(args.get("name", "")).rstrip(".")
    return {"id": f"Z-MOCK-{name}", "zoneId": f"Z-MOCK-{name}", "name": f"{name}.",
            "privateZone": bool(args.get("privateZone"))}


def _aws_lb_zone(args: dict[str, Any]) -> dict[str, Any]:
    return {"id": "Z-MOCK-ELB", "loadBalancerType": args.get("loadBalancerType"),
            "region": args.get("region")}


def invokes(dns_zones: Iterable[str]) -> dict[str, Invoke]:
    return {
        "aws:lb/getHostedZoneId:getHostedZoneId": _aws_lb_zone,
        "aws:route53/getZone:getZone": _aws_route53_zone,
        "aws:ec2/getAmi:getAmi": _aws_ami,
        "aws:index/getAvailabilityZones:getAvailabilityZones": _aws_azs,
        "aws:ec2/getInstanceTypeOfferings:getInstanceTypeOfferings": _aws_offerings,
        "aws:ec2/getVpc:getVpc": _aws_vpc,
        "aws:ec2/getSubnets:getSubnets": _aws_subnets,
    }


def outputs(typ: str, name: str, inputs: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if typ == "aws:ec2/instance:Instance":
        out["primaryNetworkInterfaceId"] = f"eni-mock-{name}"
        out["privateIp"] = f"mock-private-ip-of-{name}"
        out["publicIp"] = f"mock-public-ip-of-{name}"
    elif typ == "aws:ec2/launchTemplate:LaunchTemplate":
        out["latestVersion"] = 1
    elif typ == "aws:ec2/eip:Eip":
        out["allocationId"] = f"eipalloc-mock-{name}"
        out["publicIp"] = f"mock-public-ip-of-{name}"
    elif typ == "aws:ec2/networkInterface:NetworkInterface":
        out["privateIp"] = f"mock-private-ip-of-{name}"
    elif typ in ("aws:ec2/placementGroup:PlacementGroup", "aws:iam/role:Role",
                 "aws:iam/instanceProfile:InstanceProfile"):
        out["name"] = f"{name}-mock"
    elif typ == "aws:ec2/keyPair:KeyPair":
        out["keyName"] = f"{name}-mock"
    return out
