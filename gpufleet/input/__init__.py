"""Input: YAML files -> located, schema-checked and normalised specs (or located diagnostics)."""

from gpufleet.input.checks import RESERVATION_BACKENDS, region_of_zone
from gpufleet.input.schema_files import schema_text
from gpufleet.input.spec import (
    EMPTY_MAP,
    SUPPORTED_BACKENDS,
    BackendConfig,
    FleetSpec,
    GatewaySpec,
    Inputs,
    ProfileSpec,
    ResourcesSpec,
)
from gpufleet.input.validate import Validated, validate_paths

__all__ = [
    "EMPTY_MAP", "RESERVATION_BACKENDS", "SUPPORTED_BACKENDS", "BackendConfig", "FleetSpec",
    "GatewaySpec", "Inputs", "ProfileSpec", "ResourcesSpec", "Validated", "region_of_zone",
    "schema_text", "validate_paths",
]
