"""The object stores buckets are built in: each cloud's own (its traits' ``buckets``) and
Cloudflare R2, which is no compute backend (no instances, no networks: only buckets, through
the pulumi-cloudflare provider). Pure data, shared by every stage."""

from __future__ import annotations

import re
from types import MappingProxyType

from gpufleet.backends import is_backend, traits_of
from gpufleet.traitparts import BucketClass, BucketService

R2_CLOUD = "r2"
# developers.cloudflare.com/r2/buckets/create-buckets/ ("Bucket names can only contain
# lowercase letters (a-z), numbers (0-9), and hyphens (-) ... between 3 and 63 characters")
R2 = BucketService(
    "Cloudflare R2",
    MappingProxyType({
        "standard": BucketClass("standard", "R2 Standard"),
        "infrequent": BucketClass("infrequent", "R2 Infrequent Access")}),
    63, re.compile(r"[a-z0-9][a-z0-9-]{1,61}[a-z0-9]"),
    "developers.cloudflare.com/r2/buckets/create-buckets/",
    "Mountpoint for Amazon S3 against R2's S3 endpoint",
    "developers.cloudflare.com/r2/api/s3/api/ (R2's S3-compatible API); "
    "github.com/awslabs/mountpoint-s3 (--endpoint-url)", "mountpoint-s3", request_mib=(8, 8),
    request_source="github.com/awslabs/mountpoint-s3 (mount-s3 --help: --read-part-size "
                   "and --write-part-size default 8388608)")
# R2's locations (location hints): developers.cloudflare.com/r2/reference/data-location/
R2_LOCATIONS = frozenset({"wnam", "enam", "weur", "eeur", "apac", "oc"})


def bucket_clouds() -> tuple[str, ...]:
    """The clouds buckets can be built in: every backend with an object store, and R2."""
    from gpufleet.backends import all_backends

    return (*(t.name for t in all_backends() if t.buckets is not None), R2_CLOUD)


def bucket_service(cloud: str) -> BucketService | None:
    """The object store of ``cloud`` (None: it has none gpufleet builds)."""
    if cloud == R2_CLOUD:
        return R2
    return traits_of(cloud).buckets if is_backend(cloud) else None


# A node mounts an R2 bucket with S3 credentials made from an account API token scoped to the
# bucket: the access key id is the token's id, the secret access key the SHA-256 of its value
# (developers.cloudflare.com/r2/api/tokens/, "Get S3 API credentials from an API token").
# The permission groups a bucket-scoped token names (the same ids in every account): "Workers
# R2 Storage Bucket Item Read" (the id in that page's example policy) and "... Item Write"
# (read, write and list objects), as Cloudflare's permission groups list gives them.
R2_READ_GROUP = "6a018a9f2fc74eb6b293b0c548f38b39"
R2_WRITE_GROUP = "2efd5506f9c8494dacb1fa10a3e7d5b6"


def r2_endpoint(account: str) -> str:
    """R2's S3 endpoint for an account (buckets without a jurisdiction)."""
    return f"https://{account}.r2.cloudflarestorage.com"


def r2_token_resource(account: str, bucket: str) -> str:
    """The access-policy resource naming one bucket (no jurisdiction: `default`)."""
    return f"com.cloudflare.edge.r2.bucket.{account}_default_{bucket}"


def r2_secret_name(fleet: str, bucket: str) -> str:
    """The secret holding a fleet's credentials for an R2 bucket, in the fleet's own cloud:
    letters, digits and hyphens fit each store's rule (Secrets Manager, Secret Manager, Key
    Vault's 127 characters)."""
    return f"gpufleet-{fleet}-r2-{bucket}"
