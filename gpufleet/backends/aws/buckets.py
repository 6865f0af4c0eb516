"""Amazon S3 as gpufleet builds buckets in it: general purpose buckets (S3 Standard) and S3
Express One Zone directory buckets, mounted on the nodes with Mountpoint for Amazon S3. Pure.

Names: docs.aws.amazon.com/AmazonS3/latest/userguide/bucketnamingrules.html (3-63 characters,
lowercase letters, digits, dots and hyphens, a letter or digit at each end; not the reserved
prefixes xn--, sthree-, amzn-s3-demo- nor the suffixes -s3alias, --ol-s3, .mrap, --x-s3,
--table-s3); directory buckets: .../directory-bucket-naming-rules.html (`base--zone-id--x-s3`,
in one Availability Zone given by its zone id, e.g. use1-az4)."""

from __future__ import annotations

import re
from types import MappingProxyType

from gpufleet.traitparts import BucketClass, BucketService, SecretStore

BUCKETS = BucketService(
    "Amazon S3",
    MappingProxyType({
        "standard": BucketClass("standard", "S3 Standard (general purpose bucket)"),
        "express": BucketClass(
            "express", "S3 Express One Zone (directory bucket)", zonal=True,
            rule="a directory bucket lives in one Availability Zone, named by its zone id "
                 "(`zone: use1-az4`), and its name ends with --<zone id>--x-s3 "
                 "(docs.aws.amazon.com/AmazonS3/latest/userguide/"
                 "directory-bucket-naming-rules.html)")}),
    63, re.compile(r"(?!xn--|sthree-|amzn-s3-demo-)(?!.*(-s3alias|--ol-s3|\.mrap|--table-s3)$)"
                   r"(?!.*\.\.)(?!\d+\.\d+\.\d+\.\d+$)[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]"),
    "docs.aws.amazon.com/AmazonS3/latest/userguide/bucketnamingrules.html",
    "Mountpoint for Amazon S3", "docs.aws.amazon.com/AmazonS3/latest/userguide/mountpoint.html",
    "mountpoint-s3", request_mib=(8, 8),
    request_source="github.com/awslabs/mountpoint-s3 (mount-s3 --help: --read-part-size "
                   "and --write-part-size default 8388608)")


def express_suffix(zone: str) -> str:
    return f"--{zone}--x-s3"



# the nodes read an R2 bucket's credentials from Secrets Manager in their own region
# (docs.aws.amazon.com/secretsmanager/latest/apireference/API_GetSecretValue.html)
SECRETS = SecretStore("AWS Secrets Manager", "aws",
                      "docs.aws.amazon.com/secretsmanager/latest/apireference/"
                      "API_GetSecretValue.html",
                      lambda fleet, region, get: region)
