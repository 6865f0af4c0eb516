"""Preflight facts from EC2 and Service Quotas, through boto3 (`gpufleet[live]`).

Quota codes (vCPU-based, per region) are the Service Quotas console's for EC2:
docs.aws.amazon.com/ec2/latest/instancetypes/ec2-instance-quotas.html (accessed 2026-11).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from gpufleet.backends.aws.quotas import family, quota_code
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
from gpufleet.live.topology import TopologyUnavailable
from gpufleet.traits import NetworkQuota

Client = Callable[[str, str], Any]  # (service, region) -> a boto3 client


def boto3_client() -> Client:
    """A client factory over the default credential chain; MissingAccess without it."""
    try:
        import boto3  # the `live` extra
    except ImportError:
        raise MissingAccess(f"aws: boto3 is not installed: {LIVE_EXTRA}") from None
    session = boto3.Session()
    if session.get_credentials() is None:
        raise MissingAccess("aws: no credentials found: set AWS_ACCESS_KEY_ID and "
                            "AWS_SECRET_ACCESS_KEY, or AWS_PROFILE, or run where an instance "
                            "role or SSO login provides them")

    def client(service: str, region: str) -> Any:
        return session.client(service, region_name=region)
    return client


class AwsProbe:
    backend = "aws"

    def __init__(self, client: Client) -> None:
        self._client = client
        self._types: dict[tuple[str, str], int] = {}

    def _call(self, service: str, region: str, op: str, **kwargs: Any) -> Any:
        from botocore.exceptions import BotoCoreError, ClientError, NoCredentialsError
        try:
            return getattr(self._client(service, region), op)(**kwargs)
        except NoCredentialsError:
            raise MissingAccess("aws: no credentials found") from None
        except ClientError as e:
            code = e.response.get("Error", {}).get("Code", "")
            if code in ("InvalidCapacityReservationId.NotFound",
                        "InvalidCapacityReservationId.Malformed", "NoSuchResourceException"):
                return None
            raise ProbeError(f"aws {service} {op} in {region}: {code}: "
                             f"{e.response.get('Error', {}).get('Message', '')}") from None
        except BotoCoreError as e:
            raise ProbeError(f"aws {service} {op} in {region}: {e}") from None

    def offered(self, need: Need) -> bool:
        kind = "availability-zone" if need.zone else "region"
        answer = self._call("ec2", need.region, "describe_instance_type_offerings",
                            LocationType=kind, Filters=[
                                {"Name": "instance-type", "Values": [need.instance_type]},
                                {"Name": "location", "Values": [need.zone or need.region]}])
        return bool(answer and answer.get("InstanceTypeOfferings"))

    def reservation(self, need: Need) -> ReservationFacts | None:
        rid = need.reservation or ""
        if not rid.startswith("cr-"):
            return None
        answer = self._call("ec2", need.region, "describe_capacity_reservations",
                            CapacityReservationIds=[rid])
        found = (answer or {}).get("CapacityReservations") or []
        if not found:
            return None
        cr = found[0]
        end = cr.get("EndDate")
        return ReservationFacts(
            id=rid, active=cr.get("State") == "active", state=str(cr.get("State")),
            zone=cr.get("AvailabilityZone"), instance_type=str(cr.get("InstanceType", "")),
            total=int(cr.get("TotalInstanceCount", 0)),
            free=int(cr.get("AvailableInstanceCount", 0)),
            ends=end.isoformat() if hasattr(end, "isoformat") else (str(end) if end else None))

    def reservation_topology(self, need: Need) -> list[tuple[str, ...]]:
        """The chains of network nodes the reservation's capacity sits under, outermost
        first (DescribeCapacityReservationTopology), before anything launches; empty when
        EC2 gives none. ProbeError when it cannot be asked."""
        rid = need.reservation or ""
        if not rid.startswith("cr-"):
            return []
        answer = self._call("ec2", need.region, "describe_capacity_reservation_topology",
                            CapacityReservationIds=[rid])
        found = (answer or {}).get("CapacityReservations") or []
        return [nodes for cr in found
                if (nodes := tuple(str(n) for n in cr.get("NetworkNodes") or ()))]

    def quota_keys(self, need: Need) -> Sequence[QuotaKey]:
        code = quota_code(need.instance_type, need.spot)
        if code is None:
            return [QuotaKey(f"vCPU quota of the {family(need.instance_type)} family "
                             "(no code known)", need.region, "vCPUs", self._vcpus(need))]
        return [QuotaKey(f"{code[0]} ({code[1]})", need.region, "vCPUs", self._vcpus(need))]

    def _vcpus(self, need: Need) -> int:
        return need.cpus_per_node or self._type_vcpus(need.region, need.instance_type)

    def _type_vcpus(self, region: str, instance_type: str) -> int:
        if (region, instance_type) not in self._types:
            answer = self._call("ec2", region, "describe_instance_types",
                                InstanceTypes=[instance_type])
            types = (answer or {}).get("InstanceTypes") or []
            self._types[(region, instance_type)] = \
                int(types[0]["VCpuInfo"]["DefaultVCpus"]) if types else 0
        return self._types[(region, instance_type)]

    def network_quota(self, scope: str | None, region: str, quota: NetworkQuota
                      ) -> QuotaFacts | None:
        return _network_quota(self, region, quota)

    def quota(self, need: Need, key: QuotaKey) -> QuotaFacts | None:
        code = key.name.split(" ", 1)[0]
        if not code.startswith("L-"):
            return None
        answer = self._call("service-quotas", need.region, "get_service_quota",
                            ServiceCode="ec2", QuotaCode=code)
        if not answer:
            return None
        limit = float(answer["Quota"]["Value"])
        return QuotaFacts(limit=limit, used=self._used_vcpus(need, code))

    def _used_vcpus(self, need: Need, code: str) -> float:
        """vCPUs of the region's pending/running instances that count against ``code``."""
        used = 0.0
        pages = self._client("ec2", need.region).get_paginator("describe_instances").paginate(
            Filters=[{"Name": "instance-state-name", "Values": ["pending", "running"]}])
        from botocore.exceptions import BotoCoreError, ClientError
        try:
            for page in pages:
                for res in page.get("Reservations", []):
                    for inst in res.get("Instances", []):
                        spot = inst.get("InstanceLifecycle") == "spot"
                        mine = quota_code(inst.get("InstanceType", ""), spot)
                        if mine is None or mine[0] != code:
                            continue
                        cpu = inst.get("CpuOptions") or {}
                        used += (int(cpu["CoreCount"]) * int(cpu.get("ThreadsPerCore", 1))
                                 if cpu.get("CoreCount") else
                                 self._type_vcpus(need.region, inst["InstanceType"]))
        except (ClientError, BotoCoreError) as e:
            raise ProbeError(f"aws ec2 describe_instances in {need.region}: {e}") from None
        return used


