"""Cloudflare R2 buckets through the pulumi-cloudflare provider: the store charges no egress,
so it holds the central copy fleets on every cloud read. R2 buckets are private (reached with
S3 credentials; no public bucket access unless enabled) and encrypted at rest by R2 itself
(developers.cloudflare.com/r2/reference/data-security/). Protected from deletion. The
account comes from the bucket's `account_id`, else the stack config
`gpufleet:cloudflareAccountId`; the API token is the provider's (CLOUDFLARE_API_TOKEN)."""

from __future__ import annotations

import hashlib
import json
from typing import Any

import pulumi

from gpufleet.compile import BucketDesign, BucketMountDesign
from gpufleet.objectstores import R2_READ_GROUP, R2_WRITE_GROUP, r2_token_resource

from .sdk import package_module

SDK = "pulumi_cloudflare"

ACCOUNT_CONFIG = "cloudflareAccountId"
CLASSES = {"standard": "Standard", "infrequent": "InfrequentAccess"}


def _module(name: str, what: str) -> Any:
    """One module of the Cloudflare SDK (not the package's every resource)."""
    try:
        return package_module(SDK, name)
    except ModuleNotFoundError as e:
        raise pulumi.RunError(f"{e}: pip install gpufleet ({what})") from None


def emit_bucket(b: BucketDesign, parent: pulumi.Resource | None = None) -> pulumi.Resource:
    account = b.account or pulumi.Config("gpufleet").get(ACCOUNT_CONFIG)
    if not account:
        raise pulumi.RunError(f"bucket '{b.name}': no Cloudflare account: set `account_id` on "
                              f"the bucket or `pulumi config set gpufleet:{ACCOUNT_CONFIG} ID`")
    sdk = _module("r2_bucket", "R2 buckets")
    bucket: pulumi.Resource = sdk.R2Bucket(
        b.name, account_id=account, name=b.name, location=b.region,
        storage_class=CLASSES[b.klass],
        opts=pulumi.ResourceOptions(protect=True, parent=parent))
    return bucket


def credentials(m: BucketMountDesign, fleet: str, parent: pulumi.Resource | None = None
                ) -> pulumi.Output[str]:
    """A fleet's S3 credentials for one R2 bucket, as the secret the nodes read (JSON): an
    account API token scoped to the bucket alone, Item Read for a read-only mount and Item
    Write (read, write, list) otherwise; the access key id is the token's id and the secret
    access key the SHA-256 of its value (developers.cloudflare.com/r2/api/tokens/). An
    account token outlives the person who ran `pulumi up`."""
    assert m.account is not None, "an R2 mount carries its Cloudflare account"
    sdk = _module("account_token", "R2 mounts")
    group = R2_READ_GROUP if m.read_only else R2_WRITE_GROUP
    token = sdk.AccountToken(
        f"{fleet}-r2-{m.bucket}", account_id=m.account,
        name=f"gpufleet {fleet} {'reads' if m.read_only else 'writes'} {m.bucket}",
        policies=[{"effect": "allow", "permission_groups": [{"id": group}],
                   "resources": json.dumps({r2_token_resource(m.account, m.bucket): "*"})}],
        opts=pulumi.ResourceOptions(parent=parent))
    return pulumi.Output.secret(pulumi.Output.all(token.id, token.value).apply(
        lambda kv: json.dumps({"access_key_id": kv[0],
                               "secret_access_key": hashlib.sha256(
                                   str(kv[1]).encode()).hexdigest()})))


def offline_outputs(typ: str, name: str) -> dict[str, Any]:
    """What `gpufleet plan` answers for an R2 resource's computed outputs: a token's value
    (a placeholder that says so; the real one exists only after `pulumi up`)."""
    if typ == "cloudflare:index/accountToken:AccountToken":
        return {"value": f"mock-{name}-token-value"}
    return {}
