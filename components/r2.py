"""Cloudflare R2 buckets through the pulumi-cloudflare provider: the store charges no egress,
so it holds the central copy fleets on every cloud read. R2 buckets are private (reached with
S3 credentials; no public bucket access unless enabled) and encrypted at rest by R2 itself
(developers.cloudflare.com/r2/reference/data-security/). Protected from deletion. The
account comes from the bucket's `account_id`, else the stack config
`gpufleet:cloudflareAccountId`; the API token is the provider's (CLOUDFLARE_API_TOKEN)."""

from __future__ import annotations

import pulumi

from gpufleet.compile import BucketDesign

from .sdk import package_module

SDK = "pulumi_cloudflare"

ACCOUNT_CONFIG = "cloudflareAccountId"
CLASSES = {"standard": "Standard", "infrequent": "InfrequentAccess"}


def emit_bucket(b: BucketDesign) -> pulumi.Resource:
    account = b.account or pulumi.Config("gpufleet").get(ACCOUNT_CONFIG)
    if not account:
        raise pulumi.RunError(f"bucket '{b.name}': no Cloudflare account: set `account_id` on "
                              f"the bucket or `pulumi config set gpufleet:{ACCOUNT_CONFIG} ID`")
    try:
        sdk = package_module(SDK, "r2_bucket")  # not the package's every resource
    except ModuleNotFoundError as e:
        raise pulumi.RunError(f"{e}: pip install gpufleet (R2 buckets)") from None
    bucket: pulumi.Resource = sdk.R2Bucket(
        b.name, account_id=account, name=b.name, location=b.region,
        storage_class=CLASSES[b.klass], opts=pulumi.ResourceOptions(protect=True))
    return bucket
