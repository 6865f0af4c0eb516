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
from gpufleet.traits import NetworkQuota


class LambdaProbe:
    backend = "lambda"

    def __init__(self, api: LambdaApi) -> None:
        self._api = api
        self._types: dict[str, Any] | None = None
        self._global: list[dict[str, Any]] | None = None

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

    def extra_checks(self, need: Need) -> list[tuple[str, str, str]]:
        """Lambda's account-wide firewall: the global ruleset applies in every region and its
        rules only allow, so one wider than the fleet's ssh_cidrs opens every node; and in
        us-south-1 firewall rules do not apply at all (OpenAPI 1.10.0, GET /firewall-rules:
        "Firewall rules do not apply to the us-south-1 region")."""
        out = []
        if need.region == "us-south-1":
            out.append(("firewall", "fail", "Lambda's firewall rules do not apply in "
                        "us-south-1: its nodes would not be guarded by the fleet's ruleset; "
                        "plan the fleet in another region (`regions`)"))
            return out
        try:
            rules = self._global_rules()
        except LambdaError as e:
            return [("firewall", "skip", f"Lambda's global ruleset could not be read: {e}")]
        wider = [r for r in rules if not _within_ssh(r, need.ssh_sources)]
        if wider:
            out.append(("firewall", "fail", "Lambda's global firewall ruleset applies to every "
                        "instance and admits more than the fleet's ssh_cidrs: "
                        + "; ".join(_rule_text(r) for r in wider[:5])
                        + " - narrow it in Lambda's console (Firewall > Global rules)"))
        else:
            out.append(("firewall", "ok", f"Lambda's global ruleset ({len(rules)} rule(s)) "
                        "admits nothing beyond the fleet's ssh_cidrs"))
        return out

    def _global_rules(self) -> list[dict[str, Any]]:
        if self._global is None:
            data = self._api.call("GET", "/firewall-rulesets/global")
            rules = data.get("rules") if isinstance(data, dict) else None
            self._global = [r for r in rules if isinstance(r, dict)] \
                if isinstance(rules, list) else []
        return self._global

    def reservation(self, need: Need) -> ReservationFacts | None:
        return None  # validate refuses a reservation on lambda

    def quota_keys(self, need: Need) -> Sequence[QuotaKey]:
        return []  # Lambda's API publishes no quota (limits are raised through support)

    def quota(self, need: Need, key: QuotaKey) -> QuotaFacts | None:
        return None

    def network_quota(self, scope: str | None, region: str, quota: NetworkQuota
                      ) -> QuotaFacts | None:
        return None  # no network is built


def _within_ssh(rule: dict[str, Any], sources: Sequence[str]) -> bool:
    """Whether a rule admits only TCP 22 from within the fleet's ssh_cidrs."""
    from ipaddress import ip_network

    ports = rule.get("port_range")
    if rule.get("protocol") != "tcp" or ports != [22, 22]:
        return False
    try:
        net = ip_network(str(rule.get("source_network")), strict=False)
        return any(net.version == ip_network(s, strict=False).version
                   and net.subnet_of(ip_network(s, strict=False))  # type: ignore[arg-type]
                   for s in sources)
    except ValueError:
        return False


def _rule_text(rule: dict[str, Any]) -> str:
    ports = rule.get("port_range")
    span = f" {ports[0]}-{ports[1]}" if isinstance(ports, list) and len(ports) == 2 else ""
    return f"{rule.get('protocol')}{span} from {rule.get('source_network')}"


def probe() -> Probe:
    """The probe over $LAMBDA_API_KEY (the stack's secret `gpufleet:lambdaApiKey` is not
    readable without the Pulumi CLI); MissingAccess without it."""
    if not os.environ.get(ENV_KEY):
        raise MissingAccess(f"lambda: no API key: export {ENV_KEY} (the key the stack config "
                            "`gpufleet:lambdaApiKey` holds)")
    return LambdaProbe(LambdaApi.from_env())
