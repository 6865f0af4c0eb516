"""Preflight facts from the Compute Engine REST API (compute/v1), through google-auth
(`gpufleet[live]`): machine types per zone, reservations, and the region's and project's
GPU quotas (cloud.google.com/compute/resource-usage#gpu_quota)."""

from __future__ import annotations

import dataclasses
import math
import os
from collections.abc import Sequence
from typing import Any

from gpufleet.backends.gcp import quotas as _quotas
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
    page_token,
    pages,
    session_get,
)
from gpufleet.live.topology import TopologyUnavailable
from gpufleet.outbound import Secret
from gpufleet.traits import NetworkQuota, QuotaAsk

API = "https://compute.googleapis.com/compute/v1"
SCOPE = "https://www.googleapis.com/auth/cloud-platform"
# GPU quota metrics whose name is not NVIDIA_<GPU>_GPUS (by GPU and, where it matters, the
# machine series): cloud.google.com/compute/resource-usage#gpu_quota


# GPU families whose quota Compute Engine's regions.get does not list (dstack 0.22.5 skips
# them for that reason: core/backends/gcp/compute.py `_has_gpu_quota`, "B200, H100,
# H100_MEGA, and RTXPRO6000 quotas are not returned by `regions_client.list`"): on demand,
# Cloud Quotas has them as one quota with a `gpu_family` dimension
# (cloud.google.com/docs/quotas/configure-dimensions: "The gpu_family dimension measures the
# number of GPUs of a given family in your Google Cloud project").
FAMILY_QUOTA = "GPUS-PER-GPU-FAMILY-per-project-region"
NOT_IN_REGIONS = frozenset({"h100", "h200", "b200", "gb200", "rtxpro6000"})  # lower case
QUOTAS_API = "https://cloudquotas.googleapis.com/v1"
QUOTAS_PAGE = "console.cloud.google.com/iam-admin/quotas"


def gpu_family(need: Need) -> str | None:
    """The Cloud Quotas `gpu_family` of an on-demand fleet whose GPUs regions.get does not
    list ("NVIDIA_H100", "NVIDIA_H100_MEGA"); None otherwise."""
    if need.spot or not need.gpu or need.gpu.lower() not in NOT_IN_REGIONS:
        return None
    metric = gpu_metric(dataclasses.replace(need, spot=False)) or ""
    return metric.removesuffix("_GPUS")


def gpu_metric(need: Need) -> str | None:
    """The regional quota metric of the fleet's GPUs ("NVIDIA_H100_GPUS"), or of its vCPUs
    for a CPU-only machine ("N2_CPUS"; "CPUS" for N1); "PREEMPTIBLE_" first for spot (the
    table `gpufleet quota` plans with: gcp/quotas.py)."""
    return _quotas.gpu_metric(QuotaAsk(need.instance_type, need.spot, need.gpu,
                                       need.gpu_memory_gib, need.gpus_per_node,
                                       need.cpus_per_node))


def google_get() -> tuple[Get, str | None]:
    """(a Get with the default credentials, their project); MissingAccess without them.
    google-auth issues and refreshes the token; gpufleet's HTTP client sends the requests."""
    try:
        import google.auth
        from google.auth.exceptions import DefaultCredentialsError, RefreshError
        from google.auth.transport.requests import Request
    except ImportError:
        raise MissingAccess(f"gcp: google-auth is not installed: {LIVE_EXTRA}") from None
    try:
        found: Any = google.auth.default(scopes=[SCOPE])  # google-auth is not typed
        credentials, project = found
    except DefaultCredentialsError:
        raise MissingAccess("gcp: no credentials found: run `gcloud auth application-default "
                            "login`, or set GOOGLE_APPLICATION_CREDENTIALS to a service "
                            "account key file") from None

    def token() -> Secret:
        if not credentials.valid:
            try:
                credentials.refresh(Request())
            except RefreshError as e:
                raise MissingAccess(f"gcp: the default credentials cannot issue a token "
                                    f"({type(e).__name__}): run `gcloud auth "
                                    "application-default login` again") from None
        return Secret(str(credentials.token), "the Google default credentials")

    quota_project = getattr(credentials, "quota_project_id", None)
    headers = {"x-goog-user-project": quota_project} if quota_project else {}
    return session_get(BearerSession(token, headers)), project