# How the stack's network resources are counted in a region: the call that lists them (its
# service), its answer's key, and its filters (what counts against the quota)
_LISTED: dict[str, tuple[str, str, str, list[dict[str, Any]]]] = {
    "aws:ec2/vpc:Vpc": ("ec2", "describe_vpcs", "Vpcs", []),
    "aws:ec2/internetGateway:InternetGateway": (
        "ec2", "describe_internet_gateways", "InternetGateways", []),
    "aws:ec2/eip:Eip": ("ec2", "describe_addresses", "Addresses",
                        [{"Name": "domain", "Values": ["vpc"]}]),
    # per Availability Zone, counted per region: an upper bound of any one zone's use
    "aws:ec2/natGateway:NatGateway": ("ec2", "describe_nat_gateways", "NatGateways",
                                      [{"Name": "state", "Values": ["pending", "available"]}]),
    "aws:ec2/securityGroup:SecurityGroup": (
        "ec2", "describe_security_groups", "SecurityGroups", []),
    # the account's general purpose buckets, all regions in one list
    "aws:s3/bucket:Bucket": ("s3", "list_buckets", "Buckets", []),
}
# quotas seen (and used) from one region only: S3's bucket quota from US East (N. Virginia)
# (docs.aws.amazon.com/AmazonS3/latest/userguide/BucketRestrictions.html)
_QUOTA_REGION = {"aws:s3/bucket:Bucket": "us-east-1"}


