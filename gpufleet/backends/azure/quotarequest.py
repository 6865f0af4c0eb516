"""An Azure quota increase through Microsoft.Quota (learn.microsoft.com/rest/api/quota/quota/
create-or-update, api-version 2023-02-01): PUT the family's (or `cores`', or
`lowPriorityCores`') new limit at the Compute provider's location scope. Azure approves it at
once, or answers 202 and works on it (a support request when it cannot). The stack files it
through a dynamic resource (components/azure/quota.py), whose ``put`` is a `BearerSession`'s:
gpufleet's one HTTP client with the Azure default credentials' token. Pure."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any
from urllib.parse import quote

ARM = "https://management.azure.com"
QUOTA_API = "2023-02-01"
# (url, JSON body) -> (HTTP status, parsed answer or None)
Put = Callable[[str, dict[str, Any]], tuple[int, Any]]


class QuotaRequestError(Exception):
    """Azure refused or did not answer the request; the message names the quota."""


def quota_url(subscription: str, region: str, name: str, arm: str = ARM) -> str:
    scope = (f"subscriptions/{quote(subscription, safe='')}/providers/Microsoft.Compute/"
             f"locations/{quote(region, safe='')}")
    return (f"{arm}/{scope}/providers/Microsoft.Quota/quotas/{quote(name, safe='')}"
            f"?api-version={QUOTA_API}")


def request_body(name: str, value: int) -> dict[str, Any]:
    return {"properties": {"limit": {"limitObjectType": "LimitValue", "value": int(value)},
                           "name": {"value": name}}}


def file_request(put: Put, subscription: str, region: str, name: str, value: int,
                 arm: str = ARM) -> dict[str, Any]:
    """PUT the new limit; Azure's status and state, or QuotaRequestError."""
    status, body = put(quota_url(subscription, region, name, arm), request_body(name, value))
    if status not in (200, 201, 202):
        raise QuotaRequestError(f"azure: the quota request for {name} in {region} answered "
                                f"{status}")
    props = body.get("properties") if isinstance(body, dict) else None
    state = props.get("provisioningState") if isinstance(props, dict) else None
    return {"status": status, "state": str(state or "Accepted")}
