"""What the backends file's `buckets:` declares (gpufleet/input/checks/buckets.py reads it)."""

from __future__ import annotations

from dataclasses import dataclass

from gpufleet.diagnostics import Diagnostic, Severity


@dataclass(frozen=True, slots=True)
class BucketMount:
    """A fleet whose nodes mount a bucket, and the data it moves each month."""

    fleet: str
    path: str
    read_only: bool
    read_gb_per_month: float | None = None
    write_gb_per_month: float | None = None


@dataclass(frozen=True, slots=True)
class BucketSpec:
    name: str  # the bucket's name in its store (global there)
    cloud: str  # a backend with an object store, or "r2"
    region: str  # AWS/GCP/Azure region; R2: a location hint (wnam, enam, weur, ...)
    klass: str  # "standard", "express" (S3 Express One Zone), "premium", "infrequent"
    mounts: tuple[BucketMount, ...]
    file: str  # where it is declared, for diagnostics of later stages
    line: int
    column: int
    zone: str | None = None  # S3 Express One Zone: the zone id (use1-az4)
    versioning: bool = False
    expire_days: int | None = None  # lifecycle: objects (under ``prefix``) expire after
    noncurrent_days: int | None = None  # lifecycle: old versions expire after
    prefix: str = ""  # lifecycle rules apply under it ("" = the whole bucket)
    cache_of: str | None = None  # the central bucket this one is a regional copy of
    expected_gb: float | None = None  # how much it holds (prices its storage)
    account: str | None = None  # R2: the Cloudflare account id

    def at(self, code: str, message: str, hint: str | None = None,
           severity: Severity = Severity.ERROR) -> Diagnostic:
        return Diagnostic(self.file, self.line, self.column, code, message,
                          path=("buckets", self.name), severity=severity, hint=hint)