class GcpProbe:
    backend = "gcp"

    def __init__(self, get: Get, default_project: str | None = None) -> None:
        self._get = get
        self._default = default_project or os.environ.get("GOOGLE_CLOUD_PROJECT")
        self._regions: dict[tuple[str, str], Any] = {}

    def _project(self, need: Need) -> str:
        project = need.scope or self._default
        if not project:
            raise MissingAccess(f"gcp: no project for fleet '{need.fleet}': set `project_id` "
                                "for gcp in the backends file or GOOGLE_CLOUD_PROJECT")
        return project

    def offered(self, need: Need) -> bool:
        project = self._project(need)
        if need.zone:
            url = f"{API}/projects/{project}/zones/{need.zone}/machineTypes/{need.instance_type}"
            return get_json(self._get, url, "gcp") is not None
        region = self._region(project, need.region)
        return region is not None

    def reservation(self, need: Need) -> ReservationFacts | None:
        name = need.reservation or ""
        project = self._project(need)
        if name.startswith("projects/"):  # a shared reservation: projects/P/reservations/N
            parts = name.split("/")
            project, name = parts[1], parts[-1]
        if not need.zone:
            return None
        body = get_json(self._get, f"{API}/projects/{project}/zones/{need.zone}/reservations/"
                        f"{name}", "gcp")
        if body is None:
            return None
        specific = body.get("specificReservation") or {}
        props = specific.get("instanceProperties") or {}
        total = int(specific.get("count", 0))
        in_use = int(specific.get("inUseCount", 0))
        status = str(body.get("status", ""))
        return ReservationFacts(
            id=f"projects/{project}/reservations/{name}", active=status == "READY",
            state=status, zone=str(body.get("zone", "")).rsplit("/", 1)[-1] or None,
            instance_type=str(props.get("machineType", "")), total=total,
            free=total - in_use, ends=body.get("deleteAtTime"))

    def reservation_topology(self, need: Need) -> list[tuple[str, ...]]:
        """The cluster and block of each block of the reservation (reservationBlocks.list:
        `physicalTopology`), before anything launches; empty when it has none."""
        name, project = need.reservation or "", self._project(need)
        if name.startswith("projects/"):
            parts = name.split("/")
            project, name = parts[1], parts[-1]
        if not need.zone:
            return []
        url = (f"{API}/projects/{project}/zones/{need.zone}/reservations/{name}/"
               "reservationBlocks")
        out: list[tuple[str, ...]] = []
        blocks = (b for page in pages(self._get, url, "gcp", page_token)
                  for b in page.get("items") or [])
        for block in blocks:
            topo = block.get("physicalTopology") if isinstance(block, dict) else None
            if isinstance(topo, dict) and topo.get("cluster") and topo.get("block"):
                out.append((str(topo["cluster"]), str(topo["block"])))
        return out

    def quota_keys(self, need: Need) -> Sequence[QuotaKey]:
        metric = gpu_metric(need)
        if metric is None:
            return []
        unit = "GPUs" if need.gpus_per_node else "vCPUs"
        per = need.gpus_per_node or need.cpus_per_node
        keys = [QuotaKey(metric, need.region, unit, per)]
        if need.gpus_per_node:
            keys.append(QuotaKey("GPUS_ALL_REGIONS", "global", "GPUs", per))
        return keys

    def quota(self, need: Need, key: QuotaKey) -> QuotaFacts | None:
        project = self._project(need)
        family = gpu_family(need)
        if family is not None and key.region != "global":
            return self._family_quota(project, key.region, family)
        if key.region == "global":
            body = get_json(self._get, f"{API}/projects/{project}", "gcp")
        else:
            body = self._region(project, key.region)
        found = _metric(body, key.name)
        if found is not None:
            return found
        if need.gpu and need.gpu.lower() in NOT_IN_REGIONS and key.region != "global":
            return QuotaFacts(math.nan, math.nan, f"regions.get does not list {need.gpu} "
                              f"quotas (as dstack notes); check it on {QUOTAS_PAGE}")
        return None

    def _family_quota(self, project: str, region: str, family: str) -> QuotaFacts:
        """The limit Cloud Quotas gives for (region, gpu_family); its API gives no usage, so
        only a limit under the ask can fail."""
        url = (f"{QUOTAS_API}/projects/{project}/locations/global/services/"
               f"compute.googleapis.com/quotaInfos/{FAMILY_QUOTA}")
        where = f"see {FAMILY_QUOTA} for {family} on {QUOTAS_PAGE}"
        try:
            info = get_json(self._get, url, "gcp")
        except ProbeError as e:
            return QuotaFacts(math.nan, math.nan, f"Cloud Quotas cannot be read ({e}); {where}")
        for item in (info or {}).get("dimensionsInfos") or []:
            dims = item.get("dimensions") if isinstance(item, dict) else None
            if isinstance(dims, dict) and dims.get("region") == region and \
                    dims.get("gpu_family") == family:
                value = (item.get("details") or {}).get("value")
                try:  # an int64 as a string, as the API gives it
                    limit = float(str(value)) if isinstance(value, str | int) else math.nan
                except ValueError:
                    limit = math.nan
                if not math.isfinite(limit) or limit < 0:
                    break
                return QuotaFacts(limit, math.nan, "Cloud Quotas gives no usage: the GPUs "
                                  f"already running count against it too ({where})")
        return QuotaFacts(math.nan, math.nan, f"Cloud Quotas lists no {family} limit in "
                          f"{region}; {where}")

    def network_quota(self, scope: str | None, region: str, quota: NetworkQuota
                      ) -> QuotaFacts | None:
        """A project quota (`projects.get`) or a regional one (`regions.get`) by metric."""
        project = scope or self._default
        if not project:
            raise MissingAccess("gcp: no project for the network quotas: set `project_id` for "
                                "gcp in the backends file or GOOGLE_CLOUD_PROJECT")
        body = get_json(self._get, f"{API}/projects/{project}", "gcp") \
            if quota.scope == "global" else self._region(project, region)
        return _metric(body, quota.live)

    def _region(self, project: str, region: str) -> Any:
        if (project, region) not in self._regions:
            self._regions[(project, region)] = get_json(
                self._get, f"{API}/projects/{project}/regions/{region}", "gcp")
        return self._regions[(project, region)]


