"""Amazon S3 buckets: a general purpose bucket with every public access blocked, ACLs off
(bucket owner enforced), SSE-S3 encryption, versioning and lifecycle as the plan says; or an
S3 Express One Zone directory bucket in its zone (private and encrypted by S3 itself). Each
protected from deletion. Makes no decisions: every name and setting comes from the plan."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import pulumi
import pulumi_aws as aws

from gpufleet.compile import BucketDesign, BucketMountDesign, FleetDesign, naming


def emit_bucket(b: BucketDesign, prov: pulumi.ProviderResource | None,
                fleets: Mapping[str, Any] | None = None,
                parent: pulumi.Resource | None = None) -> pulumi.Resource:
    opts = pulumi.ResourceOptions(provider=prov, protect=True, parent=parent)
    child = pulumi.ResourceOptions(provider=prov, parent=parent)
    tags = dict(b.labels)
    if b.zone:
        bucket: pulumi.CustomResource = aws.s3.DirectoryBucket(
            b.name, bucket=b.name, location=aws.s3.DirectoryBucketLocationArgs(
                name=b.zone, type="AvailabilityZone"), force_destroy=False, tags=tags,
            opts=opts)
        _lifecycle(b, bucket, child)
        return bucket
    bucket = aws.s3.Bucket(b.name, bucket=b.name, force_destroy=False, tags=tags, opts=opts)
    aws.s3.BucketPublicAccessBlock(
        naming.child(b.name, "public-access"), bucket=bucket.id, block_public_acls=True,
        block_public_policy=True, ignore_public_acls=True, restrict_public_buckets=True,
        opts=child)
    aws.s3.BucketOwnershipControls(
        naming.child(b.name, "ownership"), bucket=bucket.id,
        rule=aws.s3.BucketOwnershipControlsRuleArgs(object_ownership="BucketOwnerEnforced"),
        opts=child)
    aws.s3.BucketServerSideEncryptionConfiguration(
        naming.child(b.name, "encryption"), bucket=bucket.id,
        rules=[aws.s3.BucketServerSideEncryptionConfigurationRuleArgs(
            apply_server_side_encryption_by_default=aws.s3.
            BucketServerSideEncryptionConfigurationRuleApplyServerSideEncryptionByDefaultArgs(
                sse_algorithm="AES256"), bucket_key_enabled=True)], opts=child)
    if b.versioning:
        aws.s3.BucketVersioning(
            naming.child(b.name, "versioning"), bucket=bucket.id,
            versioning_configuration=aws.s3.BucketVersioningVersioningConfigurationArgs(
                status="Enabled"), opts=child)
    _lifecycle(b, bucket, child)
    return bucket


def _lifecycle(b: BucketDesign, bucket: pulumi.CustomResource,
               opts: pulumi.ResourceOptions) -> None:
    if b.expire_days is None and b.noncurrent_days is None:
        return
    rule = aws.s3.BucketLifecycleConfigurationRuleArgs(
        id="gpufleet-expiry", status="Enabled",
        filter=aws.s3.BucketLifecycleConfigurationRuleFilterArgs(prefix=b.prefix),
        expiration=aws.s3.BucketLifecycleConfigurationRuleExpirationArgs(days=b.expire_days)
        if b.expire_days is not None else None,
        noncurrent_version_expiration=aws.s3.
        BucketLifecycleConfigurationRuleNoncurrentVersionExpirationArgs(
            noncurrent_days=b.noncurrent_days) if b.noncurrent_days is not None else None)
    aws.s3.BucketLifecycleConfiguration(naming.child(b.name, "lifecycle"),
                                        bucket=bucket.id, rules=[rule], opts=opts)


def emit_r2_secrets(plan: FleetDesign, fleet: Any,
                    creds: Sequence[tuple[BucketMountDesign, pulumi.Output[str]]],
                    prov: pulumi.ProviderResource | None) -> None:
    """Each R2 mount's credentials in Secrets Manager, in the fleet's region, under the name
    the nodes' role may read (backends.aws.compile.bucket_policy). Deleted at once when the
    mount goes (no recovery window): the token behind it is revoked with it, and a new one
    is made when the mount comes back. Under the fleet's component: the fleet owns them."""
    child = pulumi.ResourceOptions(provider=prov, parent=fleet)
    for m, value in creds:
        secret = aws.secretsmanager.Secret(
            naming.child(plan.name, f"r2-{m.bucket}"), name=m.secret,
            description=f"gpufleet: fleet {plan.name}'s S3 credentials for R2 bucket "
                        f"{m.bucket}", recovery_window_in_days=0, opts=child)
        aws.secretsmanager.SecretVersion(
            naming.child(plan.name, f"r2-{m.bucket}-value"), secret_id=secret.id,
            secret_string=value, opts=child)
