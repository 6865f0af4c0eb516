"""Preflight facts from Azure Resource Manager's REST API, through azure-identity
(`gpufleet[live]`): VM sizes and their restrictions per region (Resource SKUs), the
region's vCPU quotas (Compute usages) and capacity reservation groups with their
reservations' instance views.
learn.microsoft.com/rest/api/compute/resource-skus/list,
learn.microsoft.com/rest/api/compute/usage/list,
learn.microsoft.com/rest/api/compute/capacity-reservations/get"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any
from urllib.parse import quote

from gpufleet.live.preflight import (
    LIVE_EXTRA,
    MissingAccess,
    Need,
    Probe,
    ProbeError,
    QuotaFacts,
    QuotaKey,
    ReservationFacts,
)
from gpufleet.live.probes.rest import (
    BearerSession,
    Get,
    get_json,
    next_link,
    pages,
    session_get,
)
from gpufleet.outbound import Secret
from gpufleet.traits import NetworkQuota

ARM = "https://management.azure.com"
COMPUTE_API = "2024-07-01"
SKUS_API = "2021-07-01"
NETWORK_API = "2023-09-01"  # learn.microsoft.com/rest/api/virtualnetwork/usages/list
# learn.microsoft.com/rest/api/storagerp/usages/list-by-location
USAGE_APIS = {"Microsoft.Network": NETWORK_API, "Microsoft.Storage": "2023-05-01"}


def azure_get() -> Get:
    """A Get with DefaultAzureCredential's ARM token; MissingAccess without credentials."""
    return session_get(azure_session())


def azure_session() -> BearerSession:
    """A session carrying DefaultAzureCredential's ARM token (renewed a minute before it
    expires), through gpufleet's HTTP client; MissingAccess without credentials."""
    try:
        from azure.core.exceptions import ClientAuthenticationError
        from azure.identity import DefaultAzureCredential
    except ImportError:
        raise MissingAccess(f"azure: azure-identity is not installed: {LIVE_EXTRA}") from None
    credential = DefaultAzureCredential()
    held: list[Any] = []

    def token() -> Secret:
        import time

        if not held or held[0].expires_on - 60 < time.time():
            try:
                held[:] = [credential.get_token(f"{ARM}/.default")]
            except ClientAuthenticationError:
                raise MissingAccess("azure: no credentials found: run `az login`, or set "
                                    "AZURE_CLIENT_ID, AZURE_TENANT_ID and "
                                    "AZURE_CLIENT_SECRET") from None
        return Secret(str(held[0].token), "the Azure default credentials")

    token()  # no credentials: said now, before any request
    return BearerSession(token)