def probe() -> Probe:
    """The probe over Google Cloud's default credentials; raises MissingAccess naming what is
    missing."""
    return GcpProbe(*google_get())


# physicalHostTopology's fields, outermost first, as gpufleet's layers (spine, block,
# subblock, host): cloud.google.com/compute/docs/instances/use-compact-placement-policies
# and the instances resource (`resourceStatus.physicalHostTopology`: cluster, block,
# subblock, host), given for VMs in dense deployments (A4, A3 Ultra and later)
PHYSICAL_LAYERS = ("cluster", "block", "subblock", "host")


class GcpTopology:
    """instances.get per node: its `resourceStatus.physicalHostTopology`."""

    def __init__(self, get: Get) -> None:
        self._get = get

    def positions(self, fleet: Any) -> dict[str, tuple[str, ...]]:
        out: dict[str, tuple[str, ...]] = {}
        for instance_id in sorted(fleet.ids.values()):
            # the Pulumi id of a gcp instance: projects/P/zones/Z/instances/NAME
            try:
                body = get_json(self._get, f"{API}/{instance_id.lstrip('/')}", "gcp")
            except ProbeError as e:
                raise TopologyUnavailable(f"{e} (reading the topology needs "
                                          "compute.instances.get)") from None
            name = fleet.node_of(instance_id)
            if body is None:
                continue  # gone: the node is reported missing
            status = body.get("resourceStatus") if isinstance(body, dict) else None
            topo = status.get("physicalHostTopology") if isinstance(status, dict) else None
            if not isinstance(body, dict) or (status is not None and not isinstance(
                    status, dict)) or (topo is not None and not isinstance(topo, dict)):
                raise TopologyUnavailable(f"gcp: the answer for {name} ({instance_id}) is not "
                                          "an instance object; no verdict")
            if topo is None:
                continue
            layers = [topo.get(k) for k in PHYSICAL_LAYERS]
            given = [x for x in layers if x is not None]
            if any(not isinstance(x, str) or not x.strip() for x in given) or \
                    layers[:len(given)] != given:
                raise TopologyUnavailable(f"gcp: the physicalHostTopology of {name} "
                                          f"({instance_id}) has a blank, malformed or "
                                          "missing layer; no verdict")
            if len(given) >= 3:
                out[instance_id] = tuple(str(x) for x in given)
        if not out and fleet.ids:
            raise TopologyUnavailable(
                f"gcp gives no physicalHostTopology for the nodes of {fleet.fleet} "
                f"({fleet.instance_type}): it is given for VMs in dense deployments (A4, "
                "A3 Ultra) only")
        return out


def topology_reader() -> GcpTopology:
    return GcpTopology(google_get()[0])


def _metric(body: Any, metric: str) -> QuotaFacts | None:
    """A metric's limit and use in a regions.get or projects.get answer (`quotas`: a list
    of {metric, limit, usage}); an answer of another shape is no figure, and says so."""
    quotas = body.get("quotas", []) if isinstance(body, dict) else []
    if not isinstance(quotas, list):
        return QuotaFacts(math.nan, math.nan, "the answer's `quotas` is not a list: no figure")
    for q in quotas:
        if isinstance(q, dict) and q.get("metric") == metric:
            try:
                return QuotaFacts(limit=float(q.get("limit", 0)), used=float(q.get("usage", 0)))
            except (TypeError, ValueError):
                return QuotaFacts(math.nan, math.nan, f"{metric}'s limit or usage is not a "
                                  "number: no figure")
    return None
