"""Input: YAML files -> located, schema-checked and normalised specs (or located diagnostics)."""

from gpufleet.input import stackconfig
from gpufleet.input.bucketspec import BucketMount, BucketSpec
from gpufleet.input.checks import region_of_zone
from gpufleet.input.checks.reservations import parse_time
from gpufleet.input.files import read_small_text
from gpufleet.input.jsonfile import (
    JsonInputError,
    parse_json,
    parse_json_marked,
    read_bounded,
    read_json_file,
    uncollected,
)
from gpufleet.input.loader import MAX_FILE_BYTES, LoadResult, load_text
from gpufleet.input.lockspec import LOCK_FILE, Lock, LockEntry, offer_place
from gpufleet.input.quotaspec import QuotaLimit, QuotaSettings
from gpufleet.input.schema_files import schema_text
from gpufleet.input.schema_files import validator as schema_validator
from gpufleet.input.spec import (
    EMPTY_MAP,
    NO_ACCESS,
    AccessSpec,
    BackendConfig,
    ControlPlaneSpec,
    FilesystemSpec,
    FleetSpec,
    GatewaySpec,
    Inputs,
    Origin,
    ProfileSpec,
    ReservationSpec,
    ResourcesSpec,
    SshFleetSpec,
    VolumeSpec,
    access_for,
)
from gpufleet.input.stackedit import set_gateways
from gpufleet.input.synced import (
    SyncedError,
    SyncedGateway,
    check_targets,
    is_ipv4,
    parse_gateways,
)
from gpufleet.input.validate import Validated, load_lock, validate_paths, validate_texts

__all__ = [
    "EMPTY_MAP",
    "LOCK_FILE",
    "MAX_FILE_BYTES",
    "NO_ACCESS",
    "AccessSpec",
    "BackendConfig",
    "BucketMount",
    "BucketSpec",
    "ControlPlaneSpec",
    "FilesystemSpec",
    "FleetSpec",
    "GatewaySpec",
    "Inputs",
    "JsonInputError",
    "LoadResult",
    "Lock",
    "LockEntry",
    "Origin",
    "ProfileSpec",
    "QuotaLimit",
    "QuotaSettings",
    "ReservationSpec",
    "ResourcesSpec",
    "SshFleetSpec",
    "SyncedError",
    "SyncedGateway",
    "Validated",
    "VolumeSpec",
    "access_for",
    "check_targets",
    "is_ipv4",
    "load_lock",
    "load_text",
    "offer_place",
    "parse_gateways",
    "parse_json",
    "parse_json_marked",
    "parse_time",
    "read_bounded",
    "read_json_file",
    "read_small_text",
    "region_of_zone",
    "schema_text",
    "schema_validator",
    "set_gateways",
    "stackconfig",
    "uncollected",
    "validate_paths",
    "validate_texts",
]