class AzureProbe:
    backend = "azure"

    def __init__(self, get: Get) -> None:
        self._get = get
        self._skus: dict[tuple[str, str], list[Any]] = {}
        self._usages: dict[tuple[str, str], list[Any]] = {}
        self._network: dict[tuple[str, str, str], list[Any]] = {}

    def _subscription(self, need: Need) -> str:
        sub = need.scope or os.environ.get("AZURE_SUBSCRIPTION_ID") \
            or os.environ.get("ARM_SUBSCRIPTION_ID")
        if not sub:
            raise MissingAccess(f"azure: no subscription for fleet '{need.fleet}': set "
                                "`subscription_id` for azure in the backends file or "
                                "AZURE_SUBSCRIPTION_ID")
        return sub

    def _sku(self, need: Need) -> Any | None:
        sub = self._subscription(need)
        key = (sub, need.region)
        if key not in self._skus:
            flt = quote(f"location eq '{need.region}'")
            body = get_json(self._get, f"{ARM}/subscriptions/{sub}/providers/Microsoft.Compute/"
                            f"skus?api-version={SKUS_API}&$filter={flt}", "azure")
            self._skus[key] = [s for s in (body or {}).get("value", [])
                               if s.get("resourceType") == "virtualMachines"]
        return next((s for s in self._skus[key]
                     if str(s.get("name", "")).lower() == need.instance_type.lower()), None)

    def offered(self, need: Need) -> bool:
        sku = self._sku(need)
        if sku is None:
            return False
        for r in sku.get("restrictions") or []:
            if r.get("type") == "Location":
                return False  # NotAvailableForSubscription in the whole region
            if r.get("type") == "Zone" and need.zone and need.zone in \
                    ((r.get("restrictionInfo") or {}).get("zones") or []):
                return False
        return True

    def reservation(self, need: Need) -> ReservationFacts | None:
        group_id = need.reservation or ""
        if not group_id.lower().startswith("/subscriptions/"):
            return None
        group = get_json(self._get, f"{ARM}{group_id}?api-version={COMPUTE_API}", "azure")
        if group is None:
            return None
        total = free = 0
        zone: str | None = None
        states: set[str] = set()
        for ref in (group.get("properties") or {}).get("capacityReservations") or []:
            body = get_json(self._get, f"{ARM}{ref.get('id')}?api-version={COMPUTE_API}"
                            "&$expand=instanceView", "azure")
            if body is None:
                continue
            sku = body.get("sku") or {}
            if str(sku.get("name", "")).lower() != need.instance_type.lower():
                continue
            props = body.get("properties") or {}
            capacity = int(sku.get("capacity", 0))
            used = len(((props.get("instanceView") or {}).get("utilizationInfo") or {})
                       .get("virtualMachinesAllocated") or [])
            total, free = total + capacity, free + max(capacity - used, 0)
            states.add(str(props.get("provisioningState", "")))
            zone = (body.get("zones") or [None])[0] or zone
        location = str(group.get("location", ""))
        if location.lower() != need.region.lower():
            return ReservationFacts(group_id, False, f"in {location}, not {need.region}", zone,
                                    "", total, free)
        state = ", ".join(sorted(states)) or "holds no reservation of this size"
        return ReservationFacts(group_id, states == {"Succeeded"}, state, zone,
                                need.instance_type if total else "", total, free)

    def network_quota(self, scope: str | None, region: str, quota: NetworkQuota
                      ) -> QuotaFacts | None:
        """The subscription's usage in the region by name: the Network usages API's, or
        another provider's (`live` = `Microsoft.Storage/StorageAccounts`)."""
        sub = scope or os.environ.get("AZURE_SUBSCRIPTION_ID") \
            or os.environ.get("ARM_SUBSCRIPTION_ID")
        if not sub:
            raise MissingAccess("azure: no subscription for the network quotas: set "
                                "`subscription_id` for azure in the backends file")
        provider, _, name = quota.live.rpartition("/")
        provider = provider or "Microsoft.Network"
        key = (sub, region, provider)
        if key not in self._network:
            body = get_json(self._get, f"{ARM}/subscriptions/{sub}/providers/"
                            f"{provider}/locations/{region}/usages?api-version="
                            f"{USAGE_APIS[provider]}", "azure")
            self._network[key] = list((body or {}).get("value") or [])
        for u in self._network[key]:
            if (u.get("name") or {}).get("value") == name:
                return QuotaFacts(limit=float(u.get("limit", 0)),
                                  used=float(u.get("currentValue", 0)))
        return None

    def quota_keys(self, need: Need) -> Sequence[QuotaKey]:
        sku = self._sku(need)
        vcpus = need.cpus_per_node or _vcpus(sku)
        if need.spot:
            return [QuotaKey("lowPriorityCores", need.region, "vCPUs", vcpus)]
        family = str((sku or {}).get("family") or f"{need.instance_type} family (unknown)")
        return [QuotaKey(family, need.region, "vCPUs", vcpus),
                QuotaKey("cores", need.region, "vCPUs", vcpus)]

    def quota(self, need: Need, key: QuotaKey) -> QuotaFacts | None:
        sub = self._subscription(need)
        cache = (sub, key.region)
        if cache not in self._usages:
            body = get_json(self._get, f"{ARM}/subscriptions/{sub}/providers/Microsoft.Compute/"
                            f"locations/{key.region}/usages?api-version={COMPUTE_API}", "azure")
            self._usages[cache] = list((body or {}).get("value", []))
        for u in self._usages[cache]:
            if (u.get("name") or {}).get("value") == key.name:
                return QuotaFacts(limit=float(u.get("limit", 0)),
                                  used=float(u.get("currentValue", 0)))
        return None


def scale_set_nics(get: Get, vmss_id: str) -> Any:
    """The NICs of a scale set's instances (Network Interfaces - List Virtual Machine Scale
    Set Network Interfaces), every page."""
    url: str | None = f"{ARM}{vmss_id}/networkInterfaces?api-version=2018-10-01"
    nics: list[Any] = []
    while url:
        body = get_json(get, url, "azure")
        if body is None:
            raise ProbeError(f"azure: no scale set {vmss_id}")
        nics += body.get("value") or []
        url = body.get("nextLink")
    return {"value": nics}


