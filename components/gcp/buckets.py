"""Cloud Storage buckets: regional, uniform bucket-level access, public access prevention
enforced, Google-managed encryption (always on), versioning and lifecycle as the plan says,
protected from deletion. Makes no decisions: every name and setting comes from the plan."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import pulumi
import pulumi_gcp as gcp

from gpufleet.compile import BucketDesign, BucketMountDesign, FleetDesign, naming


def emit_bucket(b: BucketDesign, prov: pulumi.ProviderResource | None,
                fleets: Mapping[str, Any] | None = None,
                parent: pulumi.Resource | None = None) -> pulumi.Resource:
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
        opts=pulumi.ResourceOptions(provider=prov, protect=True, parent=parent))
    grant_readers(b, bucket, prov, parent)
    return bucket


def grant_readers(b: BucketDesign, bucket: pulumi.Resource,
                  prov: pulumi.ProviderResource | None,
                  parent: pulumi.Resource | None = None) -> None:
    """Each mounting fleet's service account on the bucket: objectViewer to read, objectUser
    to write (cloud.google.com/storage/docs/access-control/iam-roles)."""
    for r in b.readers:
        if not r.mounted or r.identity is None:
            continue
        gcp.storage.BucketIAMMember(
            naming.child(b.name, r.fleet), bucket=b.name,
            role="roles/storage.objectViewer" if r.read_only else "roles/storage.objectUser",
            member=f"serviceAccount:{r.identity}",
            opts=pulumi.ResourceOptions(provider=prov, depends_on=[bucket], parent=parent))


def emit_r2_secrets(plan: FleetDesign, fleet: Any,
                    creds: Sequence[tuple[BucketMountDesign, pulumi.Output[str]]],
                    prov: pulumi.ProviderResource | None) -> None:
    """Each R2 mount's credentials in Secret Manager (automatic replication), readable by
    the nodes' service account alone (roles/secretmanager.secretAccessor on that secret:
    cloud.google.com/secret-manager/docs/access-control)."""
    account = getattr(plan.options, "service_account", None)
    assert account, "an R2 mount on gcp needs the nodes' service account (compile checks)"
    child = pulumi.ResourceOptions(provider=prov, parent=fleet)  # the fleet owns them
    for m, value in creds:
        secret = gcp.secretmanager.Secret(
            naming.child(plan.name, f"r2-{m.bucket}"), secret_id=m.secret,
            replication=gcp.secretmanager.SecretReplicationArgs(
                auto=gcp.secretmanager.SecretReplicationAutoArgs()),
            labels={"gpufleet-fleet": plan.name}, opts=child)
        gcp.secretmanager.SecretVersion(
            naming.child(plan.name, f"r2-{m.bucket}-value"), secret=secret.id,
            secret_data=value, opts=child)
        gcp.secretmanager.SecretIamMember(
            naming.child(plan.name, f"r2-{m.bucket}-reader"), secret_id=secret.id,
            role="roles/secretmanager.secretAccessor", member=f"serviceAccount:{account}",
            opts=child)