def _network_quota(probe: AwsProbe, region: str, quota: NetworkQuota) -> QuotaFacts | None:
    """A quota's applied value (Service Quotas) and the account's use where it counts."""
    service, _, code = quota.live.partition(":")
    listed = _LISTED.get(quota.resource)
    if not code or listed is None:
        return None
    region = _QUOTA_REGION.get(quota.resource, region)
    answer = probe._call("service-quotas", region, "get_service_quota", ServiceCode=service,
                         QuotaCode=code)
    if not answer:
        return None
    lister, op, key, filters = listed
    client = probe._client(lister, region)
    args = {"Filters": filters} if lister == "ec2" else {}  # S3's ListBuckets takes none
    from botocore.exceptions import BotoCoreError, ClientError
    try:
        if client.can_paginate(op):
            used = sum(len(page.get(key, [])) for page in
                       client.get_paginator(op).paginate(**args))
        else:
            used = len((getattr(client, op)(**args) or {}).get(key, []))
    except (ClientError, BotoCoreError) as e:
        raise ProbeError(f"aws {lister} {op} in {region}: {e}") from None
    return QuotaFacts(limit=float(answer["Quota"]["Value"]), used=float(used))


def probe() -> Probe:
    """The probe over AWS's default credentials; raises MissingAccess naming what is
    missing."""
    return AwsProbe(boto3_client())


# --- network topology (`gpufleet topology`) -------------------------------------------------

# DescribeInstanceTopology answers for these types only, with three network nodes (four for
# p6-b200/p6-b300): docs.aws.amazon.com/AWSEC2/latest/UserGuide/
# ec2-instance-topology-prerequisites.html (accessed 2026-11; g7e and hpc8a read again for
# issue 53)
TOPOLOGY_TYPES = frozenset({
    "g6e.xlarge", "g6e.2xlarge", "g6e.4xlarge", "g6e.8xlarge", "g6e.12xlarge", "g6e.16xlarge",
    "g6e.24xlarge", "g6e.48xlarge", "g7e.2xlarge", "g7e.4xlarge", "g7e.8xlarge",
    "g7e.12xlarge", "g7e.24xlarge", "g7e.48xlarge", "hpc8a.96xlarge", "hpc6a.48xlarge",
    "hpc6id.32xlarge", "hpc7g.4xlarge",
    "hpc7g.8xlarge", "hpc7g.16xlarge", "hpc7a.12xlarge", "hpc7a.24xlarge", "hpc7a.48xlarge",
    "hpc7a.96xlarge", "p3dn.24xlarge", "p4d.24xlarge", "p4de.24xlarge", "p5.48xlarge",
    "p5e.48xlarge", "p5en.48xlarge", "p6e-gb200.36xlarge", "p6-b200.48xlarge",
    "p6-b300.48xlarge", "trn1.2xlarge", "trn1.32xlarge", "trn1n.32xlarge", "trn2.48xlarge",
    "trn2u.48xlarge"})
THROTTLED = frozenset({"RequestLimitExceeded", "Throttling", "ThrottlingException"})
TOPOLOGY_TRIES = 5
PAGE = 100  # DescribeInstanceTopology takes at most 100 instance ids a request
MAX_PAGES = 200  # pages for one request of 100 ids: far past any answer that ends


