"""The cloud's network quotas the stack's own resources count against: per region (or per
project or account), what the plan creates of each, so that the plan warns where a documented
default would be passed (before `pulumi up` fails half-way with `AddressLimitExceeded` or
`VpcLimitExceeded`) and preflight compares with the live limit. The quotas are each
backend's traits (``network_quotas``). Pure."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from gpufleet.backends import all_backends
from gpufleet.codes import C020
from gpufleet.diagnostics import Diagnostic, Severity
from gpufleet.input import Inputs
from gpufleet.review.owners import resource_owners, spec_origins
from gpufleet.traits import NetworkQuota


@dataclass
class NetworkCount:
    """How many resources of one quota the stack holds in one place."""

    backend: str
    quota: NetworkQuota
    scope: str | None  # the GCP project, Azure subscription (None: the default account)
    region: str  # the region, or "global" for a project- or account-wide quota
    count: int = 0
    owners: list[str] = field(default_factory=list)


def _provider_of(r: Mapping[str, Any], providers: Mapping[str, Mapping[str, Any]]
                 ) -> Mapping[str, Any]:
    provider = providers.get(str(r.get("provider") or "").rsplit("::", 1)[0]) or {}
    inputs = provider.get("inputs")
    return inputs if isinstance(inputs, Mapping) else {}


def network_counts(resources: Sequence[Mapping[str, Any]]) -> list[NetworkCount]:
    """Every quota of every backend the resources count against, with its count (resources
    as `gpufleet plan` records them, or a state export's)."""
    providers = {str(r["urn"]): r for r in resources if str(r["type"]).startswith("pulumi:")}
    owners = resource_owners(resources)
    found: dict[tuple[str, str, str | None, str], NetworkCount] = {}
    for t in all_backends():
        for quota in t.network_quotas:
            for r in resources:
                if r["type"] != quota.resource or not quota.counts(r.get("inputs") or {}):
                    continue
                prov = _provider_of(r, providers)
                scope = prov.get("project") or prov.get("subscriptionId")
                region = "global" if quota.scope == "global" else \
                    str(prov.get("region") or prov.get("location") or "")
                key = (t.name, quota.name, str(scope) if scope else None, region)
                count = found.setdefault(key, NetworkCount(t.name, quota, key[2], region))
                count.count += 1
                owner = owners.get(str(r["urn"]), "")
                if owner not in count.owners:
                    count.owners.append(owner)
    return [found[k] for k in sorted(found, key=lambda k: (k[0], k[1], k[2] or "", k[3]))]


def quota_counts(resources: Sequence[Mapping[str, Any]]) -> list[NetworkCount]:
    """The counts over a quota's documented default."""
    return [c for c in network_counts(resources)
            if c.quota.default is not None and c.count > c.quota.default]


def quota_warnings(resources: Sequence[Mapping[str, Any]], inputs: Inputs) -> list[Diagnostic]:
    """A warning per default quota passed, at the first fleet or gateway that counts
    against it."""
    origins = spec_origins(inputs)
    out = []
    for c in quota_counts(resources):
        origin = next((origins[o] for o in c.owners if o in origins), None)
        if origin is None:
            continue
        named = ", ".join(o for o in c.owners if o)
        out.append(origin.at(
            "name", C020, f"the stack creates {c.count} "
            f"{c.quota.resource.rsplit(':', 1)[1]}(s) in {c.region} ({named}); the default "
            f"quota '{c.quota.name}' is {c.quota.default}, so `pulumi up` fails there unless "
            "the account's quota is higher",
            f"check and raise it: {c.quota.raise_how} ({c.quota.source}) - `gpufleet "
            "preflight` reads the account's; or put fleets in other regions",
            severity=Severity.WARNING))
    return out
