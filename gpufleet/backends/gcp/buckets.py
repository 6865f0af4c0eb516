"""Cloud Storage as gpufleet builds buckets in it: regional Standard buckets with uniform
bucket-level access and public access prevention enforced, mounted on the nodes with Cloud
Storage FUSE. Pure.

Names: cloud.google.com/storage/docs/buckets#naming (3-63 characters: lowercase letters,
digits, dashes, underscores and dots, a letter or digit at each end; not beginning with
"goog" nor containing "google")."""

from __future__ import annotations

import re
from types import MappingProxyType

from gpufleet.traitparts import BucketClass, BucketService, SecretStore

BUCKETS = BucketService(
    "Cloud Storage",
    MappingProxyType({"standard": BucketClass("standard", "Standard storage")}),
    63, re.compile(r"(?!goog)(?!.*google)[a-z0-9][a-z0-9_.-]{1,61}[a-z0-9]"),
    "cloud.google.com/storage/docs/buckets#naming",
    "Cloud Storage FUSE", "cloud.google.com/storage/docs/cloud-storage-fuse/overview",
    "gcsfuse", request_mib=(200, None),
    # a sequential read is one ranged GET per 200 MB; a file written is uploaded whole
    request_source="cloud.google.com/storage/docs/cloud-storage-fuse/config-file "
                   "(sequential-read-size-mb, default 200)")


# the nodes read an R2 bucket's credentials from Secret Manager in the backend's project
SECRETS = SecretStore("Secret Manager", "gcp",
                      "cloud.google.com/secret-manager/docs/reference/rest/v1/"
                      "projects.secrets.versions/access",
                      lambda fleet, region, get: str(get("project_id") or ""))