def _vcpus(sku: Any) -> int:
    for cap in (sku or {}).get("capabilities") or []:
        if cap.get("name") == "vCPUs":
            return int(cap.get("value", 0))
    return 0


class ScaleSetApi:
    """A scale set's instances and their redeploy (Virtual Machine Scale Set VMs - List;
    Virtual Machine Scale Sets - Redeploy: "shuts down the virtual machines, moves them to new
    nodes and powers them back on"), through ARM's REST API. ``session``: requests-like
    (``get``/``post`` returning responses with ``status_code``, ``json()``, ``headers``);
    tests hand in one answering from recorded responses. ``sleep`` waits between polls."""

    def __init__(self, session: Any, sleep: Any = None, poll_seconds: float = 15.0,
                 max_polls: int = 160) -> None:
        import time

        self._session = session
        self._sleep = sleep or time.sleep
        self._poll, self._max = poll_seconds, max_polls

    def instances(self, vmss_id: str) -> list[dict[str, Any]]:
        url = f"{ARM}{vmss_id}/virtualMachines?api-version={COMPUTE_API}"
        listed = list(pages(session_get(self._session), url, "azure", next_link))
        if not listed:
            raise ProbeError(f"azure: no scale set {vmss_id}")
        return [v for page in listed for v in page.get("value") or [] if isinstance(v, dict)]

    kind = "Azure scale set"

    def inspect_hint(self, vmss_id: str) -> str:
        """How a user looks at the instances after a redeploy that did not succeed."""
        return f"see `az vmss get-instance-view --ids {vmss_id}`"

    def redeploy(self, vmss_id: str, instance_ids: Sequence[str]) -> str:
        """Redeploy the instances and wait for the operation's end; its final status."""
        url = f"{ARM}{vmss_id}/redeploy?api-version={COMPUTE_API}"
        try:
            resp = self._session.post(url, json={"instanceIds": list(instance_ids)},
                                      timeout=60)
        except Exception as e:  # requests' transport errors
            raise ProbeError(f"POST {url}: {type(e).__name__}: {e}") from None
        if resp.status_code == 200:
            return "Succeeded"
        if resp.status_code != 202:
            raise ProbeError(f"azure: POST {url} answered {resp.status_code}: "
                             f"{_message(resp)}")
        status_url = resp.headers.get("Azure-AsyncOperation") or resp.headers.get("Location")
        if not status_url:
            raise ProbeError("azure: the redeploy was accepted without an operation to follow")
        for _ in range(self._max):
            self._sleep(self._poll)
            code, body = session_get(self._session)(status_url)
            if code == 200 and isinstance(body, dict) and body.get("status") in (
                    "Succeeded", "Failed", "Canceled"):
                return str(body["status"])
            if code not in (200, 202):
                raise ProbeError(f"azure: GET {status_url} answered {code}")
        raise ProbeError(f"azure: the redeploy did not finish within "
                         f"{self._poll * self._max / 60:.0f} minutes; follow it with "
                         f"`az vmss get-instance-view` ({status_url})")


# --- dstack's gateway VM and its security group (`gpufleet gateway sync`) ----------------------

GATEWAY_PORTS = (80, 443)
_ANY_SOURCE = ("*", "internet", "0.0.0.0/0", "any")


