"""Offline answers for `gpufleet plan`: strict invoke mocks and computed outputs per type.

Every value here is a placeholder that says so (``mock-...``); `gpufleet plan` prints which
lookups were answered offline so reviewers know what the real `pulumi preview` will read.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

Invoke = Callable[[dict[str, Any]], dict[str, Any]]


def _gcp_network(args: dict[str, Any]) -> dict[str, Any]:
    name, project = args.get("name", ""), args.get("project") or "mock-project"
    link = f"https://www.googleapis.com/compute/v1/projects/{project}/global/networks/{name}"
    return {"id": f"projects/{project}/global/networks/{name}", "name": name,
            "selfLink": link, "project": project}


def _gcp_subnetwork(args: dict[str, Any]) -> dict[str, Any]:
    name, region = args.get("name", ""), args.get("region", "")
    project = args.get("project") or "mock-project"
    link = (f"https://www.googleapis.com/compute/v1/projects/{project}/regions/{region}"
            f"/subnetworks/{name}")
    return {"id": link, "name": name, "selfLink": link, "region": region,
            "ipCidrRange": "mock-existing-range"}


def _gcp_subnetworks(args: dict[str, Any]) -> dict[str, Any]:
    net = str(args.get("filter", "")).rsplit("/", 1)[-1].rstrip("$")
    region = args.get("region", "")
    subs = [_gcp_subnetwork({"name": f"{net}-mock-subnet-{i}", "region": region,
                             "project": args.get("project")}) for i in range(8)]
    return {"subnetworks": [{**s, "networkName": net, "networkSelfLink": net,
                             "description": "mock"} for s in subs],
            "id": f"mock-{net}", "filter": args.get("filter")}


def _gcp_client_config(args: dict[str, Any]) -> dict[str, Any]:
    return {"project": "mock-project", "region": "", "zone": "", "accessToken": "mock",
            "id": "mock-client-config"}


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


def _azure_client_config(args: dict[str, Any]) -> dict[str, Any]:
    return {"subscriptionId": "00000000-mock-subscription", "tenantId": "mock-tenant",
            "clientId": "mock-client", "objectId": "mock-object"}


def _azure_vnet(args: dict[str, Any]) -> dict[str, Any]:
    rg, name = args.get("resourceGroupName", ""), args.get("virtualNetworkName", "")
    vid = (f"/subscriptions/00000000-mock-subscription/resourceGroups/{rg}/providers/"
           f"Microsoft.Network/virtualNetworks/{name}")
    return {"id": vid, "name": name, "location": "mock",
            "subnets": [{"id": f"{vid}/subnets/mock-subnet-0", "name": "mock-subnet-0"}]}


def _aws_route53_zone(args: dict[str, Any]) -> dict[str, Any]:
    name = str(args.get("name", "")).rstrip(".")
    return {"id": f"Z-MOCK-{name}", "zoneId": f"Z-MOCK-{name}", "name": f"{name}.",
            "privateZone": bool(args.get("privateZone"))}


def _gcp_zones(args: dict[str, Any]) -> dict[str, Any]:
    region = args.get("region", "mock-region")
    return {"id": f"mock-{region}", "names": [f"{region}-a", f"{region}-b", f"{region}-c"]}


def _gcp_managed_zones_for(dns_names: Iterable[str]) -> Invoke:
    """The project's Cloud DNS zones, offline: a public and a private zone for every zone the
    plan's gateways look for (the lookup's arguments carry only the project)."""
    wanted = sorted({n.rstrip(".").lower() + "." for n in dns_names})

    def answer(args: dict[str, Any]) -> dict[str, Any]:
        zones: list[dict[str, Any]] = [
            {"name": f"mock-{n.rstrip('.').replace('.', '-')}-{vis}", "dnsName": n,
             "visibility": vis, "id": "mock", "managedZoneId": 1,
             "project": args.get("project") or "mock-project", "description": "mock",
             "nameServers": []} for n in wanted for vis in ("public", "private")]
        return {"id": "mock-zones", "managedZones": zones}
    return answer


INVOKES: dict[str, Invoke] = {
    "aws:route53/getZone:getZone": _aws_route53_zone,
    "gcp:compute/getZones:getZones": _gcp_zones,
    "gcp:dns/getManagedZones:getManagedZones": _gcp_managed_zones_for(()),
    "azure-native:authorization:getClientConfig": _azure_client_config,
    "azure-native:network:getVirtualNetwork": _azure_vnet,
    "aws:ec2/getAmi:getAmi": _aws_ami,
    "aws:index/getAvailabilityZones:getAvailabilityZones": _aws_azs,
    "aws:ec2/getInstanceTypeOfferings:getInstanceTypeOfferings": _aws_offerings,
    "aws:ec2/getVpc:getVpc": _aws_vpc,
    "aws:ec2/getSubnets:getSubnets": _aws_subnets,
    "gcp:organizations/getClientConfig:getClientConfig": _gcp_client_config,
    "gcp:compute/getNetwork:getNetwork": _gcp_network,
    "gcp:compute/getSubnetwork:getSubnetwork": _gcp_subnetwork,
    "gcp:compute/getSubnetworks:getSubnetworks": _gcp_subnetworks,
}


def invokes_for(dns_zones: Iterable[str]) -> dict[str, Invoke]:
    """The offline answers for a run whose gateways look up these DNS zones."""
    return {**INVOKES, "gcp:dns/getManagedZones:getManagedZones":
            _gcp_managed_zones_for(dns_zones)}


def outputs(typ: str, name: str, inputs: dict[str, Any]) -> dict[str, Any]:
    """Computed outputs that downstream inputs read (self links, names)."""
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
    elif typ == "aws:lb/loadBalancer:LoadBalancer":
        out.update(dnsName=f"{name}.mock.elb.amazonaws.com", zoneId="Z-MOCK-ELB",
                   arn=f"arn:mock:{name}")
    elif typ == "aws:lb/targetGroup:TargetGroup":
        out["arn"] = f"arn:mock:{name}"
    elif typ in ("aws:ec2/placementGroup:PlacementGroup", "aws:iam/role:Role",
                 "aws:iam/instanceProfile:InstanceProfile"):
        out["name"] = f"{name}-mock"
    elif typ == "aws:ec2/keyPair:KeyPair":
        out["keyName"] = f"{name}-mock"
    if typ == "azure-native:network:PublicIPAddress":
        out["ipAddress"] = f"mock-public-ip-of-{name}"
    if typ == "gcp:compute/address:Address":
        out["address"] = f"mock-address-of-{name}"
    if typ.startswith("azure-native:"):
        out.setdefault("name", inputs.get("resourceGroupName") if typ.endswith("ResourceGroup")
                       else f"{name}-mock")
    if typ == "gcp:compute/instance:Instance":
        nics = inputs.get("networkInterfaces") or []
        out["networkInterfaces"] = [
            {**nic, "networkIp": f"mock-private-ip-of-{name}-nic{i}",
             "accessConfigs": [{**ac, "natIp": ac.get("natIp") or f"mock-public-ip-of-{name}"}
                               for ac in nic.get("accessConfigs") or []]}
            for i, nic in enumerate(nics)]
    if typ == "azure-native:network:NetworkInterface":
        out["ipConfigurations"] = [{**c, "privateIPAddress": f"mock-private-ip-of-{name}"}
                                   for c in inputs.get("ipConfigurations") or []]
    if typ.startswith("gcp:compute/"):
        kind = typ.split("/")[1].split(":")[0]
        out["selfLink"] = f"mock://gcp/{kind}/{name}"
        out.setdefault("name", inputs.get("name") or f"{name}-mock")
    return out
