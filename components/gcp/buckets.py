"""Cloud Storage buckets: regional, uniform bucket-level access, public access prevention
enforced, Google-managed encryption (always on), versioning and lifecycle as the plan says,
protected from deletion. Makes no decisions: every name and setting comes from the plan."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pulumi
import pulumi_gcp as gcp

from gpufleet.compile import BucketDesign, naming


def emit_bucket(b: BucketDesign, prov: pulumi.ProviderResource | None,
                fleets: Mapping[str, Any] | None = None) -> pulumi.Resource:
    rules = []
    prefixes = [b.prefix] if b.prefix else None
    if b.expire_days is not None:
        rules.append(gcp.storage.BucketLifecycleRuleArgs(
            action=gcp.storage.BucketLifecycleRuleActionArgs(type="Delete"),
            condition=gcp.storage.BucketLifecycleRuleConditionArgs(
                age=b.expire_days, matches_prefixes=prefixes)))
    if b.noncurrent_days is not None:
        rules.append(gcp.storage.BucketLifecycleRuleArgs(
            action=gcp.storage.BucketLifecycleRuleActionArgs(type="Delete"),
            condition=gcp.storage.BucketLifecycleRuleConditionArgs(
                days_since_noncurrent_time=b.noncurrent_days, matches_prefixes=prefixes)))
    bucket = gcp.storage.Bucket(
        b.name, name=b.name, location=b.region.upper(), storage_class="STANDARD",
        uniform_bucket_level_access=True, public_access_prevention="enforced",
        versioning=gcp.storage.BucketVersioningArgs(enabled=b.versioning),
        lifecycle_rules=rules or None, force_destroy=False, labels=dict(b.labels),
        project=b.provider.scope if b.provider is not None else None,
        opts=pulumi.ResourceOptions(provider=prov, protect=True))
    grant_readers(b, bucket, prov)
    return bucket


def grant_readers(b: BucketDesign, bucket: pulumi.Resource,
                  prov: pulumi.ProviderResource | None) -> None:
    """Each mounting fleet's service account on the bucket: objectViewer to read, objectUser
    to write (cloud.google.com/storage/docs/access-control/iam-roles)."""
    for r in b.readers:
        if not r.mounted or r.identity is None:
            continue
        gcp.storage.BucketIAMMember(
            naming.child(b.name, r.fleet), bucket=b.name,
            role="roles/storage.objectViewer" if r.read_only else "roles/storage.objectUser",
            member=f"serviceAccount:{r.identity}",
            opts=pulumi.ResourceOptions(provider=prov, depends_on=[bucket]))
