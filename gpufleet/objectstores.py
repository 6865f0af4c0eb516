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
    "github.com/awslabs/mountpoint-s3 (--endpoint-url)", "mountpoint-s3")
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
