"""Azure's offline answers for `gpufleet plan`: its lookups and the computed outputs its
resources' dependents read. Every value is a placeholder that says so (``mock-...``)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from ..registry import Invoke


def _azure_client_config(args: dict[str, Any]) -> dict[str, Any]:
    return {"subscriptionId": "00000000-mock-subscription", "tenantId": "mock-tenant",
            "clientId": "mock-client", "objectId": "mock-object"}


def _azure_vnet(args: dict[str, Any]) -> dict[str, Any]:
    rg, name = args.get("resourceGroupName", ""), args.get("virtualNetworkName", "")
    vid = (f"/subscriptions/00000000-mock-subscription/resourceGroups/{rg}/providers/"
           f"Microsoft.Network/virtualNetworks/{name}")
    return {"id": vid, "name": name, "location": "mock",
            "subnets": [{"id": f"{vid}/subnets/mock-subnet-0", "name": "mock-subnet-0"}]}


def invokes(dns_zones: Iterable[str]) -> dict[str, Invoke]:
    return {
        "azure-native:authorization:getClientConfig": _azure_client_config,
        "azure-native:network:getVirtualNetwork": _azure_vnet,
    }


def outputs(typ: str, name: str, inputs: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if typ == "azure-native:network:PublicIPAddress":
        out["ipAddress"] = f"mock-public-ip-of-{name}"
    out.setdefault("name", inputs.get("resourceGroupName") if typ.endswith("ResourceGroup")
                   else f"{name}-mock")
    if typ == "azure-native:network:NetworkInterface":
        out["ipConfigurations"] = [{**c, "privateIPAddress": f"mock-private-ip-of-{name}"}
                                   for c in inputs.get("ipConfigurations") or []]
    return out