class AwsTopology:
    """DescribeInstanceTopology, paged and retried when EC2 throttles."""

    def __init__(self, client: Client, sleep: Callable[[float], None] | None = None) -> None:
        import time

        self._client = client
        self._sleep = sleep or time.sleep

    def positions(self, fleet: Any) -> dict[str, tuple[str, ...]]:
        if fleet.instance_type not in TOPOLOGY_TYPES:
            raise TopologyUnavailable(
                f"aws does not describe the topology of {fleet.instance_type} "
                "(DescribeInstanceTopology supports p3dn, p4d/p4de, p5/p5e/p5en, p6, trn1/trn2, "
                "hpc6/hpc7/hpc8a, g6e and g7e types)")
        ec2 = self._client("ec2", fleet.region)
        ids = sorted(fleet.ids.values())
        out: dict[str, Any] = {}
        for start in range(0, len(ids), PAGE):
            token: str | None = None
            seen: set[str] = set()
            for _ in range(MAX_PAGES):
                args: dict[str, Any] = {"InstanceIds": ids[start:start + PAGE]}
                if token:
                    args["NextToken"] = token
                page = self._call(ec2, args)
                self._take(fleet, page, out)
                token = page.get("NextToken") if isinstance(page, dict) else None
                if not token:
                    break
                if not isinstance(token, str) or token in seen:
                    raise TopologyUnavailable("aws: DescribeInstanceTopology answered a "
                                              "NextToken it had given before: its paging "
                                              "does not end; no verdict")
                seen.add(token)
            else:
                raise TopologyUnavailable(f"aws: DescribeInstanceTopology paged past "
                                          f"{MAX_PAGES} pages for {PAGE} instances; no "
                                          "verdict")
        return out

    @staticmethod
    def _take(fleet: Any, page: Any, out: dict[str, Any]) -> None:
        """One page's instances into ``out``; TopologyUnavailable naming the node for an
        instance without an id or listed twice at two positions (the network nodes
        themselves are judged with every cloud's, `gpufleet.live.topology`)."""
        instances = page.get("Instances") if isinstance(page, dict) else None
        if not isinstance(instances, list):
            raise TopologyUnavailable("aws: DescribeInstanceTopology answered without an "
                                      "instance list; no verdict")
        for inst in instances:
            iid = inst.get("InstanceId") if isinstance(inst, dict) else None
            raw = inst.get("NetworkNodes") if isinstance(inst, dict) else None
            if not isinstance(iid, str) or not iid:
                raise TopologyUnavailable("aws: DescribeInstanceTopology listed an instance "
                                          "without its id; no verdict")
            name = fleet.node_of(iid)
            if raw is None or raw == []:
                continue  # not placed yet: the node is reported missing
            nodes = tuple(raw) if isinstance(raw, list) else raw
            if iid in out and out[iid] != nodes:
                raise TopologyUnavailable(f"aws: DescribeInstanceTopology listed {name} "
                                          f"({iid}) twice, at two positions; no verdict")
            out[iid] = nodes

    def _call(self, ec2: Any, args: dict[str, Any]) -> Any:
        from botocore.exceptions import BotoCoreError, ClientError

        for attempt in range(TOPOLOGY_TRIES):
            try:
                return ec2.describe_instance_topology(**args)
            except ClientError as e:
                code = e.response.get("Error", {}).get("Code", "")
                if code in THROTTLED and attempt < TOPOLOGY_TRIES - 1:
                    self._sleep(2.0 ** attempt)
                    continue
                if code in ("UnauthorizedOperation", "AccessDenied", "AuthFailure"):
                    raise TopologyUnavailable(
                        "aws: these credentials may not call ec2:DescribeInstanceTopology "
                        f"({code}); grant it to read the topology") from None
                raise TopologyUnavailable(f"aws: DescribeInstanceTopology failed: {code}: "
                                          f"{e.response.get('Error', {}).get('Message', '')}"
                                          ) from None
            except BotoCoreError as e:
                raise TopologyUnavailable(f"aws: DescribeInstanceTopology failed: {e}") \
                    from None
        raise AssertionError("unreachable")


def topology_reader() -> AwsTopology:
    return AwsTopology(boto3_client())
