"""Google Cloud's offline answers for `gpufleet plan`: its lookups and the computed outputs
its resources' dependents read. Every value is a placeholder that says so (``mock-...``)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from ..registry import Invoke


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


def invokes(dns_zones: Iterable[str]) -> dict[str, Invoke]:
    return {
        "gcp:compute/getZones:getZones": _gcp_zones,
        "gcp:dns/getManagedZones:getManagedZones": _gcp_managed_zones_for(dns_zones),
        "gcp:organizations/getClientConfig:getClientConfig": _gcp_client_config,
        "gcp:compute/getNetwork:getNetwork": _gcp_network,
        "gcp:compute/getSubnetwork:getSubnetwork": _gcp_subnetwork,
        "gcp:compute/getSubnetworks:getSubnetworks": _gcp_subnetworks,
    }


def outputs(typ: str, name: str, inputs: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if typ == "gcp:compute/address:Address":
        out["address"] = f"mock-address-of-{name}"
    if typ == "gcp:compute/instance:Instance":
        nics = inputs.get("networkInterfaces") or []
        out["networkInterfaces"] = [
            {**nic, "networkIp": f"mock-private-ip-of-{name}-nic{i}",
             "accessConfigs": [{**ac, "natIp": ac.get("natIp") or f"mock-public-ip-of-{name}"}
                               for ac in nic.get("accessConfigs") or []]}
            for i, nic in enumerate(nics)]
    if typ.startswith("gcp:compute/"):
        kind = typ.split("/")[1].split(":")[0]
        out["selfLink"] = f"mock://gcp/{kind}/{name}"
        out.setdefault("name", inputs.get("name") or f"{name}-mock")
    return out
