"""The small records a backend's traits hold (``gpufleet.traits`` re-exports them): its
capacity errors, physical-name rules and budgets, the network quotas its stack counts, and
what unlocks a cluster fabric. Pure data."""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True, slots=True)
class CapacityCode:
    """A cloud's documented out-of-capacity error (what makes `gpufleet up` fall back)."""

    backend: str
    code: str  # the cloud's error code, or the stable phrase of its message
    source: str


@dataclass(frozen=True, slots=True)
class NameRule:
    """What a cloud accepts as the physical name of one resource type."""

    max_len: int
    source: str  # the API reference or documentation page the limit comes from
    pattern: re.Pattern[str] | None = None  # the whole name must match
    # the input that holds an explicit name; without it the provider auto-names the resource
    # (the logical name and a random suffix of the backend's `autoname_suffix` length)
    name_input: str | None = None


@dataclass(frozen=True, slots=True)
class NameBudget:
    """The longest fleet or gateway name whose every physical name fits, on one backend: the
    limit of its tightest resource minus the longest role gpufleet appends and the suffix."""

    max_len: int
    longest: str  # the role of the tightest name, as in `<name>-ssh-from-bastion`
    resource: str  # its resource type token


@dataclass(frozen=True, slots=True)
class FabricUnlock:
    """A backends-file key that makes an otherwise unbuildable cluster fabric buildable on
    some instance types (an image the user brings, carrying what gpufleet cannot install)."""

    key: str  # the backend entry's key, e.g. gcp's `tcpx_image`
    instance_types: tuple[str, ...]  # the types it unlocks (others stay refused)
    hint: str  # what to set it to, and where such an image comes from


@dataclass(frozen=True, slots=True)
class NetworkQuota:
    """A quota the stack's own network resources count against, per region (or per project
    or account, ``scope`` "global")."""

    name: str  # as the cloud's quota console shows it
    resource: str  # the resource type token counted
    default: int | None  # None: no documented default (the project's console has it)
    raise_how: str  # the quota code, or where to ask for more
    source: str
    live: str = ""  # the id the cloud's quota API gives it (preflight reads limit and use)
    scope: str = "region"  # "region", or "global" for a project- or account-wide quota
    # resources that do not count: (input, value) pairs (an INTERNAL address, say)
    skip: tuple[tuple[str, str], ...] = ()

    def counts(self, inputs: Mapping[str, Any]) -> bool:
        return not any(inputs.get(k) == v for k, v in self.skip)


@dataclass(frozen=True, slots=True)
class QuotaAsk:
    """What one node of a fleet is, for the quotas it counts against."""

    instance_type: str
    spot: bool
    gpu: str | None  # "H100"; None for a CPU-only machine
    gpu_memory_gib: float | None
    gpus: int  # per node
    vcpus: int  # per node


@dataclass(frozen=True, slots=True)
class QuotaId:
    """One quota a node counts against, as the cloud's quota API names it."""

    title: str  # as the cloud's console shows it
    ident: str  # AWS quota code, GCP quota id, Azure quota (family) name
    unit: str  # "vCPUs", "GPUs"
    per_node: int
    source: str  # the documentation page the identifier comes from
    scope: str = "region"  # "region", or "global" (the whole account or project)
    dimensions: tuple[tuple[str, str], ...] = ()  # GCP: (("gpu_family", "NVIDIA_H100"),)
    live: str = ""  # the name preflight's reader reads its limit and use by (default: ident)
    requestable: bool = True  # the cloud's quota resource can file an increase for it
    every_market: bool = False  # on-demand and spot nodes count against it alike


@dataclass(frozen=True, slots=True)
class BucketClass:
    """A storage class of a cloud's object store that gpufleet builds buckets of."""

    key: str  # as the backends file names it: "standard", "express", "premium"
    title: str  # the cloud's own name
    zonal: bool = False  # the bucket lives in one zone (S3 Express One Zone)
    rule: str = ""  # what its names and places must be, beside the store's own rule


@dataclass(frozen=True, slots=True)
class BucketService:
    """A cloud's object store as gpufleet builds buckets in it: the classes, the name rule
    (a bucket name is global in the store), the FUSE client the nodes mount it with."""

    title: str  # "Amazon S3", "Cloud Storage", "Azure Blob Storage", "Cloudflare R2"
    classes: Mapping[str, BucketClass]
    name_max: int
    name_pattern: re.Pattern[str]
    name_source: str  # the naming rules page
    client: str  # the FUSE client the nodes mount a bucket with
    client_source: str
    client_key: str = ""  # how the mount script names it: mountpoint-s3, gcsfuse, blobfuse2
    # the name of a bucket's own account in the store (Azure: a storage account per bucket)
    account_of: Callable[[str], str] | None = None
    # MiB its client moves per request reading and writing large files (None: not one per
    # part), and where the figure comes from: what the bill counts requests by
    request_mib: tuple[int | None, int | None] = (None, None)
    request_source: str = ""


@dataclass(frozen=True, slots=True)
class SecretStore:
    """Where a cloud's nodes read a secret with their own identity (R2's S3 credentials for
    a bucket mount): the store, the mount script's way to read it, and the store's location
    for a fleet (its region, project or vault name)."""

    title: str  # "AWS Secrets Manager", "Secret Manager", "Azure Key Vault"
    fetch: str  # the mount script's reader: aws, gcp or azure
    source: str  # the API page the reader follows
    # (fleet name, fleet region, a key's value in the backend entry) -> the location the
    # reader is given
    locate: Callable[[str, str, Callable[[str], Any]], str]
