"""Offline answers for `gpufleet plan`: strict invoke mocks and computed outputs per type.

Every value here is a placeholder that says so (``mock-...``); `gpufleet plan` prints which
lookups were answered offline so reviewers know what the real `pulumi preview` will read.
"""

from __future__ import annotations

from collections.abc import Callable
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


INVOKES: dict[str, Invoke] = {
    "gcp:organizations/getClientConfig:getClientConfig": _gcp_client_config,
    "gcp:compute/getNetwork:getNetwork": _gcp_network,
    "gcp:compute/getSubnetwork:getSubnetwork": _gcp_subnetwork,
    "gcp:compute/getSubnetworks:getSubnetworks": _gcp_subnetworks,
}


def outputs(typ: str, name: str, inputs: dict[str, Any]) -> dict[str, Any]:
    """Computed outputs that downstream inputs read (self links, names)."""
    out: dict[str, Any] = {}
    if typ.startswith("gcp:compute/"):
        kind = typ.split("/")[1].split(":")[0]
        out["selfLink"] = f"mock://gcp/{kind}/{name}"
        out.setdefault("name", inputs.get("name") or f"{name}-mock")
    return out
