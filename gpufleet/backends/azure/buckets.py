"""Azure Blob Storage as gpufleet builds buckets in it: a container in a storage account of its
own (StorageV2 Hot for standard, BlockBlobStorage for premium), anonymous access off, HTTPS
and TLS 1.2 only, mounted on the nodes with BlobFuse2. Pure.

Names: a container 3-63 characters of lowercase letters, digits and single hyphens, a letter or
digit first; a storage account 3-24 lowercase letters and digits, globally unique, derived
from the bucket's name (learn.microsoft.com/azure/azure-resource-manager/management/
resource-name-rules#microsoftstorage)."""

from __future__ import annotations

import re
from types import MappingProxyType

from gpufleet.traitparts import BucketClass, BucketService, SecretStore

BUCKETS = BucketService(
    "Azure Blob Storage",
    MappingProxyType({
        "standard": BucketClass("standard", "Hot tier, StorageV2 (general purpose v2)"),
        "premium": BucketClass("premium", "Premium block blobs (BlockBlobStorage)",
                               rule="premium block blob accounts are locally redundant (LRS)"
                                    " and have no Hot/Cool tiers")}),
    63, re.compile(r"(?!.*--)[a-z0-9][a-z0-9-]{1,61}[a-z0-9]"),
    "learn.microsoft.com/azure/azure-resource-manager/management/resource-name-rules"
    "#microsoftstorage",
    "BlobFuse2", "learn.microsoft.com/azure/storage/blobs/blobfuse2-what-is", "blobfuse2",
    account_of=lambda bucket: account_name(bucket), request_mib=(16, 16),
    request_source="gpufleet's BlobFuse2 configuration (block_cache block-size-mb: 16)")


def account_name(bucket: str) -> str:
    """The storage account of a bucket: its letters and digits (at most 16) and 8 of a digest,
    so a name that differs only in hyphens still gets an account of its own."""
    letters = re.sub(r"[^a-z0-9]", "", bucket)[:16]
    return letters + _digest(bucket)[:8]


def vault_name(fleet: str, subscription: str) -> str:
    """The fleet's Key Vault: 3-24 letters, digits and hyphens, a letter first, globally
    unique (learn.microsoft.com/azure/azure-resource-manager/management/resource-name-rules
    #microsoftkeyvault): `gfkv` and 20 of a digest of the subscription and the fleet."""
    return "gfkv" + _digest(f"{subscription}/{fleet}")[:20]


def _digest(text: str) -> str:
    import hashlib  # here, not at import: OpenSSL's load is a tenth of validate's start

    return hashlib.sha256(text.encode()).hexdigest()


# the nodes read an R2 bucket's credentials from a Key Vault of their fleet's own
SECRETS = SecretStore("Azure Key Vault", "azure",
                      "learn.microsoft.com/rest/api/keyvault/secrets/get-secret/get-secret",
                      lambda fleet, region, get: vault_name(
                          fleet, str(get("subscription_id") or "")))
