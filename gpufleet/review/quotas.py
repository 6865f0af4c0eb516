"""The cloud's default network quotas the stack's own resources would pass, per region: what
the plan counts before `pulumi up` fails half-way with `AddressLimitExceeded` or
`VpcLimitExceeded`. The quotas are each backend's traits (``network_quotas``). Pure."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

from gpufleet.backends import BACKENDS
from gpufleet.codes import C020
from gpufleet.diagnostics import Diagnostic, Severity
from gpufleet.input import Inputs
from gpufleet.review.owners import resource_owners, spec_origins


def _region(provider: Mapping[str, Any] | None) -> str:
    inputs = (provider or {}).get("inputs") or {}
    return str(inputs.get("region") or inputs.get("location") or "")


def quota_counts(resources: Sequence[Mapping[str, Any]]
                 ) -> list[tuple[Any, str, int, list[str]]]:
    """(quota, region, count, owners) for every quota the resources pass."""
    providers = {str(r["urn"]): r for r in resources if str(r["type"]).startswith("pulumi:")}
    owners = resource_owners(resources)
    out = []
    for t in BACKENDS:
        for quota in t.network_quotas:
            counts: Counter[str] = Counter()
            who: dict[str, list[str]] = {}
            for r in resources:
                if r["type"] != quota.resource:
                    continue
                provider = providers.get(str(r.get("provider") or "").rsplit("::", 1)[0])
                region = _region(provider)
                counts[region] += 1
                owner = owners.get(str(r["urn"]), "")
                if owner not in who.setdefault(region, []):
                    who[region].append(owner)
            out += [(quota, region, n, who[region]) for region, n in sorted(counts.items())
                    if n > quota.default]
    return out


def quota_warnings(resources: Sequence[Mapping[str, Any]], inputs: Inputs) -> list[Diagnostic]:
    """A warning per quota passed, at the first fleet or gateway that counts against it."""
    origins = spec_origins(inputs)
    out = []
    for quota, region, count, owners in quota_counts(resources):
        origin = next((origins[o] for o in owners if o in origins), None)
        if origin is None:
            continue
        named = ", ".join(o for o in owners if o)
        out.append(origin.at(
            "name", C020, f"the stack creates {count} {quota.resource.rsplit(':', 1)[1]}(s) in "
            f"{region} ({named}); the default quota '{quota.name}' is {quota.default}, so "
            "`pulumi up` fails there unless the account's quota is higher",
            f"check and raise it: {quota.raise_how} ({quota.source}); or put fleets in "
            "other regions", severity=Severity.WARNING))
    return out
