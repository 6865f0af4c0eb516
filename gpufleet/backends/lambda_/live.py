"""Preflight facts from Lambda Cloud's public API (OpenAPI 1.10.0): `GET /instance-types`
answers, per type, the regions where it has capacity now (`regions_with_capacity_available`).
Lambda publishes no quota or reservation through the API: those checks say so. Live stage."""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

from gpufleet.backends.lambda_.api import ENV_KEY, LambdaApi, LambdaError
from gpufleet.live.preflight import (
    MissingAccess,
    Need,
    Probe,
    QuotaFacts,
    QuotaKey,
    ReservationFacts,
)
from gpufleet.live.topology import TopologyUnavailable
from gpufleet.traits import NetworkQuota


class LambdaProbe:
    backend = "lambda"

    def __init__(self, api: LambdaApi) -> None:
        self._api = api
        self._types: dict[str, Any] | None = None

    def _capacity(self, instance_type: str) -> list[str]:
        """The regions where the type has capacity now; MissingAccess when Lambda cannot be
        asked (a bad key, an outage after the retries)."""
        if self._types is None:
            try:
                self._types = self._api.instance_types()
            except LambdaError as e:
                raise MissingAccess(f"lambda: GET /instance-types failed: {e}") from None
        item = self._types.get(instance_type) if isinstance(self._types, dict) else None
        regions = (item or {}).get("regions_with_capacity_available") or []
        return sorted(str(r.get("name")) for r in regions if isinstance(r, dict))

    def offered(self, need: Need) -> bool:
        return need.region in self._capacity(need.instance_type)

    def offered_elsewhere(self, need: Need) -> str:
        """Where the type has capacity now, for the check's message."""
        regions = self._capacity(need.instance_type)
        return (f"Lambda has capacity for it now in {', '.join(regions)}" if regions else
                "Lambda has no capacity for it in any region now")

    def reservation(self, need: Need) -> ReservationFacts | None:
        return None  # validate refuses a reservation on lambda

    def quota_keys(self, need: Need) -> Sequence[QuotaKey]:
        return []  # Lambda's API publishes no quota (limits are raised through support)

    def quota(self, need: Need, key: QuotaKey) -> QuotaFacts | None:
        return None

    def network_quota(self, scope: str | None, region: str, quota: NetworkQuota
                      ) -> QuotaFacts | None:
        return None  # no network is built


def probe() -> Probe:
    """The probe over $LAMBDA_API_KEY (the stack's secret `gpufleet:lambdaApiKey` is not
    readable without the Pulumi CLI); MissingAccess without it."""
    if not os.environ.get(ENV_KEY):
        raise MissingAccess(f"lambda: no API key: export {ENV_KEY} (the key the stack config "
                            "`gpufleet:lambdaApiKey` holds)")
    return LambdaProbe(LambdaApi.from_env())


def topology_reader() -> Any:
    """No topology to read: the reason, as `gpufleet topology` reports it (exit 2)."""
    raise TopologyUnavailable(
        "Lambda's API exposes no network topology (single instances, no interconnect "
        "between them)")
