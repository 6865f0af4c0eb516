"""Azure quota increases as a Pulumi dynamic resource (azure-native has no resource for a
subscription's Microsoft.Quota limits): `create` and `update` file the request
(gpufleet.backends.azure.quotarequest) with the Azure default credentials; `delete` withdraws
nothing (a granted limit stays; the resource is protected anyway). The provider class holds
nothing: the token is asked for when it runs and never lands in the state. Never move or
rename this class (Pulumi records it by module and name)."""

from __future__ import annotations

from typing import Any

import pulumi
from pulumi.dynamic import CreateResult, DiffResult, Resource, ResourceProvider, UpdateResult

from gpufleet.compile import QuotaRequestDesign


def _file(props: dict[str, Any]) -> dict[str, Any]:
    from gpufleet.backends.azure.live import azure_session
    from gpufleet.backends.azure.quotarequest import file_request

    session = azure_session()

    def put(url: str, body: dict[str, Any]) -> tuple[int, Any]:
        answer = session.put(url, body)
        try:
            return answer.status_code, answer.json()
        except ValueError:
            return answer.status_code, None

    return file_request(put, props["subscription"], props["region"], props["quota"],
                        int(props["value"]))


class QuotaRequestProvider(ResourceProvider):
    def create(self, props: dict[str, Any]) -> CreateResult:
        answer = _file(props)
        return CreateResult(f"{props['subscription']}/{props['region']}/{props['quota']}",
                            {**props, **answer})

    def diff(self, _id: str, olds: dict[str, Any], news: dict[str, Any]) -> DiffResult:
        keys = ("subscription", "region", "quota")
        return DiffResult(changes=olds.get("value") != news.get("value") or any(
            olds.get(k) != news.get(k) for k in keys),
            replaces=[k for k in keys if olds.get(k) != news.get(k)])

    def update(self, _id: str, _olds: dict[str, Any], news: dict[str, Any]) -> UpdateResult:
        return UpdateResult({**news, **_file(news)})

    def delete(self, _id: str, _props: dict[str, Any]) -> None:
        return None


class QuotaRequest(Resource):
    def __init__(self, name: str, props: dict[str, Any], opts: pulumi.ResourceOptions) -> None:
        super().__init__(QuotaRequestProvider(), name, {**props, "status": None, "state": None},
                         opts)


def emit_quota_request(req: QuotaRequestDesign, prov: pulumi.ProviderResource | None
                       ) -> pulumi.CustomResource:
    """A Microsoft.Quota request for the family's (or region's) vCPUs, protected."""
    return QuotaRequest(req.name, {"subscription": req.scope, "region": req.region,
                                   "quota": req.ident, "value": req.value},
                        pulumi.ResourceOptions(protect=True))