def gateway_security(get: Get, subscription: str, address: str) -> tuple[str, str]:
    """("ok" | "blocked" | "unknown", detail) for the Azure VM dstack runs a gateway on at
    ``address``: its NIC's security group must admit 80 and 443 from anywhere. dstack 0.22.5
    creates `<rg>-<location>-gateway-security-group` (22, 80, 443) but gives the gateway VM
    `<rg>-<location>-default-security-group` (its create_gateway passes the default group's
    name: dstack core/backends/azure/compute.py), so HTTP and HTTPS never reach it."""
    url = (f"{ARM}/subscriptions/{subscription}/providers/Microsoft.Network/"
           f"publicIPAddresses?api-version={NETWORK_API}")
    listed = (ip for page in pages(get, url, "azure", next_link)
              for ip in page.get("value") or [])
    found = next((ip for ip in listed if isinstance(ip, dict) and
                  (ip.get("properties") or {}).get("ipAddress") == address), None)
    if found is None:
        return "unknown", (f"no public IP {address} in subscription {subscription}: cannot "
                           "tell which security group guards the gateway")
    config = ((found.get("properties") or {}).get("ipConfiguration") or {}).get("id") or ""
    nic_id = str(config).split("/ipConfigurations/")[0]
    nic = get_json(get, f"{ARM}{nic_id}?api-version={NETWORK_API}", "azure") if nic_id \
        else None
    nsg_id = (((nic or {}).get("properties") or {}).get("networkSecurityGroup") or {}).get("id")
    if not nsg_id:
        return "unknown", f"the gateway's NIC {nic_id or '?'} has no security group of its own"
    nsg = get_json(get, f"{ARM}{nsg_id}?api-version={NETWORK_API}", "azure") or {}
    missing = [p for p in GATEWAY_PORTS if not _admits(nsg, p)]
    if not missing:
        return "ok", f"its security group {nsg_id.rsplit('/', 1)[-1]} admits 80 and 443"
    wanted_nsg = str(nsg_id).replace("-default-security-group", "-gateway-security-group")
    fix = (f"az network nic update --ids {nic_id} --network-security-group {wanted_nsg}"
           if wanted_nsg != nsg_id else f"allow TCP {', '.join(map(str, missing))} inbound "
           f"in {nsg_id}")
    return "blocked", (f"the gateway VM's NIC has security group {nsg_id.rsplit('/', 1)[-1]}, "
                       f"which admits no TCP {' or '.join(map(str, missing))} from the "
                       "internet: HTTPS to the gateway is blocked (dstack 0.22.5 attaches its "
                       f"default group, not its gateway group, to the VM); fix: `{fix}`")


def gateway_check(scope: str | None, address: str) -> tuple[str, str]:
    """`gateway_security` over Azure's default credentials (MissingAccess without them)."""
    sub = scope or os.environ.get("AZURE_SUBSCRIPTION_ID") or os.environ.get(
        "ARM_SUBSCRIPTION_ID")
    if not sub:
        raise MissingAccess("azure: no subscription: set `subscription_id` for azure in the "
                            "backends file or AZURE_SUBSCRIPTION_ID")
    return gateway_security(azure_get(), sub, address)


def _admits(nsg: dict[str, Any], port: int) -> bool:
    """Whether an inbound Allow rule of the group admits TCP ``port`` from anywhere."""
    rules = (nsg.get("properties") or {}).get("securityRules") or []
    for rule in rules:
        props = rule.get("properties") or {} if isinstance(rule, dict) else {}
        if props.get("direction") != "Inbound" or props.get("access") != "Allow" or \
                str(props.get("protocol", "*")).lower() not in ("tcp", "*"):
            continue
        sources = [props.get("sourceAddressPrefix"), *(props.get("sourceAddressPrefixes")
                                                       or [])]
        if not any(str(s).lower() in _ANY_SOURCE for s in sources if s):
            continue
        ranges = [props.get("destinationPortRange"), *(props.get("destinationPortRanges")
                                                       or [])]
        if any(_covers(str(r), port) for r in ranges if r):
            return True
    return False


def _covers(spec: str, port: int) -> bool:
    if spec == "*":
        return True
    low, _, high = spec.partition("-")
    try:
        return int(low) <= port <= int(high or low)
    except ValueError:
        return False


def _message(resp: Any) -> str:
    try:
        body = resp.json()
    except ValueError:
        return ""
    err = body.get("error") if isinstance(body, dict) else None
    return str(err.get("message") or err.get("code") or "") if isinstance(err, dict) else ""


def probe() -> Probe:
    """The probe over Azure's default credentials; raises MissingAccess naming what is
    missing."""
    return AzureProbe(azure_get())


def scale_set_api() -> ScaleSetApi:
    """The scale-set API (instances, redeploy) over Azure's default credentials."""
    return ScaleSetApi(azure_session())


def scale_sets_nics(vmss_ids: Sequence[str]) -> dict[str, Any]:
    """Each scale set's instance NICs, read with Azure's default credentials."""
    get = azure_get()
    return {vmss_id: scale_set_nics(get, vmss_id) for vmss_id in vmss_ids}
